package protocol

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

func FuzzDecodeBinaryIDs(f *testing.F) {
	f.Add([]byte{}, uint8(0))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1}, uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, _ uint8) {
		ids, err := Binary.Decode(nil, data)
		if len(data)%8 != 0 {
			if err == nil {
				t.Fatalf("%d bytes accepted", len(data))
			}
			return
		}
		if err != nil || len(ids) != len(data)/8 {
			t.Fatalf("%d bytes: %d IDs, %v", len(data), len(ids), err)
		}
		if got := Binary.Append(nil, ids); string(got) != string(data) {
			t.Fatal("binary round trip differs")
		}
	})
}

func TestEncodingsRoundTrip(t *testing.T) {
	ids := []uint64{0, 1, 42, math.MaxInt64, 1 << 40}
	for _, enc := range []Encoding{Decimal, Binary, Base32} {
		data := enc.Append(nil, ids)
		got, err := enc.Decode(nil, data)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(ids) {
			t.Errorf("%s round trip: %v, %v", enc, got, err)
		}
		// The widest ID fits the width the service sizes batches by.
		if one := enc.Append(nil, []uint64{math.MaxInt64, math.MaxInt64}); len(one) > 2*enc.MaxIDWidth() {
			t.Errorf("%s: two IDs take %d bytes, more than twice MaxIDWidth %d", enc, len(one), enc.MaxIDWidth())
		}
	}
	if got := string(Decimal.Append(nil, []uint64{7, 8})); got != "7\n8" {
		t.Errorf("decimal %q, want \"7\\n8\"", got)
	}
	if got := Binary.Append(nil, []uint64{0x0102030405060708}); fmt.Sprint(got) != "[1 2 3 4 5 6 7 8]" {
		t.Errorf("binary %v, want big-endian", got)
	}
	if _, err := Decimal.Decode(nil, []byte("1\nx")); err == nil {
		t.Fatal("decimal junk accepted")
	}
}

func TestRequestEncoding(t *testing.T) {
	for _, tc := range []struct {
		h    map[string][]string
		want Encoding
	}{
		{nil, Decimal},
		{map[string][]string{EncodingHeader: {EncodingBinary}}, Binary},
		{map[string][]string{"uid-encoding": {"BINARY"}}, Binary},
		{map[string][]string{"UID-ENCODING": {" Base32 "}}, Base32},
		{map[string][]string{"uid-encoding": {"Ranges"}}, Ranges},
		{map[string][]string{EncodingHeader: {}}, Decimal},
		{map[string][]string{EncodingHeader: {""}}, Decimal},
	} {
		if got, err := RequestEncoding(tc.h); got != tc.want || err != nil {
			t.Errorf("%v: %s, %v; want %s", tc.h, got, err, tc.want)
		}
	}
	for _, enc := range []Encoding{Decimal, Binary, Base32, Ranges} {
		h := map[string][]string{}
		if v := enc.HeaderValue(); v != "" {
			h[EncodingHeader] = []string{v}
		}
		if got, err := RequestEncoding(h); got != enc || err != nil {
			t.Errorf("the header of %s asks for %s, %v", enc, got, err)
		}
	}
	// A misspelt value is an error naming the accepted ones, never text.
	for _, v := range []string{"bin", "base64", "decimal", "text"} {
		_, err := RequestEncoding(map[string][]string{EncodingHeader: {v}})
		var ue *UnknownEncodingError
		if !errors.As(err, &ue) || ue.Value != v || !strings.Contains(err.Error(), "binary, base32 or ranges") {
			t.Errorf("%q: %v, want an *UnknownEncodingError naming binary, base32 and ranges", v, err)
		}
	}
}

func TestBase32(t *testing.T) {
	for _, tc := range []struct {
		id   uint64
		text string
	}{
		{0, "0000000000000"},
		{755486507050, "00000NZK82G1A"},
		{math.MaxInt64, "7ZZZZZZZZZZZZ"},
		{math.MaxUint64, "FZZZZZZZZZZZZ"},
		{1<<53 - 1, "007ZZZZZZZZZZ"},
	} {
		if got := FormatBase32(tc.id); got != tc.text {
			t.Errorf("FormatBase32(%d) = %s, want %s", tc.id, got, tc.text)
		}
		for _, in := range []string{tc.text, strings.ToLower(tc.text)} {
			if got, err := ParseBase32(in); got != tc.id || err != nil {
				t.Errorf("ParseBase32(%s) = %d, %v; want %d", in, got, err, tc.id)
			}
		}
	}
	// Crockford's readings of look-alikes.
	if got, err := ParseBase32("0000000000ILO"); err != nil || got != 1<<10|1<<5 {
		t.Errorf("I, L, O: %d, %v; want %d", got, err, 1<<10|1<<5)
	}
	for _, bad := range []string{"", "000000000000", "00000000000000", "000000000000U", "G000000000000", "0000-00000000", "000000000000\n"} {
		if _, err := ParseBase32(bad); err == nil || !strings.Contains(err.Error(), "base32") {
			t.Errorf("ParseBase32(%q): %v, want an error", bad, err)
		}
	}
	ids := []uint64{1, 32, 755486507050}
	if got := string(Base32.Append(nil, ids)); got != "0000000000001\n0000000000010\n00000NZK82G1A" {
		t.Errorf("a base32 batch: %q", got)
	}
}
