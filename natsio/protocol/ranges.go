package protocol

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Run is a run of Count consecutive IDs from First: First, First+1, …,
// First+Count-1. A ranges reply (EncodingRanges) is a batch as runs, in
// increasing order.
type Run struct {
	First uint64
	Count uint64
}

// Last is the run's last ID.
func (r Run) Last() uint64 { return r.First + r.Count - 1 }

// RangeWidth is the size of one run in a ranges reply: the first ID,
// then the count, each 8 bytes big-endian.
const RangeWidth = 16

// RunsOf appends the runs of ids (in increasing order, as a batch is) to
// dst: each maximal stretch of consecutive IDs is one run.
func RunsOf(dst []Run, ids []uint64) []Run {
	for i := 0; i < len(ids); {
		j := i + 1
		for j < len(ids) && ids[j] == ids[j-1]+1 {
			j++
		}
		dst = append(dst, Run{First: ids[i], Count: uint64(j - i)})
		i = j
	}
	return dst
}

// CountOf is the number of IDs in runs.
func CountOf(runs []Run) uint64 {
	var n uint64
	for _, r := range runs {
		n += r.Count
	}
	return n
}

// AppendRuns appends runs to dst as a ranges reply: 16 bytes per run.
func AppendRuns(dst []byte, runs []Run) []byte {
	for _, r := range runs {
		dst = binary.BigEndian.AppendUint64(dst, r.First)
		dst = binary.BigEndian.AppendUint64(dst, r.Count)
	}
	return dst
}

// DecodeRuns appends the runs of a ranges reply to dst. It checks what
// every ranges reply satisfies: whole 16-byte runs, each of at least one
// ID, none reaching the sign bit, each starting after the previous one
// ends (increasing IDs, none twice). A run may start right after the
// previous one: decoders accept runs a sender did not merge.
func DecodeRuns(dst []Run, data []byte) ([]Run, error) {
	if len(data)%RangeWidth != 0 {
		return dst, fmt.Errorf("protocol: ranges reply of %d bytes is not a multiple of %d", len(data), RangeWidth)
	}
	var prevLast uint64
	for i := 0; i < len(data); i += RangeWidth {
		r := Run{First: binary.BigEndian.Uint64(data[i:]), Count: binary.BigEndian.Uint64(data[i+8:])}
		k := i / RangeWidth
		switch {
		case r.Count == 0:
			return dst, fmt.Errorf("protocol: ranges reply: run %d has a count of 0", k)
		case r.First > math.MaxInt64 || r.Count-1 > math.MaxInt64-r.First:
			return dst, fmt.Errorf("protocol: ranges reply: run %d (%d IDs from %d) reaches the sign bit", k, r.Count, r.First)
		case i > 0 && r.First <= prevLast:
			return dst, fmt.Errorf("protocol: ranges reply: run %d starts at %d, not after the previous run's last ID %d", k, r.First, prevLast)
		}
		prevLast = r.Last()
		dst = append(dst, r)
	}
	return dst, nil
}

// AppendIDs appends every ID of runs to dst.
func AppendIDs(dst []uint64, runs []Run) []uint64 {
	for _, r := range runs {
		for i := range r.Count {
			dst = append(dst, r.First+i)
		}
	}
	return dst
}

// decodeRangesIDs appends the IDs a ranges reply holds to dst.
func decodeRangesIDs(dst []uint64, data []byte) ([]uint64, error) {
	runs, err := DecodeRuns(nil, data)
	if err != nil {
		return dst, err
	}
	return AppendIDs(dst, runs), nil
}

// appendRangesIDs appends ids (increasing) to dst as a ranges reply.
func appendRangesIDs(dst []byte, ids []uint64) []byte {
	var stack [8]Run
	return AppendRuns(dst, RunsOf(stack[:0], ids))
}
