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
		ids, err := DecodeBinaryIDs(nil, data)
		if len(data)%8 != 0 {
			if err == nil {
				t.Fatalf("%d bytes accepted", len(data))
			}
			return
		}
		if err != nil || len(ids) != len(data)/8 {
			t.Fatalf("%d bytes: %d IDs, %v", len(data), len(ids), err)
		}
		if got := AppendBinaryIDs(nil, ids); string(got) != string(data) {
			t.Fatal("binary round trip differs")
		}
	})
}

func TestEncodingsRoundTrip(t *testing.T) {
	ids := []uint64{0, 1, 42, math.MaxInt64, 1 << 40}
	dec, err := DecodeDecimalIDs(nil, AppendDecimalIDs(nil, ids))
	if err != nil || fmt.Sprint(dec) != fmt.Sprint(ids) {
		t.Fatalf("decimal round trip: %v, %v", dec, err)
	}
	bin, err := DecodeBinaryIDs(nil, AppendBinaryIDs(nil, ids))
	if err != nil || fmt.Sprint(bin) != fmt.Sprint(ids) {
		t.Fatalf("binary round trip: %v, %v", bin, err)
	}
	if _, err := DecodeDecimalIDs(nil, []byte("1\nx")); err == nil {
		t.Fatal("decimal junk accepted")
	}
}
