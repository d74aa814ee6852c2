package protocol

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzDecodeDecimalIDs: the decoder of decimal batch replies.
func FuzzDecodeDecimalIDs(f *testing.F) {
	for _, s := range []string{"", "1", "1\n2\n3", " 4 \n 5 ", "1\n\n2", "18446744073709551615", "18446744073709551616", "-1", "1\r\n2", "x", "\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ids, err := Decimal.Decode(nil, data)
		if err != nil {
			if len(err.Error()) > 200 {
				t.Fatalf("error of %d bytes: replies are quoted in full", len(err.Error()))
			}
			return
		}
		lines := 0
		if s := strings.TrimSpace(string(data)); s != "" {
			lines = strings.Count(s, "\n") + 1
		}
		if len(ids) != lines {
			t.Fatalf("%q: %d IDs from %d lines", data, len(ids), lines)
		}
		again, err := Decimal.Decode(nil, Decimal.Append(nil, ids))
		if err != nil || fmt.Sprint(again) != fmt.Sprint(ids) {
			t.Fatalf("%q: re-encoded IDs decode to %v, %v; want %v", data, again, err, ids)
		}
	})
}

// FuzzBase32: every ID round-trips through its base32 form, and the forms
// of two IDs compare as the IDs do (string order is numeric order).
func FuzzBase32(f *testing.F) {
	for _, p := range [][2]uint64{{0, 1}, {31, 32}, {1<<53 - 1, 1 << 53}, {1<<63 - 1, 1 << 63}, {1<<64 - 1, 0}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		sa, sb := FormatBase32(a), FormatBase32(b)
		if len(sa) != Base32Width {
			t.Fatalf("%d: %q is not %d characters", a, sa, Base32Width)
		}
		for _, s := range []string{sa, strings.ToLower(sa)} {
			if back, err := ParseBase32(s); back != a || err != nil {
				t.Fatalf("%d: %q reads back as %d, %v", a, s, back, err)
			}
		}
		if (a < b) != (sa < sb) || (a == b) != (sa == sb) {
			t.Fatalf("%d vs %d: %q vs %q do not compare as the numbers", a, b, sa, sb)
		}
	})
}

// FuzzParseBase32: whatever ParseBase32 accepts is 13 characters whose
// canonical form (upper case, I/L as 1, O as 0) is what FormatBase32
// writes for the ID, and its errors stay short.
func FuzzParseBase32(f *testing.F) {
	for _, s := range []string{"0000000000000", "00000nzk82g1a", "FZZZZZZZZZZZZ", "G000000000000", "0000000000ILO", "000000000000U", "", "\xff\xfe"} {
		f.Add(s)
	}
	canon := strings.NewReplacer("I", "1", "L", "1", "O", "0")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseBase32(s)
		if err != nil {
			if len(err.Error()) > 200 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		if want := canon.Replace(strings.ToUpper(s)); FormatBase32(id) != want {
			t.Fatalf("%q read as %d, whose form is %q, not %q", s, id, FormatBase32(id), want)
		}
		ids, err := Base32.Decode(nil, []byte(s+"\n"+s))
		if err != nil || len(ids) != 2 || ids[0] != id || ids[1] != id {
			t.Fatalf("%q twice as a batch: %v, %v", s, ids, err)
		}
	})
}

// FuzzErrorFromHeaders: the client's reading of the micro error
// headers of a reply.
func FuzzErrorFromHeaders(f *testing.F) {
	for _, s := range [][3]string{{"", "", ""}, {"400", "count is 0", ""}, {"503", "at capacity", "250"}, {"503", "buffer empty", "-5"}, {"500", "", "x"},
		{"abc", "x", "99999999999999999999"}, {"-1", "", "0"}, {"99999999999999999999", "big", "60001"}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, code, description, retryAfter string) {
		err := ErrorFromHeaders("uid.next", code, description, retryAfter)
		if code == "" {
			if err != nil {
				t.Fatalf("no error code, error %v", err)
			}
			return
		}
		var se *ServiceError
		if !errors.As(err, &se) {
			t.Fatalf("code %q: %T is not a *ServiceError", code, err)
		}
		n, perr := strconv.Atoi(code)
		if perr != nil {
			n = CodeInternal
		}
		if se.Code != n || !strings.Contains(se.Description, description) {
			t.Fatalf("code %q %q: got %d %q", code, description, se.Code, se.Description)
		}
		wantAfter := time.Duration(0)
		if ms, err := strconv.ParseInt(retryAfter, 10, 64); err == nil && ms > 0 {
			wantAfter = time.Duration(min(ms, 60_000)) * time.Millisecond
		}
		if se.RetryAfter != wantAfter {
			t.Fatalf("retry after %q: %v, want %v", retryAfter, se.RetryAfter, wantAfter)
		}
		if errors.Is(err, ErrBadRequest) != (n == CodeBadRequest) || errors.Is(err, ErrUnavailable) != (n == CodeUnavailable) {
			t.Fatalf("code %q: Is(ErrBadRequest)=%v Is(ErrUnavailable)=%v", code, errors.Is(err, ErrBadRequest), errors.Is(err, ErrUnavailable))
		}
	})
}
