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

// The throughput benchmarks run with the ahead-of-clock bound off: at the
// default bound a worker sustains 2^SeqBits IDs per second (65,536) and
// the rest of the benchmark would measure back-pressure.
func benchCached(b *testing.B) *CachedGenerator {
	g, err := NewCached(CachedOptions{Claim: StaticClaim{ID: 1}, MaxAhead: NoAheadBound, TakeWait: 1e9})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	return g
}

func BenchmarkCachedNext(b *testing.B) {
	g := benchCached(b)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, err := g.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IDs/s")
}

func BenchmarkCachedNextParallel(b *testing.B) {
	g := benchCached(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := g.Next(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IDs/s")
}

func BenchmarkCachedNextN4096(b *testing.B) {
	g := benchCached(b)
	ctx := context.Background()
	dst := make([]uint64, 4096)
	b.ResetTimer()
	for b.Loop() {
		if _, err := g.NextN(ctx, dst); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*4096/b.Elapsed().Seconds(), "IDs/s")
}

// BenchmarkDefaultNext is capped by the layout at 65,536 IDs per second:
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
