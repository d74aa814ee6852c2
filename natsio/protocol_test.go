package natsio

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

func TestParseCount(t *testing.T) {
	for _, tc := range []struct {
		body    string
		max     int
		want    int
		errPart string // empty: must succeed
	}{
		{"1", 10, 1, ""},
		{"10", 10, 10, ""},
		{" 7\n", 10, 7, ""},
		{"+3", 10, 3, ""},
		{"0", 10, 0, "count is 0"},
		{"-0", 10, 0, "count is 0"},
		{"-5", 10, 0, "count -5 is negative"},
		{"-99999999999999999999999", 10, 0, "is negative"},
		{"11", 10, 0, "count 11 is too large: at most 10"},
		{"99999999999999999999999", 10, 0, "too large"},
		{"abc", 10, 0, `count "abc" is not a decimal number`},
		{"1e3", 10, 0, "not a decimal number"},
		{"0x10", 10, 0, "not a decimal number"},
		{"", 10, 0, "count missing"},
		{"  \n", 10, 0, "count missing"},
		{"-", 10, 0, "not a decimal number"},
		{"\x00\xff", 10, 0, `"\x00\xff" is not a decimal number`},
		{strings.Repeat("1", 65), 10, 0, "body of 65 bytes is too long"},
	} {
		got, err := parseCount([]byte(tc.body), tc.max)
		if tc.errPart == "" {
			if err != nil || got != tc.want {
				t.Errorf("parseCount(%q) = %d, %v; want %d", tc.body, got, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.errPart) || !errors.Is(err, protocol.ErrBadRequest) {
			t.Errorf("parseCount(%q) = %d, %v; want a bad request containing %q", tc.body, got, err, tc.errPart)
		}
	}
}

func TestParseIDRequest(t *testing.T) {
	for _, tc := range []struct {
		body    string
		want    uint64
		errPart string
	}{
		{"0", 0, ""},
		{"123456789", 123456789, ""},
		{" 42 \r\n", 42, ""},
		{strconv.FormatUint(math.MaxInt64, 10), math.MaxInt64, ""},
		{strconv.FormatUint(math.MaxInt64+1, 10), 0, "sign bit set"},
		{"18446744073709551616", 0, "does not fit in 64 bits"},
		{"-1", 0, "ID -1 is negative"},
		{"12a", 0, `"12a" is not a decimal number`},
		{"", 0, "ID missing"},
		{"\xde\xad\xbe\xef", 0, "not a decimal number"},
		{strings.Repeat("9", 100), 0, "too long"},
		// base32: 13 characters with a letter, in any case.
		{"00000NZK82G1A", 755486507050, ""},
		{" 00000nzk82g1a\n", 755486507050, ""},
		{"0000000000ILO", 1<<10 | 1<<5, ""},
		{"00000NZK82G1U", 0, `"00000NZK82G1U" has "U", not a Crockford base32 character`},
		{"G000000000000", 0, "above 2^64-1"},
		{"7ZZZZZZZZZZZZ", math.MaxInt64, ""},
		{"8ZZZZZZZZZZZZ", 0, "sign bit set"},
	} {
		got, err := parseIDRequest([]byte(tc.body), idForm{})
		if tc.errPart == "" {
			if err != nil || got != tc.want {
				t.Errorf("parseIDRequest(%q) = %d, %v; want %d", tc.body, got, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.errPart) || !errors.Is(err, protocol.ErrBadRequest) {
			t.Errorf("parseIDRequest(%q) = %d, %v; want a bad request containing %q", tc.body, got, err, tc.errPart)
		}
	}
}

// With Uid-Encoding: base32 a body of digits only is base32; with a
// Uid-Layout a negative decimal is a wrapped ID's signed long.
func TestParseIDRequestForms(t *testing.T) {
	for _, tc := range []struct {
		body    string
		form    idForm
		want    uint64
		errPart string
	}{
		{"0000000000010", idForm{}, 10, ""},
		{"0000000000010", idForm{base32: true}, 32, ""},
		{"10", idForm{base32: true}, 0, "has 2 characters, not 13"},
		{"-7024218214296920064", idForm{signed: true}, uint64(1<<64 - 7024218214296920064), ""},
		{"-9223372036854775808", idForm{signed: true}, 1 << 63, ""},
		{"-9223372036854775809", idForm{signed: true}, 0, "below -2^63"},
		{"-99999999999999999999", idForm{signed: true}, 0, "below -2^63"},
		{"9223372036854775808", idForm{signed: true}, 1 << 63, ""},
		{"-7024218214296920064", idForm{}, 0, "is negative"},
	} {
		got, err := parseIDRequest([]byte(tc.body), tc.form)
		if tc.errPart == "" {
			if err != nil || got != tc.want {
				t.Errorf("parseIDRequest(%q, %+v) = %d, %v; want %d", tc.body, tc.form, got, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.errPart) || !errors.Is(err, protocol.ErrBadRequest) {
			t.Errorf("parseIDRequest(%q, %+v) = %d, %v; want a bad request containing %q", tc.body, tc.form, got, err, tc.errPart)
		}
	}
}

// checkBadRequest asserts what every parser error must be: a 400 whose
// description fits one header line.
func checkBadRequest(t *testing.T, body []byte, err error) {
	t.Helper()
	var se *protocol.ServiceError
	if !errors.As(err, &se) || se.Code != protocol.CodeBadRequest {
		t.Fatalf("body %q: error %v is not a 400 *ServiceError", body, err)
	}
	if se.Description == "" || strings.ContainsAny(se.Description, "\r\n") || len(se.Description) > 512 {
		t.Fatalf("body %q: description %q is not one short line", body, se.Description)
	}
}

func FuzzParseCount(f *testing.F) {
	for _, seed := range []string{"1", "100", "0", "-1", "+5", " 12 ", "abc", "", "99999999999999999999", "\x00", "1\n2", "١٢"} {
		f.Add([]byte(seed))
	}
	const max = 1000
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := parseCount(body, max)
		if err != nil {
			checkBadRequest(t, body, err)
			return
		}
		if n < 1 || n > max {
			t.Fatalf("parseCount(%q) = %d, outside 1..%d", body, n, max)
		}
		want, perr := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(body)), "+"), 10, 64)
		if perr != nil || want != uint64(n) {
			t.Fatalf("parseCount(%q) = %d; strconv says %d, %v", body, n, want, perr)
		}
	})
}

func FuzzParseIDRequest(f *testing.F) {
	for _, seed := range []string{"0", "123", "9223372036854775807", "9223372036854775808", "-3", "x", "", "\xff\xfe", " 7 "} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		// A wrapped ID's form accepts whatever the plain one does, as the
		// same ID.
		wrapped, werr := parseIDRequest(body, idForm{signed: true})
		id, err := parseIDRequest(body, idForm{})
		if err != nil {
			checkBadRequest(t, body, err)
			if werr != nil {
				checkBadRequest(t, body, werr)
			}
			return
		}
		if werr != nil || wrapped != id {
			t.Fatalf("parseIDRequest(%q) = %d, but signed %d, %v", body, id, wrapped, werr)
		}
		if id>>63 != 0 {
			t.Fatalf("parseIDRequest(%q) = %d with the sign bit", body, id)
		}
		if _, err := uidcore.DefaultLayout().Parse(id); err != nil {
			t.Fatalf("accepted ID %d does not parse: %v", id, err)
		}
	})
}

func TestMaxBatchFor(t *testing.T) {
	if got := maxBatchFor(100_000, 1<<20, protocol.Binary); got != 100_000 {
		t.Errorf("binary, 1 MiB: %d", got)
	}
	if got := maxBatchFor(100_000, 1<<20, protocol.Decimal); got != 52428 {
		t.Errorf("decimal, 1 MiB: %d", got)
	}
	if got := maxBatchFor(100_000, 800, protocol.Binary); got != 100 {
		t.Errorf("binary, 800 B: %d", got)
	}
}

func TestReplyFor(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		part string
	}{
		{badRequest("count is 0"), 400, "count is 0"},
		{&uidcore.EmptyError{Cause: errors.New("ahead of the wall clock")}, 503, "buffer empty: ahead of the wall clock"},
		{&uidcore.EmptyError{Cause: uidcore.ErrClaimLost}, 503, "worker claim lost"},
		{&uidcore.EmptyError{Cause: uidcore.ErrNotReserved}, 503, "not reserved"},
		{uidcore.ErrClaimLost, 503, "worker claim lost"},
		{uidcore.ErrClosed, 503, "shutting down"},
		{fmt.Errorf("%w: x", uidcore.ErrBufferEmpty), 503, "buffer empty"},
		{&uidcore.ExhaustedError{Second: 1 << 40}, 500, "time field exhausted"},
		{errors.New("boom"), 500, "internal error: boom"},
	} {
		code, desc := replyFor(tc.err)
		if code != tc.code || !strings.Contains(desc, tc.part) {
			t.Errorf("replyFor(%v) = %d %q; want %d containing %q", tc.err, code, desc, tc.code, tc.part)
		}
	}
}

// Descriptions read once: the condition first, then the detail of the
// typed errors behind it (uidcore.Detailer), with no package name and no
// part that repeats the condition, however the layers wrapped them.
func TestReplyForReadsOnce(t *testing.T) {
	epoch := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	exhausted := &uidcore.ExhaustedError{Second: epoch.Unix() - 10, RunwayEnd: epoch.Add(time.Hour)}
	for _, tc := range []struct {
		err  error
		want string
	}{
		// What a future epoch gave before: "time field exhausted: uidcore:
		// ring buffer empty: uidcore: time field exhausted: second … is
		// before the epoch".
		{&uidcore.EmptyError{Cause: exhausted}, "time field exhausted: second 2029-12-31T23:59:50Z is before the epoch"},
		{&uidcore.EmptyError{Cause: &workerid.LostError{WorkerID: 3, Cause: fmt.Errorf("%w (the store's record)", workerid.ErrLeaseTaken)}},
			"worker claim lost: the worker ID's lease has another owner: worker ID 3"},
		{fmt.Errorf("dispenser: %w", &workerid.LostError{WorkerID: 3, Cause: workerid.ErrReleased}), "worker claim lost: lease released: worker ID 3"},
		{&uidcore.EmptyError{Cause: errors.New("demand exceeds the 1024 IDs/s of 1 lane(s)")}, "buffer empty: demand exceeds the 1024 IDs/s of 1 lane(s)"},
		{&uidcore.NotReservedError{WorkerID: 7, Second: 5, Until: 4}, "worker claim has not reserved the time yet: worker ID 7, second 5 > 4"},
		{&sequence.UnavailableError{Name: "orders", Store: "MySQL at db:3306 table UID_SEQUENCE", Err: errors.New("connection refused")},
			`sequence store unavailable: sequence "orders": MySQL at db:3306 table UID_SEQUENCE: connection refused`},
		{uidcore.ErrClosed, "shutting down"},
		{uidcore.ErrBufferEmpty, "buffer empty"},
	} {
		_, desc := replyFor(tc.err)
		if desc != tc.want {
			t.Errorf("replyFor(%v)\n got %q\nwant %q", tc.err, desc, tc.want)
		}
	}
}
