package protocol

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"
)

func TestRangesEncoding(t *testing.T) {
	ids := []uint64{5, 6, 7, 9, 1 << 40, 1<<40 + 1, math.MaxInt64}
	data := Ranges.Append(nil, ids)
	want := AppendRuns(nil, []Run{{5, 3}, {9, 1}, {1 << 40, 2}, {math.MaxInt64, 1}})
	if string(data) != string(want) {
		t.Fatalf("ranges of %v: %x, want %x", ids, data, want)
	}
	// The layout on the wire: first ID, then count, 8 bytes big-endian each.
	if first, count := binary.BigEndian.Uint64(data), binary.BigEndian.Uint64(data[8:]); first != 5 || count != 3 || len(data) != 4*RangeWidth {
		t.Fatalf("first run %d×%d, %d bytes", first, count, len(data))
	}
	got, err := Ranges.Decode(nil, data)
	if err != nil || !slices.Equal(got, ids) {
		t.Fatalf("decoded %v, %v; want %v", got, err, ids)
	}
	// A million consecutive IDs are one run of 16 bytes.
	if one := AppendRuns(nil, []Run{{1 << 50, 1 << 20}}); len(one) != RangeWidth {
		t.Fatalf("one run in %d bytes", len(one))
	}
	if n := CountOf([]Run{{1, 3}, {10, 4}}); n != 7 {
		t.Fatalf("CountOf: %d", n)
	}
	// Adjacent runs a sender did not merge are accepted.
	if got, err := Ranges.Decode(nil, AppendRuns(nil, []Run{{1, 2}, {3, 1}})); err != nil || !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("adjacent runs: %v, %v", got, err)
	}
	if got, err := Ranges.Decode(nil, nil); err != nil || len(got) != 0 {
		t.Fatalf("empty reply: %v, %v", got, err)
	}
}

func TestDecodeRunsRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"not whole runs", make([]byte, 17)},
		{"count 0", AppendRuns(nil, []Run{{1, 0}})},
		{"first has the sign bit", AppendRuns(nil, []Run{{1 << 63, 1}})},
		{"run reaches the sign bit", AppendRuns(nil, []Run{{math.MaxInt64, 2}})},
		{"count wraps", AppendRuns(nil, []Run{{2, math.MaxUint64}})},
		{"overlapping", AppendRuns(nil, []Run{{1, 5}, {5, 1}})},
		{"decreasing", AppendRuns(nil, []Run{{10, 1}, {3, 1}})},
		{"repeated", AppendRuns(nil, []Run{{10, 1}, {10, 1}})},
	} {
		if runs, err := DecodeRuns(nil, tc.data); err == nil {
			t.Errorf("%s: accepted as %v", tc.name, runs)
		} else if len(err.Error()) > 200 {
			t.Errorf("%s: error of %d bytes", tc.name, len(err.Error()))
		}
	}
}

// FuzzDecodeRuns: whatever DecodeRuns accepts is increasing IDs without
// repeats below the sign bit, and re-encodes (merged) to runs that decode
// to the same IDs; whatever it rejects has a short error.
func FuzzDecodeRuns(f *testing.F) {
	f.Add(AppendRuns(nil, []Run{{5, 3}, {9, 1}}))
	f.Add(AppendRuns(nil, []Run{{1, 2}, {3, 1}}))
	f.Add(AppendRuns(nil, []Run{{math.MaxInt64, 1}}))
	f.Add(AppendRuns(nil, []Run{{math.MaxInt64, 2}}))
	f.Add(AppendRuns(nil, []Run{{1, 0}}))
	f.Add([]byte{})
	f.Add(make([]byte, 15))
	f.Fuzz(func(t *testing.T, data []byte) {
		runs, err := DecodeRuns(nil, data)
		if err != nil {
			if len(err.Error()) > 200 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		if len(runs) != len(data)/RangeWidth {
			t.Fatalf("%d runs from %d bytes", len(runs), len(data))
		}
		var total uint64
		for i, r := range runs {
			if r.Count == 0 || r.Last() > math.MaxInt64 || r.Last() < r.First || i > 0 && r.First <= runs[i-1].Last() {
				t.Fatalf("accepted run %d: %+v after %v", i, r, runs[:i])
			}
			total += r.Count
		}
		if total > 1<<16 {
			return // too many to expand here
		}
		ids := AppendIDs(nil, runs)
		merged := RunsOf(nil, ids)
		if CountOf(merged) != total || len(merged) > len(runs) {
			t.Fatalf("%v merged to %v", runs, merged)
		}
		again, err := Ranges.Decode(nil, AppendRuns(nil, merged))
		if err != nil || !slices.Equal(again, ids) {
			t.Fatalf("re-encoded %v decodes to %v, %v", merged, again, err)
		}
		if fmt.Sprint(Ranges.Append(nil, ids)) != fmt.Sprint(AppendRuns(nil, merged)) {
			t.Fatal("Ranges.Append differs from AppendRuns(RunsOf)")
		}
	})
}
