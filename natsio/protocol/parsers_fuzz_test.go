package protocol

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
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

// FuzzErrorFromHeaders: the client's reading of the micro error
// headers of a reply.
func FuzzErrorFromHeaders(f *testing.F) {
	for _, s := range [][2]string{{"", ""}, {"400", "count is 0"}, {"503", "buffer empty"}, {"500", ""}, {"abc", "x"}, {"-1", ""}, {"99999999999999999999", "big"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, code, description string) {
		err := ErrorFromHeaders("uid.next", code, description)
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
		if errors.Is(err, ErrBadRequest) != (n == CodeBadRequest) || errors.Is(err, ErrUnavailable) != (n == CodeUnavailable) {
			t.Fatalf("code %q: Is(ErrBadRequest)=%v Is(ErrUnavailable)=%v", code, errors.Is(err, ErrBadRequest), errors.Is(err, ErrUnavailable))
		}
	})
}
