package testenv

import (
	"math/bits"
	"time"
)

// Histogram counts durations in log-linear buckets (16 a power of two,
// so a bucket is at most 1/16 of its value wide): cheap enough to record
// every call of a benchmark's loop, for the tail percentiles a benchmark
// reports with ReportMetric. The zero value is empty; not safe for
// concurrent use (one a goroutine, then Merge).
type Histogram struct {
	counts [histogramBuckets]uint64
	total  uint64
}

const histogramBuckets = 61 * 16

// Record counts one duration.
func (h *Histogram) Record(d time.Duration) {
	h.counts[histogramBucket(uint64(max(d, 0)))]++
	h.total++
}

func histogramBucket(ns uint64) int {
	if ns < 16 {
		return int(ns)
	}
	e := bits.Len64(ns) - 5 // ns>>e is 16..31
	return e*16 + int(ns>>e)
}

// histogramUpper is the largest duration in bucket i.
func histogramUpper(i int) time.Duration {
	if i < 16 {
		return time.Duration(i)
	}
	e := i/16 - 1
	m := uint64(i%16 + 16)
	return time.Duration((m+1)<<e - 1)
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, n := range o.counts {
		h.counts[i] += n
	}
	h.total += o.total
}

// Count is the number of durations recorded.
func (h *Histogram) Count() uint64 { return h.total }

// Quantile is the upper bound of the bucket holding the q-quantile (q in
// [0, 1]): the true value is at most that, and more than 15/16 of it.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(q * float64(h.total))
	rank = min(max(rank, 1), h.total)
	var seen uint64
	for i, n := range h.counts {
		seen += n
		if seen >= rank {
			return histogramUpper(i)
		}
	}
	return histogramUpper(len(h.counts) - 1)
}
