package uidcore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// expand is every ID of runs, checking that they strictly increase.
func expand(t *testing.T, runs []Run) []uint64 {
	t.Helper()
	ids := expandRuns(runs)
	if !strictlyIncreasing(ids) {
		t.Fatalf("runs do not strictly increase: %v", runs)
	}
	return ids
}

func expandRuns(runs []Run) []uint64 {
	var ids []uint64
	for _, r := range runs {
		for k := range r.Count {
			ids = append(ids, r.First+k)
		}
	}
	return ids
}

func strictlyIncreasing(ids []uint64) bool {
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			return false
		}
	}
	return true
}

// Reservations hand out the ring's IDs first, then the lanes' next ones
// without the ring, under the ahead bound; a take after a reservation
// gets IDs above it.
func TestReserveRunsRingFirstThenTheLanesUpToTheAheadBound(t *testing.T) {
	clock := newFakeClock(t0)
	// A ring of one second (256 IDs) under a bound of three.
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 1, Clock: clock, MaxAhead: 2 * time.Second})
	ctx := context.Background()
	before := mustNext(t, g.Next)
	inRing := g.State().Available
	// Seconds t0..t0+2 may be filled: 3 × 256 IDs, one taken.
	runs, got, err := g.ReserveRuns(ctx, nil, 10_000, false)
	if err != nil || got != 3*256-1 {
		t.Fatalf("reserved %d IDs (%v), want %d", got, err, 3*256-1)
	}
	ids := expand(t, runs)
	if uint64(len(ids)) != got || ids[0] != before+1 {
		t.Fatalf("%d IDs from %d, want %d from %d (the ring's next)", len(ids), ids[0], got, before+1)
	}
	// One run per second: the ring's IDs merge with the lanes' that follow.
	if len(runs) != 3 {
		t.Errorf("%d runs, want one per second: %v", len(runs), runs)
	}
	if inRing >= got {
		t.Fatalf("the ring held %d: the test wants a reservation beyond it", inRing)
	}
	st := g.State()
	if st.Available != 0 || st.SecondsAhead != 2 || !st.Throttled {
		t.Errorf("state after reserving up to the bound: %+v", st)
	}
	if _, err := g.Next(ctx); !errors.Is(err, ErrBufferEmpty) {
		t.Fatalf("a take at the bound: %v", err)
	}
	clock.Add(time.Second)
	if _, err := g.padNow(ctx); err != nil {
		t.Fatal(err)
	}
	after := mustNext(t, g.Next)
	if after <= ids[len(ids)-1] {
		t.Fatalf("take after the reservation %d, not above its last %d", after, ids[len(ids)-1])
	}
	more, got2, err := g.ReserveRuns(ctx, nil, 10_000, false)
	if err != nil || got2 != 255 || expand(t, more)[0] != after+1 {
		t.Fatalf("a second later: %d IDs from %v, %v", got2, more, err)
	}
}

// Waiting reservations end at their context with the empty ring's error,
// and keep what they reserved.
func TestReserveRunsWaitEndsAtTheContext(t *testing.T) {
	clock := newFakeClock(t0)
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 4, Clock: clock, MaxAhead: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancelled once the reservation waits: the ring's round ends
		// tell nothing here, the clock never moves.
		for g.State().PaddingRounds < 2 || g.State().Available != 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	runs, got, err := g.ReserveRuns(ctx, nil, 10_000, true)
	if !errors.Is(err, ErrBufferEmpty) || got != 2*256 || uint64(len(expand(t, runs))) != got {
		t.Fatalf("reserved %d, %v; want %d and ErrBufferEmpty", got, err, 2*256)
	}
}

// Concurrent reservations, bulk takes and single takes never share an
// ID, on a generator with lanes that come and go with demand.
func TestReserveRunsConcurrentWithTakesUnique(t *testing.T) {
	g := newTestCached(t, CachedOptions{Claim: &laneClaim{id: 1, done: make(chan struct{})}, Lanes: &laneStore{}, MaxLanes: 4, TakeWait: time.Second})
	const reservers, takers, rounds, n = 4, 4, 2, 200_000
	var mu sync.Mutex
	var all []uint64
	keep := func(ids []uint64) {
		mu.Lock()
		all = append(all, ids...)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	errs := make(chan error, reservers+takers)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range reservers {
		wg.Go(func() {
			for range rounds {
				runs, got, err := g.ReserveRuns(ctx, nil, n, true)
				if err != nil || got != n {
					errs <- err
					return
				}
				ids := expandRuns(runs)
				if len(ids) != n || !strictlyIncreasing(ids) {
					t.Errorf("%d IDs in runs of %d, increasing %v", len(ids), got, strictlyIncreasing(ids))
				}
				keep(ids)
			}
		})
	}
	for i := range takers {
		wg.Go(func() {
			var mine []uint64
			buf := make([]uint64, 100)
			for range 5_000 {
				if i%2 == 0 {
					id, err := g.Next(ctx)
					if err != nil {
						errs <- err
						return
					}
					mine = append(mine, id)
					continue
				}
				k, err := g.NextN(ctx, buf)
				if err != nil {
					errs <- err
					return
				}
				mine = append(mine, buf[:k]...)
			}
			if !strictlyIncreasing(mine) {
				t.Error("one taker's IDs do not increase")
			}
			keep(mine)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%v; state %+v", err, g.State())
	}
	slices.Sort(all)
	if len(all) != reservers*rounds*n+takers/2*5_000+takers/2*5_000*100 {
		t.Fatalf("%d IDs", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("ID %d issued twice", all[i])
		}
	}
}

// A reservation while throttled leaves the small takes' reserve in the
// ring; it must not reserve the lanes' later IDs past that reserve, or
// the reserve's IDs are issued after higher ones: IDs taken one after
// another from one instance would go down (the soak saw a bulk client's
// next batch below its previous one).
func TestReserveRunsWhileThrottledKeepsTheInstancesOrder(t *testing.T) {
	clock := newFakeClock(t0)
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 1, Clock: clock, MaxAhead: 2 * time.Second})
	ctx := context.Background()
	var taken []uint64 // every ID in the order it was issued
	reserve := func(n uint64) {
		t.Helper()
		runs, _, err := g.ReserveRuns(ctx, nil, n, false)
		if err != nil {
			t.Fatal(err)
		}
		taken = append(taken, expand(t, runs)...)
	}
	reserve(10_000) // up to the ahead bound: throttled
	clock.Add(time.Second)
	if _, err := g.padNow(ctx); err != nil {
		t.Fatal(err)
	}
	// The ring holds the new second; small takes leave less of it than
	// any reserve (at least 32 here).
	for g.State().Available > 16 {
		taken = append(taken, mustNext(t, g.Next))
	}
	// The wall clock moves on: the lanes have room again, the generator
	// still counts as throttled until padding runs.
	clock.Add(time.Second)
	if !g.State().Throttled {
		t.Fatalf("the test wants a throttled generator: %+v", g.State())
	}
	reserve(100)
	for g.State().Available > 0 {
		taken = append(taken, mustNext(t, g.Next))
	}
	reserve(100)
	for i := 1; i < len(taken); i++ {
		if taken[i] <= taken[i-1] {
			t.Fatalf("ID %d issued after %d (take %d of %d): an instance's IDs must strictly increase", taken[i], taken[i-1], i, len(taken))
		}
	}
}

// A reservation made once the wall clock's second has turned, while the
// generator still counts as throttled and the ring holds no more than
// the small takes' reserve, is served from the new second at once: it
// refills the ring and takes from it. Before, it got nothing until a
// padding round refilled the ring and its taker came back, and a taker
// that missed that round's end waited for the next second (the blocks
// publisher's run take hit its deadline, CI's
// TestBlocksPublisherOutrunByConsumers/binary=false).
func TestReserveRunsAfterTheSecondTurnsIsServedWhileThrottled(t *testing.T) {
	clock := newFakeClock(t0)
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 1, Clock: clock, MaxAhead: 2 * time.Second})
	ctx := context.Background()
	var taken []uint64 // every ID in the order it was issued
	reserve := func(n uint64) uint64 {
		t.Helper()
		runs, got, err := g.ReserveRuns(ctx, nil, n, false)
		if err != nil {
			t.Fatal(err)
		}
		taken = append(taken, expand(t, runs)...)
		return got
	}
	reserve(10_000) // up to the ahead bound: throttled
	clock.Add(time.Second)
	if _, err := g.padNow(ctx); err != nil {
		t.Fatal(err)
	}
	// Small takes leave less of the ring than any reserve (at least 32).
	for g.State().Available > 16 {
		taken = append(taken, mustNext(t, g.Next))
	}
	clock.Add(time.Second) // the lanes have a second more
	if !g.State().Throttled {
		t.Fatalf("the test wants a throttled generator: %+v", g.State())
	}
	const want = 100
	if got := reserve(want); got != want {
		t.Fatalf("a reservation after the second turned got %d IDs, want %d: the lanes had a second of IDs (state %+v)", got, want, g.State())
	}
	// The small takes' reserve is still there, above the reservation.
	st := g.State()
	if st.Available == 0 {
		t.Fatalf("the reservation took the small takes' reserve: %+v", st)
	}
	for range st.Available {
		taken = append(taken, mustNext(t, g.Next))
	}
	for i := 1; i < len(taken); i++ {
		if taken[i] <= taken[i-1] {
			t.Fatalf("ID %d issued after %d (take %d of %d): an instance's IDs must strictly increase", taken[i], taken[i-1], i, len(taken))
		}
	}
}

// Reservations and small takes on a generator held at its ahead bound
// (one lane of 1,024 IDs a second) never share an ID, and each taker's
// IDs increase. The test clock moves a second on each time the lanes
// reach the bound, and a reservation follows at once, before padding's
// round: the reservations go through the ring while throttled, and
// refill it themselves when the lanes have room.
func TestReserveRunsWhileThrottledConcurrentWithTakesUnique(t *testing.T) {
	clock := newFakeClock(t0)
	g := newTestCached(t, CachedOptions{Layout: Layout{TimeBits: 31, WorkerBits: 22, SeqBits: 10, Epoch: DefaultEpoch},
		Clock: clock, MaxAhead: time.Second, TakeWait: time.Minute})
	const reservers, rounds, n, singles = 2, 20, 300, 300
	var mu sync.Mutex
	var all []uint64
	keep := func(ids []uint64) {
		mu.Lock()
		all = append(all, ids...)
		mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var takers, driver sync.WaitGroup
	errs := make(chan error, reservers+3)
	for range reservers {
		takers.Go(func() {
			var mine []uint64
			for range rounds {
				runs, got, err := g.ReserveRuns(ctx, nil, n, true)
				if err != nil || got != n {
					errs <- fmt.Errorf("reserved %d of %d: %w", got, n, err)
					return
				}
				mine = append(mine, expandRuns(runs)...)
			}
			if !strictlyIncreasing(mine) {
				t.Error("one reserver's IDs do not increase")
			}
			keep(mine)
		})
	}
	for range 2 {
		takers.Go(func() {
			var mine []uint64
			for range singles {
				id, err := g.Next(ctx)
				if err != nil {
					errs <- err
					return
				}
				mine = append(mine, id)
			}
			if !strictlyIncreasing(mine) {
				t.Error("one taker's IDs do not increase")
			}
			keep(mine)
		})
	}
	stop := make(chan struct{})
	driver.Go(func() {
		var mine []uint64
		for {
			select {
			case <-stop:
				if !strictlyIncreasing(mine) {
					t.Error("the driver's IDs do not increase")
				}
				keep(mine)
				return
			default:
			}
			if g.State().SecondsAhead < 1 {
				time.Sleep(time.Millisecond) // pacing, not a wait for a result
				continue
			}
			clock.Add(time.Second)
			runs, _, err := g.ReserveRuns(ctx, nil, 50, false)
			if err != nil {
				errs <- err
				return
			}
			mine = append(mine, expandRuns(runs)...)
		}
	})
	takers.Wait()
	close(stop)
	driver.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%v; state %+v", err, g.State())
	}
	if len(all) < reservers*rounds*n+2*singles {
		t.Fatalf("%d IDs, want at least %d", len(all), reservers*rounds*n+2*singles)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("ID %d issued twice", all[i])
		}
	}
}
