package uidcore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
)

func newTestDefault(t *testing.T, clock Clock, claim Claim, tolerance time.Duration) *DefaultGenerator {
	t.Helper()
	g, err := NewDefault(DefaultOptions{Layout: smallLayout(), Claim: claim, Clock: clock, BackwardsTolerance: tolerance})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustNext(t *testing.T, next func(context.Context) (uint64, error)) uint64 {
	t.Helper()
	id, err := next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestDefaultSequentialIsStrictlyIncreasing(t *testing.T) {
	clock := newFakeClock(t0)
	g := newTestDefault(t, clock, StaticClaim{ID: 3}, 0)
	var last uint64
	const n = 10_000 // 40 seconds of a 256-per-second layout
	for i := range n {
		id := mustNext(t, g.Next)
		if i > 0 && id <= last {
			t.Fatalf("ID %d after %d", id, last)
		}
		last = id
	}
	// Used-up seconds are slept out, never spun: one sleep per second.
	if _, sleeps := clock.Slept(); sleeps != n/256 {
		t.Errorf("%d sleeps for %d seconds", sleeps, n/256)
	}
	p := uidcoretest.MustParse(t, g.Layout().Parse, last)
	if p.WorkerID != 3 || p.Time.Unix() != t0.Unix()+n/256 {
		t.Errorf("last ID parses as %+v", p)
	}
}

func TestDefaultConcurrentIsUnique(t *testing.T) {
	g, err := NewDefault(DefaultOptions{Layout: Layout{TimeBits: 31, WorkerBits: 10, SeqBits: 22, Epoch: DefaultEpoch}, Claim: StaticClaim{ID: 1}})
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 50_000
	assertUnique(t, nextConcurrently(t, workers, each, g.Next), workers*each)
}

func TestDefaultWaitsOutASmallRollback(t *testing.T) {
	clock := newFakeClock(t0.Add(500 * time.Millisecond))
	g := newTestDefault(t, clock, StaticClaim{ID: 1}, 2*time.Second)
	before := mustNext(t, g.Next)
	clock.Add(-1500 * time.Millisecond) // now 1s behind the issued second
	after := mustNext(t, g.Next)
	if after <= before {
		t.Fatalf("ID %d after %d", after, before)
	}
	if slept, _ := clock.Slept(); slept != time.Second {
		t.Errorf("slept %v, want 1s until the clock is back in the issued second", slept)
	}
}

func TestDefaultRefusesALargeRollback(t *testing.T) {
	clock := newFakeClock(t0)
	g := newTestDefault(t, clock, StaticClaim{ID: 1}, time.Second)
	mustNext(t, g.Next)
	clock.Add(-10 * time.Second)
	_, err := g.Next(context.Background())
	var cb *ClockBackwardsError
	if !errors.As(err, &cb) || !errors.Is(err, ErrClockBackwards) {
		t.Fatalf("err = %v, want *ClockBackwardsError", err)
	}
	if cb.By != 10*time.Second {
		t.Errorf("By = %v, want 10s", cb.By)
	}
	clock.Add(11 * time.Second)
	if _, err := g.Next(context.Background()); err != nil {
		t.Errorf("after the clock caught up: %v", err)
	}
}

func TestDefaultFollowsAForwardJump(t *testing.T) {
	clock := newFakeClock(t0)
	g := newTestDefault(t, clock, StaticClaim{ID: 1}, 0)
	mustNext(t, g.Next)
	clock.Add(time.Hour)
	p := uidcoretest.MustParse(t, g.Layout().Parse, mustNext(t, g.Next))
	if p.Time.Unix() != t0.Add(time.Hour).Unix() || p.Sequence != 0 {
		t.Errorf("after a jump: %+v", p)
	}
}

func TestDefaultStartsAfterTheClaim(t *testing.T) {
	clock := newFakeClock(t0)
	// An earlier holder used seconds up to t0: this one must start after.
	g := newTestDefault(t, clock, StaticClaim{ID: 1, AfterSecond: t0.Unix()}, 2*time.Second)
	p := uidcoretest.MustParse(t, g.Layout().Parse, mustNext(t, g.Next))
	if p.Time.Unix() <= t0.Unix() {
		t.Errorf("first ID in second %d, want after %d", p.Time.Unix(), t0.Unix())
	}
}

func TestDefaultExhaustionIsAnError(t *testing.T) {
	l := smallLayout()
	l.TimeBits, l.WorkerBits = 20, 35 // 12 days of runway
	clock := newFakeClock(l.RunwayEnd().Add(-time.Second))
	g, err := NewDefault(DefaultOptions{Layout: l, Claim: StaticClaim{ID: 1}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	for range 256 {
		if id := mustNext(t, g.Next); int64(id) < 0 {
			t.Fatalf("negative ID %d", int64(id))
		}
	}
	id, err := g.Next(context.Background())
	if !errors.Is(err, ErrTimeExhausted) || id != 0 {
		t.Fatalf("past the runway: id %d, err %v", id, err)
	}
}

func TestDefaultStopsWhenTheClaimIsLost(t *testing.T) {
	clock := newFakeClock(t0)
	claim := &lossyClaim{StaticClaim: StaticClaim{ID: 1}, until: t0.Unix()}
	g := newTestDefault(t, clock, claim, 0)
	mustNext(t, g.Next)
	clock.Add(time.Second)
	if _, err := g.Next(context.Background()); !errors.Is(err, ErrNotReserved) {
		t.Errorf("beyond the reservation: %v", err)
	}
	if len(claim.reserved) == 0 {
		t.Error("the claim was not asked to reserve more")
	}
	claim.set(t0.Unix()+10, true)
	if _, err := g.Next(context.Background()); !errors.Is(err, ErrClaimLost) {
		t.Errorf("lost claim: %v", err)
	}
}

// nextConcurrently calls next each times from each of workers goroutines
// at once and returns every ID; an error fails the test and stops that
// goroutine.
func nextConcurrently(t *testing.T, workers, each int, next func(context.Context) (uint64, error)) []uint64 {
	t.Helper()
	ids := make([][]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ids[w] = make([]uint64, 0, each)
			for range each {
				id, err := next(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				ids[w] = append(ids[w], id)
			}
		})
	}
	wg.Wait()
	return slices.Concat(ids...)
}

func assertUnique(t *testing.T, ids []uint64, want int) {
	t.Helper()
	if len(ids) != want {
		t.Fatalf("%d IDs, want %d", len(ids), want)
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			t.Fatalf("duplicate ID %d", sorted[i])
		}
	}
	if int64(sorted[len(sorted)-1]) < 0 {
		t.Fatal("negative ID")
	}
}
