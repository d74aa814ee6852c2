package uidcore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
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

// taker is one goroutine of takeConcurrently: times takes, each
// returning the IDs it got.
type taker struct {
	name  string
	times int
	take  func() ([]uint64, error)
}

// takeConcurrently runs each taker on its own goroutine, checks that each
// one's IDs strictly increase, and returns every ID taken. A take's error
// fails the test.
func takeConcurrently(t *testing.T, g *CachedGenerator, takers []taker) []uint64 {
	t.Helper()
	var mu sync.Mutex
	var all []uint64
	var wg sync.WaitGroup
	errs := make(chan error, len(takers))
	for _, tk := range takers {
		wg.Go(func() {
			var mine []uint64
			for range tk.times {
				ids, err := tk.take()
				if err != nil {
					errs <- fmt.Errorf("%s: %w", tk.name, err)
					return
				}
				mine = append(mine, ids...)
			}
			if !strictlyIncreasing(mine) {
				t.Errorf("%s: its IDs do not increase", tk.name)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%v; state %+v", err, g.State())
	}
	return all
}

// reserver takes n IDs by ReserveRuns, waiting for all of them.
func reserver(ctx context.Context, g *CachedGenerator, n uint64) func() ([]uint64, error) {
	return func() ([]uint64, error) {
		runs, got, err := g.ReserveRuns(ctx, nil, n, true)
		if err == nil && got != n {
			err = fmt.Errorf("reserved %d of %d", got, n)
		}
		return expandRuns(runs), err
	}
}

// nexter takes one ID by Next.
func nexter(ctx context.Context, g *CachedGenerator) func() ([]uint64, error) {
	return func() ([]uint64, error) {
		id, err := g.Next(ctx)
		return []uint64{id}, err
	}
}

// Concurrent reservations, bulk takes and single takes never share an
// ID, on a generator with lanes that come and go with demand.
func TestReserveRunsConcurrentWithTakesUnique(t *testing.T) {
	// paddingWait, not a second: under make test's load a take met an
	// empty ring for a second while padding waited for a core ("taker 1:
	// ring buffer empty").
	g := newTestCached(t, CachedOptions{Claim: &laneClaim{id: 1, done: make(chan struct{})}, Lanes: &laneStore{}, MaxLanes: 4, TakeWait: paddingWait})
	const reservers, takers, rounds, n = 4, 4, 2, 200_000
	ctx := testwait.Context(t)
	var all []taker
	for i := range reservers {
		all = append(all, taker{fmt.Sprintf("reserver %d", i), rounds, reserver(ctx, g, n)})
	}
	for i := range takers {
		if i%2 == 0 {
			all = append(all, taker{fmt.Sprintf("taker %d", i), 5_000, nexter(ctx, g)})
			continue
		}
		buf := make([]uint64, 100)
		all = append(all, taker{fmt.Sprintf("taker %d", i), 5_000, func() ([]uint64, error) {
			k, err := g.NextN(ctx, buf)
			return buf[:k], err
		}})
	}
	ids := takeConcurrently(t, g, all)
	assertUnique(t, ids, reservers*rounds*n+takers/2*5_000+takers/2*5_000*100)
}

// throttledRing is a generator that met its ahead bound, whose ring the
// small takes then emptied down to less than their reserve, and whose
// test clock then moved a second on: the lanes have room again, and the
// generator still counts as throttled until padding runs. taken is every
// ID it issued, in order.
type throttledRing struct {
	g     *CachedGenerator
	taken []uint64
}

func newThrottledRing(t *testing.T) *throttledRing {
	t.Helper()
	clock := newFakeClock(t0)
	tr := &throttledRing{g: newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 1, Clock: clock, MaxAhead: 2 * time.Second})}
	tr.reserve(t, 10_000) // up to the ahead bound: throttled
	clock.Add(time.Second)
	if _, err := tr.g.padNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The ring holds the new second; small takes leave less of it than
	// any reserve (at least 32 here).
	for tr.g.State().Available > 16 {
		tr.next(t)
	}
	clock.Add(time.Second)
	if !tr.g.State().Throttled {
		t.Fatalf("the test wants a throttled generator: %+v", tr.g.State())
	}
	return tr
}

// reserve reserves up to n IDs without waiting and returns how many.
func (tr *throttledRing) reserve(t *testing.T, n uint64) uint64 {
	t.Helper()
	runs, got, err := tr.g.ReserveRuns(context.Background(), nil, n, false)
	if err != nil {
		t.Fatal(err)
	}
	tr.taken = append(tr.taken, expand(t, runs)...)
	return got
}

func (tr *throttledRing) next(t *testing.T) {
	t.Helper()
	tr.taken = append(tr.taken, mustNext(t, tr.g.Next))
}

// takeTheRing takes what the ring holds with small takes.
func (tr *throttledRing) takeTheRing(t *testing.T) {
	t.Helper()
	for tr.g.State().Available > 0 {
		tr.next(t)
	}
}

// assertIncreasing fails the test unless the IDs strictly increase in the
// order they were issued.
func (tr *throttledRing) assertIncreasing(t *testing.T) {
	t.Helper()
	for i := 1; i < len(tr.taken); i++ {
		if tr.taken[i] <= tr.taken[i-1] {
			t.Fatalf("ID %d issued after %d (take %d of %d): an instance's IDs must strictly increase", tr.taken[i], tr.taken[i-1], i, len(tr.taken))
		}
	}
}

// A reservation while throttled leaves the small takes' reserve in the
// ring; it must not reserve the lanes' later IDs past that reserve, or
// the reserve's IDs are issued after higher ones: IDs taken one after
// another from one instance would go down (the soak saw a bulk client's
// next batch below its previous one).
func TestReserveRunsWhileThrottledKeepsTheInstancesOrder(t *testing.T) {
	tr := newThrottledRing(t)
	tr.reserve(t, 100)
	tr.takeTheRing(t)
	tr.reserve(t, 100)
	tr.assertIncreasing(t)
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
	tr := newThrottledRing(t)
	const want = 100
	if got := tr.reserve(t, want); got != want {
		t.Fatalf("a reservation after the second turned got %d IDs, want %d: the lanes had a second of IDs (state %+v)", got, want, tr.g.State())
	}
	// The small takes' reserve is still there, above the reservation.
	if st := tr.g.State(); st.Available == 0 {
		t.Fatalf("the reservation took the small takes' reserve: %+v", st)
	}
	tr.takeTheRing(t)
	tr.assertIncreasing(t)
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
	const rounds, n, singles = 20, 300, 300
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stop := make(chan struct{})
	var driven []uint64
	var driver sync.WaitGroup
	driver.Go(func() {
		for {
			select {
			case <-stop:
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
				t.Errorf("the driver's reservation: %v", err)
				return
			}
			driven = append(driven, expandRuns(runs)...)
		}
	})
	ids := takeConcurrently(t, g, []taker{
		{"reserver 0", rounds, reserver(ctx, g, n)},
		{"reserver 1", rounds, reserver(ctx, g, n)},
		{"taker 0", singles, nexter(ctx, g)},
		{"taker 1", singles, nexter(ctx, g)},
	})
	close(stop)
	driver.Wait()
	if !strictlyIncreasing(driven) {
		t.Error("the driver's IDs do not increase")
	}
	if len(ids) != 2*rounds*n+2*singles {
		t.Fatalf("%d IDs taken, want %d", len(ids), 2*rounds*n+2*singles)
	}
	assertUnique(t, append(ids, driven...), len(ids)+len(driven))
}

// roundCounter counts padding's rounds: reservations' answers and the
// others.
type roundCounter struct {
	NopObserver
	answers, others atomic.Int64
}

func (o *roundCounter) PaddingStarted(ctx context.Context, trigger PaddingTrigger) context.Context {
	if trigger == TriggerReserve {
		o.answers.Add(1)
	} else {
		o.others.Add(1)
	}
	return ctx
}

// Reservations waiting at the ahead bound retry once a padding round (or
// the wall clock's next second) may have given more, not whenever
// another reservation is answered: two waiting reservations that woke
// each other through their answers kept the padding goroutine answering
// them (here, in 3 s: 72,378 answers at d7288e5, which waited for any
// round after the answer; 54 before it, which waited for the round
// current when the taker looked; 9 now). Counted against padding's
// other rounds while both wait: each such round, and each waiter's timer
// at the next second, may bring each waiter back once.
func TestReserveRunsWaitingAtTheBoundDoNotWakeEachOther(t *testing.T) {
	obs := &roundCounter{}
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 1, Clock: newFakeClock(t0), MaxAhead: time.Second, Observer: obs})
	ctx, cancel := context.WithCancel(context.Background())
	if _, got, err := g.ReserveRuns(ctx, nil, 10_000, false); err != nil || g.State().Available != 0 {
		t.Fatalf("reserved %d (%v), state %+v: the test wants the lanes at the bound and an empty ring", got, err, g.State())
	}
	var waiters sync.WaitGroup
	for range 2 {
		waiters.Go(func() {
			// The clock never moves: they wait until cancelled.
			if _, _, err := g.ReserveRuns(ctx, nil, 100, true); !errors.Is(err, ErrBufferEmpty) {
				t.Errorf("a waiting reservation ended with %v, want ErrBufferEmpty", err)
			}
		})
	}
	start := obs.others.Load()
	testwait.WaitFor(t, 3*time.Second, "three padding rounds while the reservations wait", func() bool { return obs.others.Load() >= start+3 })
	answers, others := obs.answers.Load(), obs.others.Load()
	cancel()
	waiters.Wait()
	if answers > 10*others+10 {
		t.Fatalf("%d answers to two waiting reservations over %d other padding rounds: they woke each other", answers, others)
	}
}
