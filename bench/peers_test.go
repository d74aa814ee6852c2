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

// The generator as a dispenser runs it: the default 2 s ahead bound and
// up to 16 lanes (worker IDs 0..15). Run for 10 s or more, the figure is
// what it sustains, comparable with the peers' (which are capped by their
// layouts too: bwmarrin at 4,096 per millisecond, sonyflake at 25,600 a
// second).
func BenchmarkUidcoreCachedNext(b *testing.B) {
	g, err := uidcore.NewCached(uidcore.CachedOptions{Claim: uidcore.StaticClaim{ID: 0}, TakeWait: 1e9,
		Lanes: &uidcore.StaticAssigner{From: 1, To: 15}})
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
