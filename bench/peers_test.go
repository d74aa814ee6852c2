// Package bench measures uidcore side by side with peer ID generators. It
// is a module of its own so the product never depends on the peers.
package bench

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/bwmarrin/snowflake"
	"github.com/sony/sonyflake/v2"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

func perSecond(b *testing.B, ids int) {
	b.ReportMetric(float64(ids)/b.Elapsed().Seconds(), "IDs/s")
}

func BenchmarkAtomicCounter(b *testing.B) {
	var n atomic.Uint64
	for b.Loop() {
		n.Add(1)
	}
	perSecond(b, b.N)
}

// The ahead-of-clock bound is off: the figure is the ring's take speed, not
// the layout's 65,536 IDs per second per worker.
func BenchmarkUidcoreCachedNext(b *testing.B) {
	g, err := uidcore.NewCached(uidcore.CachedOptions{Claim: uidcore.StaticClaim{ID: 1}, MaxAhead: uidcore.NoAheadBound, TakeWait: 1e9})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	for b.Loop() {
		if _, err := g.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
	perSecond(b, b.N)
}

func BenchmarkUidcoreDefaultNext(b *testing.B) {
	g, err := uidcore.NewDefault(uidcore.DefaultOptions{Claim: uidcore.StaticClaim{ID: 1}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := g.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
	perSecond(b, b.N)
}

func BenchmarkBwmarrinSnowflake(b *testing.B) {
	node, err := snowflake.NewNode(1)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		node.Generate()
	}
	perSecond(b, b.N)
}

func BenchmarkSonyflake(b *testing.B) {
	sf, err := sonyflake.New(sonyflake.Settings{MachineID: func() (int, error) { return 1, nil }})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := sf.NextID(); err != nil {
			b.Fatal(err)
		}
	}
	perSecond(b, b.N)
}
