package uidcore

import (
	"context"
	"sync/atomic"
	"testing"
)

// BenchmarkAtomicCounter is the floor: a bare shared counter, what any ID
// source costs at the least.
func BenchmarkAtomicCounter(b *testing.B) {
	var n atomic.Uint64
	for b.Loop() {
		n.Add(1)
	}
}

// BenchmarkAtomicCounterParallel is the floor for RunParallel: every
// goroutine adds to one shared counter, whose cache line they fight over.
func BenchmarkAtomicCounterParallel(b *testing.B) {
	var n atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n.Add(1)
		}
	})
}

// benchCached is a generator as a dispenser runs it (bound=default: the
// 2 s ahead bound, lanes claimed from a range of 16 worker IDs, the
// sustained figure), or with the ahead bound off (bound=off: a burst that
// borrows the future without limit, which no instance can keep up; a
// labelled second number).
func benchCached(b *testing.B, bounded bool) *CachedGenerator {
	opts := CachedOptions{Claim: StaticClaim{ID: 0}, TakeWait: 1e9,
		Lanes: &StaticAssigner{From: 1, To: 15}, MaxLanes: DefaultMaxLanes}
	if !bounded {
		opts.MaxAhead, opts.Lanes = NoAheadBound, nil
	}
	g, err := NewCached(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	return g
}

// bounds runs bench with each ahead bound. Run the default bound for at
// least 10 s (-benchtime 10s): the figure is then what the generator
// keeps up, not what it borrows.
func bounds(b *testing.B, bench func(b *testing.B, g *CachedGenerator) int) {
	for _, bounded := range []bool{true, false} {
		name := "bound=default"
		if !bounded {
			name = "bound=off"
		}
		b.Run(name, func(b *testing.B) {
			g := benchCached(b, bounded)
			b.ResetTimer()
			perOp := bench(b, g)
			elapsed := b.Elapsed()
			b.ReportMetric(float64(b.N*perOp)/elapsed.Seconds(), "IDs/s")
			st := g.State()
			b.ReportMetric(float64(st.SecondsAhead), "ahead-s")
			b.ReportMetric(float64(len(st.Lanes)), "lanes")
		})
	}
}

func BenchmarkCachedNext(b *testing.B) {
	bounds(b, func(b *testing.B, g *CachedGenerator) int {
		ctx := context.Background()
		for b.Loop() {
			if _, err := g.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
		return 1
	})
}

func BenchmarkCachedNextParallel(b *testing.B) {
	bounds(b, func(b *testing.B, g *CachedGenerator) int {
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if _, err := g.Next(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		return 1
	})
}

func BenchmarkCachedNextN4096(b *testing.B) {
	bounds(b, func(b *testing.B, g *CachedGenerator) int {
		ctx := context.Background()
		dst := make([]uint64, 4096)
		for b.Loop() {
			if _, err := g.NextN(ctx, dst); err != nil {
				b.Fatal(err)
			}
		}
		return len(dst)
	})
}

// BenchmarkCachedReserveRuns is the bulk take of ranges (uid.batch with
// Uid-Encoding: ranges, a blocks publisher): one op reserves 1,048,576
// IDs as runs, without waiting first and then waiting for the rest, as
// natsio's service does. At bound=default it meets the lanes' capacity
// and runs throttled: reservations then go through the ring.
func BenchmarkCachedReserveRuns(b *testing.B) {
	bounds(b, func(b *testing.B, g *CachedGenerator) int {
		const n = 1 << 20
		ctx := context.Background()
		var runs []Run
		for b.Loop() {
			var got uint64
			var err error
			runs, got, err = g.ReserveRuns(ctx, runs[:0], n, false)
			if err == nil && got < n {
				runs, _, err = g.ReserveRuns(ctx, runs, n-got, true)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		return n
	})
}

// BenchmarkDefaultNext is capped by the layout at 2^SeqBits IDs per second:
// its ns/op is mostly the wait for the next second.
func BenchmarkDefaultNext(b *testing.B) {
	g, err := NewDefault(DefaultOptions{Claim: StaticClaim{ID: 1}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := g.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IDs/s")
}
