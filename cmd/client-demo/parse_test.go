package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
)

func runParseWith(t *testing.T, stdin string, args ...string) (int, []uidcore.ParsedJSON, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"parse"}, args...), strings.NewReader(stdin), &stdout, &stderr, func(string) string { return "" })
	var out []uidcore.ParsedJSON
	dec := json.NewDecoder(&stdout)
	for dec.More() {
		var p uidcore.ParsedJSON
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("output is not JSON lines: %v", err)
		}
		out = append(out, p)
	}
	return code, out, stderr.String()
}

// IDs of the fleet's layout decode as uid.parse answers them (uidcore's
// Parse), without a server.
func TestParseDecodesLikeTheService(t *testing.T) {
	l := uidcore.DefaultLayout()
	id, _ := l.Compose(time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC).Unix(), 1023, 42)
	code, out, errOut := runParseWith(t, "", strconv.FormatUint(id, 10))
	want := uidcoretest.MustParse(t, l.Parse, id)
	if code != 0 || len(out) != 1 || out[0] != want.JSON() {
		t.Fatalf("exit %d %+v %s; want %+v", code, out, errOut, want.JSON())
	}
	if out[0].Timestamp != "2026-12-01 09:30:00" || out[0].WorkerID != "1023" || out[0].Sequence != "42" {
		t.Fatalf("%+v", out[0])
	}
}

// UidGenerator's IDs, by preset name or as T/W/S@epoch, from arguments and
// from standard input; a wrapped (negative) one decodes as parseUID does,
// to the second it was issued in, and says that it wrapped.
func TestParseUidGeneratorIDsWrappedToo(t *testing.T) {
	ug := uidcore.UidGeneratorLayout()
	normal, _ := ug.Compose(time.Date(2020, 2, 3, 4, 5, 6, 0, time.UTC).Unix(), 1234, 77)
	// What UidGenerator's cached generator returned after its runway:
	// delta<<35 | worker<<13 | seq with no masking, the delta past 28 bits.
	issued := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	delta := uint64(issued.Unix() - ug.EpochSecond())
	wrapped := int64(delta<<35 | 9<<13 | 5)
	if wrapped >= 0 {
		t.Fatalf("test setup: %d did not wrap", wrapped)
	}
	for _, layout := range []string{"uidgenerator", "28/22/13@2016-05-20T00:00:00+08:00"} {
		for _, viaStdin := range []bool{false, true} {
			args := []string{"-layout", layout}
			stdin := ""
			ids := []string{strconv.FormatUint(normal, 10), strconv.FormatInt(wrapped, 10), "-7024218214296920064"}
			if viaStdin {
				stdin = strings.Join(ids, "\n") + "\n"
			} else {
				args = append(args, ids...)
			}
			code, out, errOut := runParseWith(t, stdin, args...)
			if code != 0 || len(out) != 3 {
				t.Fatalf("%s stdin=%v: exit %d, %d objects; %s", layout, viaStdin, code, len(out), errOut)
			}
			if o := out[0]; o.Timestamp != "2020-02-03 04:05:06" || o.WorkerID != "1234" || o.Sequence != "77" || o.Wrapped != "" {
				t.Errorf("%s: normal ID: %+v", layout, o)
			}
			if o := out[1]; o.UID != strconv.FormatInt(wrapped, 10) || o.Timestamp != "2025-03-04 05:06:07" || o.WorkerID != "9" || o.Sequence != "5" || !strings.HasPrefix(o.Wrapped, "true") {
				t.Errorf("%s: wrapped ID: %+v", layout, o)
			}
			// The example of UidGenerator's issue #100.
			if o := out[2]; o.UID != "-7024218214296920064" || o.Timestamp != "2026-12-01 08:14:16" || o.WorkerID != "7" || o.Sequence != "0" || o.Wrapped == "" {
				t.Errorf("%s: -7024218214296920064: %+v", layout, o)
			}
		}
	}
}

func TestParseRefusesBadInput(t *testing.T) {
	code, out, errOut := runParseWith(t, "", "-layout", "uidgenerator", "12", "ten", "99999999999999999999", "--5", "7")
	if code != 1 || len(out) != 2 || !strings.Contains(errOut, `"ten" is not an ID`) || !strings.Contains(errOut, `"99999999999999999999" is not an ID`) || !strings.Contains(errOut, `"--5"`) {
		t.Fatalf("exit %d, %d objects, stderr:\n%s", code, len(out), errOut)
	}
	for _, layout := range []string{"snowflake", "31/16/17", "31/16/16@tomorrow"} {
		if code, _, errOut := runParseWith(t, "", "-layout", layout, "1"); code != 2 || !strings.Contains(errOut, "-layout") {
			t.Errorf("-layout %s: exit %d, stderr %q; want 2 naming -layout", layout, code, errOut)
		}
	}
}

// FuzzParseIDText: whatever it accepts is the number the text says, as
// the 64 bits Java's long (negative) or an unsigned print of them holds.
func FuzzParseIDText(f *testing.F) {
	for _, s := range []string{"0", "123", "-7024218214296920064", "18446744073709551615", "18446744073709551616", "-9223372036854775808", "-9223372036854775809", "+5", "+-5", "--5", "", "1e3", " 1", "0x10", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := parseIDText(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("%q: error %q does not quote the input", s, err)
			}
			return
		}
		if strings.HasPrefix(s, "-") {
			if n, perr := strconv.ParseInt(s, 10, 64); perr != nil || uint64(n) != id {
				t.Fatalf("%q accepted as %d", s, id)
			}
			return
		}
		if n, perr := strconv.ParseUint(strings.TrimPrefix(s, "+"), 10, 64); perr != nil || n != id {
			t.Fatalf("%q accepted as %d", s, id)
		}
	})
}

// -layout jssafe and base32 input: the ID reads as the jssafe layout
// splits it, whichever form it is written in.
func TestParseJSSafeAndBase32(t *testing.T) {
	l := uidcore.JSSafeLayout()
	id, _ := l.Compose(time.Date(2026, 1, 2, 1, 1, 1, 0, time.UTC).Unix(), 5, 42)
	b32 := protocol.FormatBase32(id)
	code, out, errOut := runParseWith(t, "", "-layout", "jssafe", strconv.FormatUint(id, 10), strings.ToLower(b32))
	want := uidcoretest.MustParse(t, l.Parse, id)
	if code != 0 || len(out) != 2 || out[0] != want.JSON() || out[1] != want.JSON() {
		t.Fatalf("exit %d %+v %s; want twice %+v", code, out, errOut, want.JSON())
	}
	if out[0].WorkerID != "5" || out[0].Sequence != "42" || out[0].Timestamp != "2026-01-02 01:01:01" {
		t.Fatalf("%+v", out[0])
	}
	if code, _, errOut := runParseWith(t, "", "00000NZK82G1U"); code != 1 || !strings.Contains(errOut, "not a Crockford base32 character") {
		t.Fatalf("a bad base32 ID: exit %d, %s", code, errOut)
	}
}

// With -regions, each ID names the region whose range holds its worker
// ID (none for a worker ID no region has); a bad map exits 2.
func TestParseNamesTheRegion(t *testing.T) {
	l := uidcore.DefaultLayout()
	sec := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC).Unix()
	east, _ := l.Compose(sec, 5, 1)
	west, _ := l.Compose(sec, 600, 1)
	spare, _ := l.Compose(sec, 1000, 1)
	code, out, errOut := runParseWith(t, "", "-regions", "east=0-511,west=512-767", strconv.FormatUint(east, 10), strconv.FormatUint(west, 10), strconv.FormatUint(spare, 10))
	if code != 0 || len(out) != 3 || out[0].Region != "east" || out[1].Region != "west" || out[2].Region != "" {
		t.Fatalf("exit %d %+v %s", code, out, errOut)
	}
	if code, _, errOut := runParseWith(t, "", "-regions", "east=0-2047", "1"); code != 2 || !strings.Contains(errOut, "largest worker ID 1023") {
		t.Fatalf("a map past the layout: exit %d, %s", code, errOut)
	}
}
