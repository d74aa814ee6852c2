package uidcore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
)

// laneClaim is a claim of laneStore's, whose validity the test controls.
type laneClaim struct {
	id       uint64
	after    int64
	invalid  atomic.Bool
	done     chan struct{}
	retired  atomic.Int64
	released atomic.Bool
	// releaseErr is what Release returns: the store cannot be reached.
	releaseErr error
}

func (c *laneClaim) WorkerID() uint64 { return c.id }
func (c *laneClaim) After() int64     { return c.after }
func (c *laneClaim) Until() (int64, error) {
	if c.invalid.Load() {
		return 0, ErrClaimLost
	}
	return 1 << 40, nil
}
func (c *laneClaim) Retire(s int64)        { c.retired.Store(s) }
func (c *laneClaim) Done() <-chan struct{} { return c.done }
func (c *laneClaim) Release(context.Context) error {
	c.released.Store(true)
	return c.releaseErr
}

// laneStore stands in for a worker-ID store (uidcore has none of its
// own): it hands out ascending worker IDs from 10, each once.
type laneStore struct {
	mu     sync.Mutex
	next   uint64
	claims []*laneClaim
	after  int64 // After of the claims it hands out
	// releaseErr is what its claims' Release returns (nil: success).
	releaseErr error
}

func (s *laneStore) Claim(ctx context.Context, _ Layout) (Claim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &laneClaim{id: 10 + s.next, after: s.after, done: make(chan struct{}), releaseErr: s.releaseErr}
	s.next++
	s.claims = append(s.claims, c)
	return c, nil
}

func (s *laneStore) all() []*laneClaim {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.claims)
}

// takeSmall takes n IDs in takes of SmallTake, which a throttled
// generator never makes wait for its reserve.
func takeSmall(t *testing.T, g *CachedGenerator, n int) []uint64 {
	t.Helper()
	var ids []uint64
	for len(ids) < n {
		dst := make([]uint64, min(SmallTake, n-len(ids)))
		if _, err := g.NextN(context.Background(), dst); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, dst...)
	}
	return ids
}

// awaitLanes waits until the generator has claimed want extra lanes.
// Padding asks for a lane in each round that takers borrow the future in,
// but keeps one ask queued: on a loaded machine a whole take may run
// before the lane goroutine claims the first lane, and the asks made
// meanwhile are dropped, so no more lanes come once the take is over.
// Padding's own ask starts the claims (the first lane comes of it, which
// is checked); the test then asks again as the next borrowing round would.
func awaitLanes(t *testing.T, g *CachedGenerator, want uint64) {
	t.Helper()
	testwait.WaitFor(t, 5*time.Second, "the extra lane padding asked for", func() bool { return g.State().LanesClaimed >= 1 })
	testwait.WaitFor(t, 5*time.Second, fmt.Sprintf("%d extra lanes", want), func() bool {
		if g.State().LanesClaimed >= want {
			return true
		}
		g.lanes.askForAnother()
		return false
	})
	if got := g.State().LanesClaimed; got != want {
		t.Fatalf("%d extra lanes claimed, want %d", got, want)
	}
}

func TestLanesGrowInWorkerIDOrderAndKeepIDsIncreasing(t *testing.T) {
	clock := newFakeClock(t0)
	store := &laneStore{}
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 16, Clock: clock, Claim: StaticClaim{ID: 3},
		Lanes: store, MaxLanes: 3, TakeWait: paddingWait})
	ctx := context.Background()
	var ids []uint64
	take := func(n int) {
		t.Helper()
		ids = append(ids, takeSmall(t, g, n)...)
	}
	// One lane gives 256 a second; three seconds' worth borrows the future,
	// which must make the generator claim more lanes, up to MaxLanes.
	take(3 * 256)
	awaitLanes(t, g, 2)        // in use from the next second
	clock.Add(5 * time.Second) // the new second is filled by all three lanes
	g.padNow(ctx)
	take(3*256 + 10)
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("ID %d after %d: not increasing", ids[i], ids[i-1])
		}
	}
	assertUnique(t, ids, len(ids))
	workers := map[uint64]int{}
	now := clock.Now().Unix()
	for _, id := range ids {
		p := uidcoretest.MustParse(t, g.Layout().Parse, id)
		if p.Time.Unix() == now {
			workers[p.WorkerID]++
		}
	}
	if workers[3] != 256 || workers[10] != 256 || workers[11] != 256 {
		t.Errorf("IDs of the current second by worker: %v, want 256 of each of 3, 10, 11", workers)
	}
	st := g.State()
	if !slices.Equal(st.Lanes, []uint64{3, 10, 11}) || st.LanesClaimed != 2 || st.PerSecond != 3*256 {
		t.Errorf("state %+v", st)
	}
	if n := len(store.all()); n != 2 {
		t.Errorf("%d lanes claimed, want MaxLanes-1 = 2", n)
	}
}

func TestLanesSkipSecondsTheirPreviousHolderMayHaveUsed(t *testing.T) {
	clock := newFakeClock(t0)
	// Every extra lane's previous holder reserved up to t0+100.
	store := &laneStore{after: t0.Unix() + 100}
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), Clock: clock, Claim: StaticClaim{ID: 3},
		Lanes: store, MaxLanes: 2, TakeWait: paddingWait})
	ctx := context.Background()
	takeSmall(t, g, 3*256)
	awaitLanes(t, g, 1)
	clock.Add(10 * time.Second)
	g.padNow(ctx)
	dst := make([]uint64, 300)
	n, _ := g.TryNextN(dst)
	if n != len(dst) {
		t.Fatalf("took %d of %d IDs", n, len(dst))
	}
	for _, id := range dst {
		if p := uidcoretest.MustParse(t, g.Layout().Parse, id); p.WorkerID != 3 {
			t.Fatalf("worker %d issued second %d, which its previous holder may have used (up to %d)", p.WorkerID, p.Time.Unix(), t0.Unix()+100)
		}
	}
}

func TestLanesIdleAreGivenBackAtTheirLastSecond(t *testing.T) {
	store := &laneStore{}
	layout := Layout{TimeBits: 43, WorkerBits: 8, SeqBits: 12, Epoch: DefaultEpoch} // 4,096 a second a lane
	g := newTestCached(t, CachedOptions{Layout: layout, RingSeconds: 4, Claim: StaticClaim{ID: 3},
		Lanes: store, MaxLanes: 4, LaneIdle: time.Second, TakeWait: paddingWait})
	ctx := context.Background()
	var issued []uint64
	dst := make([]uint64, 1000)
	for len(g.State().Lanes) < 3 {
		if _, err := g.NextN(ctx, dst); err != nil {
			t.Fatal(err)
		}
		issued = append(issued, dst...)
	}
	testwait.WaitFor(t, 10*time.Second, "idle lanes given back", func() bool {
		return len(g.State().Lanes) == 1 && g.State().LanesReleased >= 2
	})
	assertUnique(t, issued, len(issued))
	maxSecond := map[uint64]int64{}
	for _, id := range issued {
		p := uidcoretest.MustParse(t, layout.Parse, id)
		maxSecond[p.WorkerID] = max(maxSecond[p.WorkerID], p.Time.Unix())
	}
	for _, c := range store.all() {
		if !c.released.Load() {
			continue
		}
		if r := c.retired.Load(); r < maxSecond[c.id] {
			t.Errorf("worker %d retired at %d, but issued second %d", c.id, r, maxSecond[c.id])
		}
	}
	if st := g.State(); st.Lanes[0] != 3 {
		t.Errorf("the first lane was given back: %+v", st)
	}
}

func TestLanesLostLaneIsSkippedAndDropped(t *testing.T) {
	store := &laneStore{}
	layout := Layout{TimeBits: 43, WorkerBits: 8, SeqBits: 12, Epoch: DefaultEpoch}
	g := newTestCached(t, CachedOptions{Layout: layout, RingSeconds: 4, Claim: StaticClaim{ID: 3},
		Lanes: store, MaxLanes: 3, TakeWait: paddingWait})
	ctx := context.Background()
	dst := make([]uint64, 1000)
	var issued []uint64
	for len(g.State().Lanes) < 3 {
		if _, err := g.NextN(ctx, dst); err != nil {
			t.Fatal(err)
		}
		issued = append(issued, dst...)
	}
	lost := store.all()[0]
	lost.invalid.Store(true) // taken over, say: padding must skip it at once
	close(lost.done)         // lost for good: the generator gives it back
	testwait.WaitFor(t, 5*time.Second, "the lost lane given back", func() bool { return lost.released.Load() })
	lostAt := time.Now().Unix()
	// Keep taking across seconds: every ID is unique, none of the lost lane
	// is of a second after it was lost.
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
		if _, err := g.NextN(ctx, dst); err != nil {
			t.Fatal(err)
		}
		issued = append(issued, dst...)
	}
	assertUnique(t, issued, len(issued))
	for _, id := range issued {
		if p := uidcoretest.MustParse(t, layout.Parse, id); p.WorkerID == lost.id && p.Time.Unix() > lostAt {
			t.Fatalf("the lost lane issued second %d after it was lost at %d", p.Time.Unix(), lostAt)
		}
	}
}

func TestLanesConcurrentTakersUniqueAndNearTheClock(t *testing.T) {
	store := &laneStore{}
	layout := Layout{TimeBits: 43, WorkerBits: 8, SeqBits: 12, Epoch: DefaultEpoch}
	g := newTestCached(t, CachedOptions{Layout: layout, RingSeconds: 8, Claim: StaticClaim{ID: 3},
		Lanes: store, MaxLanes: 8, TakeWait: paddingWait})
	const takers = 6
	per := make([][]uint64, takers)
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	// Each taker takes as fast as it can until it has its share and the
	// generator holds a second lane: demand far above one lane's 4,096
	// IDs/s, however slow a loaded machine makes the takers, ends the run
	// by state rather than after a fixed time.
	const share = 5000
	for w := range takers {
		wg.Go(func() {
			dst := make([]uint64, 1+w*40)
			for len(per[w]) < share || len(g.State().Lanes) < 2 {
				n, err := g.NextN(context.Background(), dst)
				if err != nil && !errors.Is(err, ErrBufferEmpty) {
					failed.Store(&err)
					return
				}
				per[w] = append(per[w], dst[:n]...)
				if n > 0 {
					if p, err := layout.Parse(dst[n-1]); err != nil || p.Time.Unix() > time.Now().Unix()+2 {
						err := fmt.Errorf("an ID more than 2s ahead of the clock, or unparsable: %w", err)
						failed.Store(&err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		t.Fatal(*p)
	}
	var all []uint64
	for w, ids := range per {
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("taker %d: ID %d after %d", w, ids[i], ids[i-1])
			}
		}
		all = append(all, ids...)
	}
	assertUnique(t, all, len(all))
	if st := g.State(); len(st.Lanes) < 2 {
		t.Errorf("demand far above one lane's 4,096/s, but the generator holds %v", st.Lanes)
	}
	t.Logf("%d IDs, lanes %v", len(all), g.State().Lanes)
}

func TestLanesClosedGeneratorGivesEveryExtraLaneBack(t *testing.T) {
	clock := newFakeClock(t0)
	store := &laneStore{}
	g, err := NewCached(CachedOptions{Layout: smallLayout(), Clock: clock, Claim: StaticClaim{ID: 3},
		Lanes: store, MaxLanes: 3, TakeWait: paddingWait})
	if err != nil {
		t.Fatal(err)
	}
	takeSmall(t, g, 3*256)
	awaitLanes(t, g, 2)
	g.Close()
	for _, c := range store.all() {
		if !c.released.Load() {
			t.Errorf("worker %d not given back on Close", c.id)
		}
	}
}

// laneEvents records what a generator tells its lane observer.
type laneEvents struct {
	NopObserver
	mu     sync.Mutex
	events []LaneEvent
}

func (o *laneEvents) LaneChanged(_ context.Context, e LaneEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

// A lane given back while the store is away is given back all the same,
// and the observer learns that its release failed (an operator otherwise
// reads "given back" and looks for the release in the store).
func TestLanesGivenBackWithTheStoreAwayReportTheReleaseError(t *testing.T) {
	clock := newFakeClock(t0)
	away := errors.New("store unreachable")
	store := &laneStore{releaseErr: away}
	obs := &laneEvents{}
	g, err := NewCached(CachedOptions{Layout: smallLayout(), Clock: clock, Claim: StaticClaim{ID: 3},
		Lanes: store, MaxLanes: 3, TakeWait: paddingWait, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	takeSmall(t, g, 3*256)
	awaitLanes(t, g, 2)
	g.Close()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	given := 0
	for _, e := range obs.events {
		if e.Added || e.Err != nil {
			continue
		}
		given++
		if !errors.Is(e.ReleaseErr, away) {
			t.Errorf("lane %d given back with release error %v, want %v", e.WorkerID, e.ReleaseErr, away)
		}
	}
	if given != 2 {
		t.Errorf("%d lanes given back, want 2: %+v", given, obs.events)
	}
	if st := g.State(); st.LanesReleased != 2 {
		t.Errorf("%d lanes counted as released, want 2", st.LanesReleased)
	}
}

// The first lane is kept whatever its worker ID; an extra lane below it
// is as surplus as one above it once demand falls.
func TestLanesBelowTheFirstAreGivenBackToo(t *testing.T) {
	store := &laneStore{}
	layout := Layout{TimeBits: 43, WorkerBits: 8, SeqBits: 12, Epoch: DefaultEpoch}
	// The first lane is worker 200; extra lanes come from 10 up.
	g := newTestCached(t, CachedOptions{Layout: layout, RingSeconds: 4, Claim: StaticClaim{ID: 200},
		Lanes: store, MaxLanes: 3, LaneIdle: time.Second, TakeWait: paddingWait})
	dst := make([]uint64, 1000)
	for len(g.State().Lanes) < 2 {
		if _, err := g.NextN(context.Background(), dst); err != nil {
			t.Fatal(err)
		}
	}
	testwait.WaitFor(t, 10*time.Second, "the lane below the first given back", func() bool {
		st := g.State()
		return len(st.Lanes) == 1 && st.Lanes[0] == 200
	})
}

// A second partly filled by one round (the first lane, then the ring was
// full) must not be filled again when the next round finds every other
// lane unusable: it moves on to the next second instead of starting the
// lanes over (which handed the first lane's IDs out twice).
func TestLanesNeverRefillASecondAfterTheOthersFail(t *testing.T) {
	clock := newFakeClock(t0)
	store := &laneStore{}
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 1, Clock: clock, Claim: StaticClaim{ID: 3},
		Lanes: store, MaxLanes: 3, TakeWait: paddingWait, MaxAhead: 10 * time.Second})
	ctx := context.Background()
	ids := takeSmall(t, g, 3*256)
	awaitLanes(t, g, 2)
	clock.Add(20 * time.Second)
	g.padNow(ctx) // fills the new second's first lane: the 256-slot ring is full
	ids = append(ids, takeSmall(t, g, 256)...)
	for _, c := range store.all() {
		c.invalid.Store(true) // the other lanes become unusable
	}
	for range 4 {
		g.padNow(ctx)
		dst := make([]uint64, 64)
		if got, _ := g.TryNextN(dst); got > 0 {
			ids = append(ids, dst[:got]...)
		}
	}
	assertUnique(t, ids, len(ids))
}
