package uidcore

import "testing"

// BenchmarkCachedPaddingRound is one padding round alone: it refills
// 65,536 slots of an emptied ring (the default layout, one lane, no ahead
// bound), without takers competing for the cores. The generator is closed
// first, so the benchmark's goroutine is the only one padding.
func BenchmarkCachedPaddingRound(b *testing.B) {
	g, err := NewCached(CachedOptions{Claim: StaticClaim{ID: 1}, MaxAhead: NoAheadBound})
	if err != nil {
		b.Fatal(err)
	}
	g.Close()
	const target = fillFloor
	for b.Loop() {
		b.StopTimer()
		// Take everything, as takers would, and keep the target.
		c, t := g.cursor.Load(), g.tail.Load()
		forEachWord(c&g.mask, t-c, g.size, func(w int, bits uint64) { g.canTake[w].And(^bits) })
		g.cursor.Store(t)
		g.setTarget(target)
		b.StartTimer()
		// As at start-up: a round that finds the ring empty would
		// otherwise take it for rising demand and double the target.
		if r, _ := g.pad(TriggerStartup); r.Added != target {
			b.Fatalf("a round added %d IDs, want %d", r.Added, target)
		}
	}
	b.ReportMetric(float64(b.N*target)/b.Elapsed().Seconds(), "IDs/s")
}
