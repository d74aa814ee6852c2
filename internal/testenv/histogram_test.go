package testenv

import (
	"testing"
	"time"
)

// Every duration lands in a bucket whose upper bound is at or above it
// and within a sixteenth of it, and the quantiles come out in order.
func TestHistogramBucketsBoundTheirDurations(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 15, 16, 17, 31, 32, 33, 100, 999, 1000, 1 << 20, time.Second, 1<<62 + 12345} {
		up := histogramUpper(histogramBucket(uint64(d)))
		if up < d || float64(up-d) > float64(d)/16 {
			t.Errorf("%d ns in a bucket up to %d ns", d, up)
		}
	}
	var h, other Histogram
	for i := range 10_000 {
		h.Record(time.Duration(i))
	}
	other.Record(time.Hour)
	h.Merge(&other)
	if h.Count() != 10_001 {
		t.Fatalf("count %d", h.Count())
	}
	p50, p99, max := h.Quantile(0.5), h.Quantile(0.99), h.Quantile(1)
	if p50 < 5000 || p50 > 5000+5000/16 || p99 < 9900 || p99 > 9900+9900/16 || max < time.Hour {
		t.Fatalf("p50 %v, p99 %v, max %v", p50, p99, max)
	}
}
