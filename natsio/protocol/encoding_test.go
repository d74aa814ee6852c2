package protocol

import (
	"fmt"
	"math"
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
	for _, enc := range []Encoding{Decimal, Binary} {
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
		{map[string][]string{EncodingHeader: {"base64"}}, Decimal}, // unknown: the default
		{map[string][]string{EncodingHeader: {}}, Decimal},
	} {
		if got := RequestEncoding(tc.h); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.h, got, tc.want)
		}
	}
	for _, enc := range []Encoding{Decimal, Binary} {
		h := map[string][]string{}
		if v := enc.HeaderValue(); v != "" {
			h[EncodingHeader] = []string{v}
		}
		if got := RequestEncoding(h); got != enc {
			t.Errorf("the header of %s asks for %s", enc, got)
		}
	}
}
