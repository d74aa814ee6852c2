package uidcore

import (
	"context"
	"testing"
	"time"
)

// At any rate the low bits of the IDs spread: a second padding re-syncs
// to goes on from the sequence after the last issued ID, so no residue
// of id % 16 or id % 64 gets more than 1.5 times its share. Driven by a
// test clock: counts, not timings. IDs stay unique and increasing.
func TestSpreadOfTheLowBitsAtLowRates(t *testing.T) {
	for _, tc := range []struct {
		perSecond, seconds int
	}{{1, 256}, {20, 64}, {1000, 8}} {
		clock := newFakeClock(t0)
		g := newTestCached(t, CachedOptions{Clock: clock})
		ctx := context.Background()
		var ids []uint64
		for range tc.seconds {
			clock.Add(time.Second)
			if _, err := g.padNow(ctx); err != nil { // the once-a-second freshness round
				t.Fatal(err)
			}
			for range tc.perSecond {
				ids = append(ids, mustNext(t, g.Next))
			}
		}
		if !strictlyIncreasing(ids) {
			t.Fatalf("%d/s: IDs do not strictly increase", tc.perSecond)
		}
		for _, mod := range []uint64{16, 64} {
			counts := make([]int, mod)
			for _, id := range ids {
				counts[id%mod]++
			}
			share := float64(len(ids)) / float64(mod)
			for r, c := range counts {
				if float64(c) > 1.5*share {
					t.Errorf("%d/s: residue %d of id %% %d has %d of %d IDs, %.2f× its share", tc.perSecond, r, mod, c, len(ids), float64(c)/share)
				}
			}
		}
		// The IDs carry the clock's seconds: the spread borrows nothing.
		if p, _ := g.Layout().Parse(ids[len(ids)-1]); p.Time.Unix() != clock.Now().Unix() {
			t.Errorf("%d/s: the last ID is of second %d, the clock at %d", tc.perSecond, p.Time.Unix(), clock.Now().Unix())
		}
	}
}

// A second used up by demand ends the spread: the next one starts at
// sequence 0 and holds a whole second, so the capacity is unchanged.
func TestSpreadLeavesTheCapacity(t *testing.T) {
	clock := newFakeClock(t0)
	layout := Layout{TimeBits: 40, WorkerBits: 9, SeqBits: 14, Epoch: DefaultEpoch} // 16,384 a second
	g := newTestCached(t, CachedOptions{Layout: layout, Clock: clock, MaxAhead: 5 * time.Second})
	ctx := context.Background()
	for range 5 { // low load: the first sequence moves on
		clock.Add(10 * time.Second)
		g.padNow(ctx)
		mustNext(t, g.Next)
	}
	clock.Add(10 * time.Second)
	g.padNow(ctx)
	perSecond := int(layout.MaxSequence() + 1)
	ids := make([]uint64, 3*perSecond)
	if _, err := g.NextN(ctx, ids); err != nil {
		t.Fatal(err)
	}
	bySecond := map[int64]int{}
	var firstSeq []uint64
	for i, id := range ids {
		p, _ := layout.Parse(id)
		if i == 0 || p.Time.Unix() != ids2sec(layout, ids[i-1]) {
			firstSeq = append(firstSeq, p.Sequence)
		}
		bySecond[p.Time.Unix()]++
	}
	if len(firstSeq) < 3 || firstSeq[0] == 0 || firstSeq[1] != 0 || firstSeq[2] != 0 {
		t.Fatalf("first sequences of the seconds %v: want the re-synced one above 0, the borrowed ones at 0", firstSeq)
	}
	full := 0
	for _, n := range bySecond {
		if n == perSecond {
			full++
		}
	}
	if full < 1 {
		t.Fatalf("IDs per second %v: a borrowed second holds all %d", bySecond, perSecond)
	}
}

func ids2sec(l Layout, id uint64) int64 {
	p, _ := l.Parse(id)
	return p.Time.Unix()
}
