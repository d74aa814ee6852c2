package uidcore

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
)

func newTestCached(t testing.TB, opts CachedOptions) *CachedGenerator {
	t.Helper()
	if opts.Claim == nil {
		opts.Claim = StaticClaim{ID: 1}
	}
	g, err := NewCached(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func TestCachedSequentialTenMillionStrictlyIncreasing(t *testing.T) {
	g := newTestCached(t, CachedOptions{MaxAhead: NoAheadBound, TakeWait: paddingWait})
	ctx := context.Background()
	var last uint64
	for i := range 10_000_000 {
		id, err := g.Next(ctx)
		if err != nil {
			t.Fatalf("take %d: %v", i, err)
		}
		if id <= last {
			t.Fatalf("take %d: ID %d after %d", i, id, last)
		}
		last = id
	}
}

func TestCachedConcurrentUnique(t *testing.T) {
	g := newTestCached(t, CachedOptions{MaxAhead: NoAheadBound, TakeWait: paddingWait})
	const workers, each = 8, 1_000_000
	assertUnique(t, nextConcurrently(t, workers, each, g.Next), workers*each)
}

// The ring is tiny (256 slots) so it wraps thousands of times, and takers
// without waiting race at the empty edge, where UidGenerator's take can
// hand one ID to two takers.
func TestCachedStressAtTheEmptyEdge(t *testing.T) {
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 1, MaxAhead: NoAheadBound})
	const takers = 16
	deadline := time.Now().Add(2 * time.Second)
	ids := make([][]uint64, takers)
	var rejected atomic.Uint64
	var wg sync.WaitGroup
	for w := range takers {
		wg.Go(func() {
			batch := make([]uint64, 1+w%5*17)
			for time.Now().Before(deadline) {
				if w%2 == 0 {
					id, err := g.Next(context.Background())
					if err != nil {
						if !errors.Is(err, ErrBufferEmpty) {
							t.Errorf("take: %v", err)
							return
						}
						rejected.Add(1)
						runtime.Gosched() // a real client backs off
						continue
					}
					ids[w] = append(ids[w], id)
					continue
				}
				n, err := g.NextN(context.Background(), batch)
				ids[w] = append(ids[w], batch[:n]...)
				if err != nil {
					if !errors.Is(err, ErrBufferEmpty) {
						t.Errorf("batch take: %v", err)
						return
					}
					rejected.Add(1)
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	all := slices.Concat(ids...)
	st := g.State()
	// Every slot a taker claimed reached a taker: none lost, none twice.
	assertUnique(t, all, int(st.Cursor))
	if st.Cursor < 50*st.Size {
		t.Errorf("the ring wrapped only %d times", st.Cursor/st.Size)
	}
	if rejected.Load() == 0 || st.TakeRejections == 0 {
		t.Error("the takers never met the empty edge")
	}
	t.Logf("%d IDs, %d laps, %d rejected takes, %d padding rounds", len(all), st.Cursor/st.Size, rejected.Load(), st.PaddingRounds)
}

func TestCachedNextNSpansTheWrapAndTheRing(t *testing.T) {
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 2, MaxAhead: NoAheadBound, TakeWait: paddingWait})
	ctx := context.Background()
	var got []uint64
	for _, n := range []int{100, 300, 511, 2000, 1} {
		dst := make([]uint64, n)
		k, err := g.NextN(ctx, dst)
		if err != nil || k != n {
			t.Fatalf("NextN(%d) = %d, %v", n, k, err)
		}
		got = append(got, dst...)
	}
	if !slices.IsSorted(got) {
		t.Error("batches are not increasing")
	}
	assertUnique(t, got, 2912)
}

func TestCachedResyncsAtLowLoad(t *testing.T) {
	clock := newFakeClock(t0)
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), Clock: clock})
	mustNext(t, g.Next)
	clock.Add(100 * time.Second)
	// Once the IDs padded at start-up are used, padding must follow the
	// clock instead of continuing from the last padded second.
	l := g.Layout()
	var last uint64
	for range 2 * g.Size() {
		id, err := g.Next(context.Background())
		if err != nil {
			g.padNow(context.Background())
			continue
		}
		if id <= last {
			t.Fatalf("ID %d after %d", id, last)
		}
		last = id
		p := uidcoretest.MustParse(t, l.Parse, id)
		if p.Time.Unix() > t0.Unix()+7 {
			if p.Time.Unix() != t0.Unix()+100 || p.Sequence != 0 {
				t.Fatalf("first ID after the idle time: second %d seq %d, want %d seq 0", p.Time.Unix(), p.Sequence, t0.Unix()+100)
			}
			return
		}
	}
	t.Fatal("padding never re-synced to the clock")
}

func TestCachedResumesMidSecond(t *testing.T) {
	clock := newFakeClock(t0)
	// 256 IDs a second, ring of 512: start-up fills t0 and t0+1 exactly.
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 2, Clock: clock, PaddingFactor: 100})
	dst := make([]uint64, 100)
	if _, err := g.NextN(context.Background(), dst); err != nil {
		t.Fatal(err)
	}
	if _, err := g.padNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The refill continues in t0+2 from sequence 0 and the ring holds
	// every sequence of t0+1: nothing of a second is thrown away.
	rest := make([]uint64, 512)
	if _, err := g.NextN(context.Background(), rest); err != nil {
		t.Fatal(err)
	}
	l := g.Layout()
	for i, id := range rest {
		p := uidcoretest.MustParse(t, l.Parse, id)
		wantSec := t0.Unix() + int64(100+i)/256
		if p.Time.Unix() != wantSec || p.Sequence != uint64(100+i)%256 {
			t.Fatalf("ID %d: second %d seq %d, want %d seq %d", i, p.Time.Unix(), p.Sequence, wantSec, (100+i)%256)
		}
	}
}

func TestCachedAheadBoundGivesBackPressure(t *testing.T) {
	clock := newFakeClock(t0)
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 4, Clock: clock, MaxAhead: 2 * time.Second})
	ctx := context.Background()
	// Seconds t0..t0+2 may be filled (3 × 256); the ring holds 1024.
	n := 0
	var err error
	for ; n < 2000; n++ {
		if _, err = g.Next(ctx); err != nil {
			break
		}
		if n%100 == 0 {
			g.padNow(ctx)
		}
	}
	if n != 3*256 {
		t.Errorf("issued %d IDs before back-pressure, want %d", n, 3*256)
	}
	if !errors.Is(err, ErrBufferEmpty) {
		t.Fatalf("at the bound: %v", err)
	}
	st := g.State()
	// Reported exactly: the newest ID is of t0+2, two seconds ahead (the
	// logical second, t0+3, is the one padding may not fill yet).
	if st.PutRejections == 0 || st.TakeRejections == 0 || st.SecondsAhead != 2 || !st.Throttled {
		t.Errorf("state at the bound: %+v", st)
	}
	clock.Add(time.Second)
	if _, err := g.padNow(ctx); err != nil {
		t.Fatal(err)
	}
	p := uidcoretest.MustParse(t, g.Layout().Parse, mustNext(t, g.Next))
	if p.Time.Unix() != t0.Unix()+3 {
		t.Errorf("after the clock moved on: second %d", p.Time.Unix())
	}
}

func TestCachedIgnoresTheClockMovingBack(t *testing.T) {
	clock := newFakeClock(t0)
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), Clock: clock, MaxAhead: NoAheadBound})
	ctx := context.Background()
	last := mustNext(t, g.Next)
	clock.Add(-time.Hour)
	for range 5 * g.Size() {
		id, err := g.Next(ctx)
		if errors.Is(err, ErrBufferEmpty) {
			g.padNow(ctx)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if id <= last {
			t.Fatalf("ID %d after %d with the clock an hour back", id, last)
		}
		last = id
	}
}

func TestCachedExhaustionNeverGoesNegative(t *testing.T) {
	l := smallLayout()
	l.TimeBits, l.WorkerBits = 20, 35
	clock := newFakeClock(l.RunwayEnd().Add(-2 * time.Second))
	g := newTestCached(t, CachedOptions{Layout: l, Clock: clock, MaxAhead: NoAheadBound})
	ctx := context.Background()
	var issued int
	var err error
	for range 4 * g.Size() {
		var id uint64
		if id, err = g.Next(ctx); err != nil {
			g.padNow(ctx)
			if id, err = g.Next(ctx); err != nil {
				break
			}
		}
		if int64(id) < 0 {
			t.Fatalf("negative ID %d", int64(id))
		}
		issued++
	}
	if issued != 2*256 {
		t.Errorf("issued %d IDs in the last two seconds, want 512", issued)
	}
	if !errors.Is(err, ErrTimeExhausted) || !errors.Is(err, ErrBufferEmpty) {
		t.Errorf("after the runway: %v, want ErrBufferEmpty wrapping ErrTimeExhausted", err)
	}
}

func TestCachedStartsAfterTheClaimAndStopsWhenLost(t *testing.T) {
	clock := newFakeClock(t0)
	claim := &lossyClaim{StaticClaim: StaticClaim{ID: 9, AfterSecond: t0.Unix() + 5}, until: t0.Unix() + 6}
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), Clock: clock, Claim: claim, MaxAhead: 10 * time.Second})
	ctx := context.Background()
	p := uidcoretest.MustParse(t, g.Layout().Parse, mustNext(t, g.Next))
	if p.Time.Unix() != t0.Unix()+6 || p.WorkerID != 9 {
		t.Errorf("first ID %+v, want second %d", p, t0.Unix()+6)
	}
	// Only second t0+6 is reserved: 256 IDs, then the claim must be asked for more.
	for range 255 {
		mustNext(t, g.Next)
	}
	if _, err := g.Next(ctx); !errors.Is(err, ErrNotReserved) {
		t.Errorf("beyond the reservation: %v", err)
	}
	claim.mu.Lock()
	asked := len(claim.reserved) > 0 && claim.reserved[0] == t0.Unix()+7
	claim.mu.Unlock()
	if !asked {
		t.Error("the claim was not asked to reserve second t0+7")
	}
	claim.set(t0.Unix()+100, false)
	g.padNow(ctx)
	mustNext(t, g.Next)
	claim.set(t0.Unix()+100, true)
	if _, err := g.Next(ctx); !errors.Is(err, ErrClaimLost) {
		t.Errorf("lost claim: %v", err)
	}
	if n, err := g.NextN(ctx, make([]uint64, 3)); n != 0 || !errors.Is(err, ErrClaimLost) {
		t.Errorf("lost claim batch: %d, %v", n, err)
	}
}

func TestCachedTakeWaitsForPadding(t *testing.T) {
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 1, MaxAhead: NoAheadBound, TakeWait: paddingWait})
	dst := make([]uint64, 10*g.Size())
	n, err := g.NextN(context.Background(), dst)
	if err != nil || n != len(dst) {
		t.Fatalf("NextN through ten refills: %d, %v", n, err)
	}
	assertUnique(t, dst, len(dst))
}

func TestCachedTakeWaitHonoursTheContext(t *testing.T) {
	clock := newFakeClock(t0)
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 1, Clock: clock, MaxAhead: time.Second, TakeWait: time.Minute})
	for range 512 {
		mustNext(t, g.Next)
	}
	// The clock is frozen at the bound: nothing but the context can end
	// this take's wait before TakeWait, a minute.
	rejected := g.State().TakeRejections
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan error, 1)
	go func() {
		_, err := g.Next(ctx)
		res <- err
	}()
	select {
	case err := <-res:
		t.Fatalf("the take returned before its context was cancelled: %v", err)
	default:
	}
	cancel()
	testwait.WaitFor(t, 30*time.Second, "the take to return once its context is cancelled", func() bool { return len(res) == 1 })
	if err := <-res; !errors.Is(err, ErrBufferEmpty) {
		t.Errorf("at the bound with a cancelled context: %v", err)
	}
	if n := g.State().TakeRejections - rejected; n != 1 {
		t.Errorf("%d take rejections counted, want 1", n)
	}
}

type recordingObserver struct {
	mu      sync.Mutex
	events  []string
	reports []PaddingReport
}

type ctxKey struct{}

func (o *recordingObserver) add(e string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

func (o *recordingObserver) PaddingStarted(ctx context.Context, trigger PaddingTrigger) context.Context {
	o.add("start:" + string(trigger))
	return context.WithValue(ctx, ctxKey{}, "padding")
}

func (o *recordingObserver) PutRejected(ctx context.Context, r PutRejection) {
	o.add("put-rejected:" + string(r.Reason) + ":" + ctx.Value(ctxKey{}).(string))
}

func (o *recordingObserver) PaddingFinished(ctx context.Context, r PaddingReport) {
	o.mu.Lock()
	o.reports = append(o.reports, r)
	o.mu.Unlock()
	o.add("finish:" + ctx.Value(ctxKey{}).(string))
}

func (o *recordingObserver) TakeRejected(ctx context.Context, r TakeRejection) {
	v, _ := ctx.Value(ctxKey{}).(string)
	o.add("take-rejected:" + v)
}

func TestCachedObserverAndPolicies(t *testing.T) {
	clock := newFakeClock(t0)
	obs := &recordingObserver{}
	errCustom := errors.New("custom")
	var puts atomic.Int32
	g := newTestCached(t, CachedOptions{
		Layout: smallLayout(), RingSeconds: 2, Clock: clock, MaxAhead: time.Second, Observer: obs,
		OnPutReject:  func(context.Context, PutRejection) { puts.Add(1) },
		OnTakeReject: func(_ context.Context, r TakeRejection) error { return errors.Join(errCustom, r.Err) },
	})
	obs.mu.Lock()
	startup := slices.Clone(obs.events)
	report := obs.reports[0]
	obs.mu.Unlock()
	if !slices.Equal(startup, []string{"start:startup", "finish:padding"}) {
		t.Errorf("start-up events %v", startup)
	}
	if report.Added != 512 || report.FirstSecond != t0.Unix() || report.LastSecond != t0.Unix()+1 || report.SecondsAhead != 1 {
		t.Errorf("start-up report %+v", report)
	}
	ctx := context.WithValue(context.Background(), ctxKey{}, "request")
	dst := make([]uint64, 512)
	if _, err := g.NextN(ctx, dst); err != nil {
		t.Fatal(err)
	}
	g.padNow(ctx)
	_, err := g.Next(ctx)
	if !errors.Is(err, errCustom) || !errors.Is(err, ErrBufferEmpty) {
		t.Errorf("take policy result: %v", err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if !slices.Contains(obs.events, "put-rejected:ahead_of_clock_bound:padding") {
		t.Errorf("no put rejection on the padding context: %v", obs.events)
	}
	if !slices.Contains(obs.events, "take-rejected:request") {
		t.Errorf("no take rejection on the request context: %v", obs.events)
	}
	if puts.Load() == 0 {
		t.Error("put policy not called")
	}
}

func TestCachedCloseStopsPaddingAndTakes(t *testing.T) {
	g, err := NewCached(CachedOptions{Claim: StaticClaim{ID: 1}, Layout: smallLayout(), RingSeconds: 1, ScheduleInterval: time.Millisecond, TakeWait: paddingWait})
	if err != nil {
		t.Fatal(err)
	}
	// Close while padding runs on its schedule: the start-up round, then
	// at least one scheduled one.
	testwait.WaitFor(t, 5*time.Second, "a scheduled padding round", func() bool { return g.State().PaddingRounds >= 2 })
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	g.Close() // idempotent
	ctx := context.Background()
	for range g.Size() {
		if _, err := g.Next(ctx); err != nil {
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("after close: %v", err)
			}
			return
		}
	}
	if _, err := g.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("drained after close: %v", err)
	}
	if _, err := g.padNow(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("pad after close: %v", err)
	}
}

func TestCachedScheduledPadding(t *testing.T) {
	obs := &recordingObserver{}
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), ScheduleInterval: 5 * time.Millisecond, Observer: obs})
	mustNext(t, g.Next)
	testwait.WaitFor(t, 5*time.Second, "a scheduled padding round", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return slices.Contains(obs.events, "start:schedule")
	})
}

func TestCachedRingMemory(t *testing.T) {
	g := newTestCached(t, CachedOptions{})
	bytes := len(g.slots)*8 + len(g.canTake)*8
	// The default layout's 4,194,304 IDs a second << 3 would be 256 MiB:
	// the ring is capped by memory instead (8 MiB of IDs, 1/64 more of bits).
	if g.Size() != 1<<20 || len(g.slots)*8 > DefaultRingMemory || bytes > DefaultRingMemory*65/64 {
		t.Errorf("default ring: %d slots, %d bytes", g.Size(), bytes)
	}
	t.Logf("default ring: %d slots in %.2f MiB", g.Size(), float64(bytes)/(1<<20))
}

// NewCached refuses what Validate refuses, and Validate names the field
// of each bad setting without building a ring; the claim is NewCached's
// alone to require.
func TestCachedOptionsValidation(t *testing.T) {
	claim := StaticClaim{ID: 1}
	for _, c := range []struct {
		opts  CachedOptions
		field string // "": Validate accepts it, only NewCached refuses it
	}{
		{CachedOptions{}, ""},
		{CachedOptions{Claim: StaticClaim{ID: 1 << 20}}, ""},
		{CachedOptions{Claim: claim, PaddingFactor: 101}, "PaddingFactor"},
		{CachedOptions{Claim: claim, RingSeconds: 1 << 25}, "RingSeconds"},
		{CachedOptions{Claim: claim, RingMemory: 8}, "RingMemory"},
		{CachedOptions{Claim: claim, TakeWait: -1}, "TakeWait"},
		{CachedOptions{Claim: claim, ScheduleInterval: -1}, "ScheduleInterval"},
		{CachedOptions{Claim: claim, LaneIdle: -1}, "LaneIdle"},
		{CachedOptions{Claim: claim, LaneIdle: 999 * time.Millisecond}, "LaneIdle"},
		{CachedOptions{Claim: claim, MaxAhead: 500 * time.Millisecond}, "MaxAhead"},
		{CachedOptions{Claim: claim, MaxLag: time.Millisecond}, "MaxLag"},
		{CachedOptions{Claim: claim, MaxLanes: -1}, "MaxLanes"},
		{CachedOptions{Claim: claim, Layout: Layout{TimeBits: 1}}, "TimeBits"},
	} {
		err := c.opts.Validate()
		var se *setting.Error
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%+v: Validate() = %v, want nil", c.opts, err)
		case c.field != "" && (!errors.As(err, &se) || se.Field != c.field):
			t.Errorf("%+v: Validate() = %v, want a *setting.Error naming %s", c.opts, err, c.field)
		}
		if g, err := NewCached(c.opts); err == nil {
			g.Close()
			t.Errorf("%+v: NewCached accepted it", c.opts)
		}
	}
	if err := (CachedOptions{Claim: claim}).Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
	if err := (CachedOptions{Claim: claim, MaxAhead: NoAheadBound, MaxLag: NoLagBound, LaneIdle: time.Second}).Validate(); err != nil {
		t.Errorf("no bounds, lanes idle after 1s: %v", err)
	}
}

type retiringClaim struct {
	StaticClaim
	retired []int64
}

func (c *retiringClaim) Retire(second int64) { c.retired = append(c.retired, second) }

func TestCachedCloseRetiresTheClaimAtTheLastFilledSecond(t *testing.T) {
	clock := newFakeClock(t0)
	claim := &retiringClaim{StaticClaim: StaticClaim{ID: 1}}
	g, err := NewCached(CachedOptions{Layout: smallLayout(), RingSeconds: 4, Claim: claim, Clock: clock, MaxAhead: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for range 300 {
		last = mustNext(t, g.Next)
	}
	g.Close()
	g.Close()
	// The ring was filled with t0..t0+3; IDs still in it may be taken after
	// Close, so the last filled second is what the claim must keep.
	if len(claim.retired) != 1 || claim.retired[0] != t0.Unix()+3 {
		t.Fatalf("retired at %v, want once at %d", claim.retired, t0.Unix()+3)
	}
	p := uidcoretest.MustParse(t, g.Layout().Parse, last)
	if p.Time.Unix() > claim.retired[0] {
		t.Errorf("an issued ID (second %d) is after the retired second", p.Time.Unix())
	}
}

func TestCachedDiscardsIDsThatLagTheClock(t *testing.T) {
	for _, bounded := range []bool{true, false} {
		clock := newFakeClock(t0)
		opts := CachedOptions{Layout: smallLayout(), RingSeconds: 4, Clock: clock, MaxAhead: 3 * time.Second}
		if !bounded {
			opts.MaxLag = NoLagBound
		}
		g := newTestCached(t, opts)
		for range 10 {
			mustNext(t, g.Next)
		}
		clock.Add(10 * time.Second) // an idle spell: what is in the ring is 10s old
		report, err := g.padNow(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		p := uidcoretest.MustParse(t, g.Layout().Parse, mustNext(t, g.Next))
		if !bounded {
			if report.Discarded != 0 || p.Time.Unix() != t0.Unix() {
				t.Errorf("without a lag bound: discarded %d, next ID of second %d", report.Discarded, p.Time.Unix())
			}
			continue
		}
		if report.Trigger != triggerForced || report.Discarded != 4*256-10 || g.State().Discarded != 4*256-10 {
			t.Errorf("report %+v, state %+v: want every lagging ID discarded", report, g.State())
		}
		if p.Time.Unix() != t0.Unix()+10 || p.Sequence != 0 {
			t.Errorf("after the idle spell: second %d seq %d, want %d seq 0", p.Time.Unix(), p.Sequence, t0.Unix()+10)
		}
	}
}

func TestCachedFreshnessRunsByItself(t *testing.T) {
	clock := newFakeClock(t0)
	obs := &recordingObserver{}
	// Start-up fills t0..t0+2 (the 2s ahead bound), 768 IDs, and nobody
	// takes them. The once-a-second look runs on real time but reads this
	// clock: once it has moved past MaxLag, padding must replace them by
	// itself, without a take or a forced round.
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), MaxLag: time.Second, Clock: clock, Observer: obs})
	if st := g.State(); st.Available != 3*256 || st.Discarded != 0 {
		t.Fatalf("after start-up: %+v, want 768 IDs and none discarded", st)
	}
	clock.Add(10 * time.Second)
	testwait.WaitFor(t, 10*time.Second, "a freshness round that refilled the ring", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		i := slices.Index(obs.events, "start:freshness")
		return i >= 0 && slices.Contains(obs.events[i:], "finish:padding")
	})
	// Every ID of the start-up round lagged by more than MaxLag: all were
	// discarded, none issued, and the next ID is the first of the clock's
	// second.
	if st := g.State(); st.Discarded != 3*256 {
		t.Errorf("discarded %d, want the 768 lagging IDs", st.Discarded)
	}
	p := uidcoretest.MustParse(t, g.Layout().Parse, mustNext(t, g.Next))
	if p.Time.Unix() != clock.Now().Unix() || p.Sequence != 0 {
		t.Errorf("first ID after the freshness round: second %d seq %d, want %d seq 0", p.Time.Unix(), p.Sequence, clock.Now().Unix())
	}
}

func TestCachedDiscardRacesTakersWithoutLoss(t *testing.T) {
	clock := newFakeClock(t0)
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 2, Clock: clock, MaxAhead: NoAheadBound})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	ids := make([][]uint64, 4)
	for w := range ids {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if id, err := g.Next(context.Background()); err == nil {
					ids[w] = append(ids[w], id)
				} else {
					runtime.Gosched()
				}
			}
		})
	}
	for range 300 {
		clock.Add(7 * time.Second)
		g.padNow(context.Background())
	}
	close(stop)
	wg.Wait()
	all := slices.Concat(ids...)
	st := g.State()
	if st.Discarded == 0 {
		t.Fatal("nothing was discarded")
	}
	// Every slot the cursor passed went to a taker or was discarded, once.
	assertUnique(t, all, int(st.Cursor-st.Discarded))
}

// Once the ring reaches the ahead bound, what it holds is all there is
// until the wall clock's next second: bulk takes leave the small takes'
// reserve whether or not a padding round has met the bound since the
// once-a-second reset. On a loaded machine that round ran late, bulk
// takes emptied the ring, and single IDs waited up to a second.
func TestCachedBulkTakesLeaveTheReserveAtTheAheadBound(t *testing.T) {
	clock := newFakeClock(t0) // frozen: the ring stays at the bound
	// A ring of 512 (boost 1, no lane store: one lane), 256 IDs a second.
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 2, Clock: clock, MaxAhead: time.Second})
	// The start-up round fills t0 and t0+1, up to the bound; within a
	// second (real time) the reset finds no round met it since.
	testwait.WaitFor(t, 5*time.Second, "the once-a-second reset of the bound flag", func() bool { return !g.throttled.Load() })
	st := g.State()
	if st.SecondsAhead != 1 || !st.Throttled || st.Available != 2*256 {
		t.Fatalf("at the bound: %+v, want 512 IDs up to t0+1, throttled", st)
	}
	// Bulk takes of 100 until they stop: what is left is the reserve.
	var ids []uint64
	for {
		bulk := make([]uint64, 100)
		n, err := g.TryNextN(bulk)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		ids = append(ids, bulk...)
	}
	small := make([]uint64, SmallTake)
	if n, err := g.TryNextN(small); n != SmallTake || err != nil {
		t.Fatalf("after %d IDs to bulk takes a small take got %d (%v), want %d from the reserve", len(ids), n, err, SmallTake)
	}
	assertUnique(t, append(ids, small...), len(ids)+SmallTake)
}

// IDs dropped for lagging the clock are not demand: a round that finds
// the ring empty because it discarded what was in it must not take that
// for takers outrunning the fill target and double it (the once-a-second
// estimate already leaves discards out, for the same reason).
func TestCachedDiscardIsNotDemand(t *testing.T) {
	clock := newFakeClock(t0)
	obs := &recordingObserver{}
	// A ring of 1,024; start-up fills it (t0..t0+3).
	g := newTestCached(t, CachedOptions{Layout: smallLayout(), RingSeconds: 4, Clock: clock, MaxAhead: NoAheadBound, Observer: obs})
	// The once-a-second look sets the target to what one lane gives in a
	// second, 256: nothing was taken.
	testwait.WaitFor(t, 5*time.Second, "the fill target set from the last second", func() bool { return g.State().Target == 256 })
	clock.Add(10 * time.Second) // everything in the ring now lags
	if _, err := g.padNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The round that discarded (this one, or a freshness round just before
	// it) refills the target, and the target stays.
	obs.mu.Lock()
	defer obs.mu.Unlock()
	var discarding []PaddingReport
	for _, r := range obs.reports {
		if r.Discarded > 0 {
			discarding = append(discarding, r)
		}
	}
	if len(discarding) != 1 || discarding[0].Discarded != 1024 || discarding[0].Added != 256 {
		t.Errorf("rounds that discarded: %+v, want one that discarded 1024 IDs and added the target, 256", discarding)
	}
	if st := g.State(); st.Target != 256 {
		t.Errorf("target %d after discarding idle IDs, want 256", st.Target)
	}
}

// forEachWord (takers, discards) and writeSlots (padding) walk the
// can-take bitmap by wordRun: every slot of a run, wrapping at the ring's
// end, exactly once, and no other.
func TestWordRunsCoverTheSlotsOnce(t *testing.T) {
	for _, size := range []uint64{64, 128, 512} {
		for start := range size {
			for n := uint64(1); n <= size; n++ {
				seen := make([]uint64, size/64)
				forEachWord(start, n, size, func(w int, bits uint64) {
					if seen[w]&bits != 0 {
						t.Fatalf("size %d, %d slots from %d: word %d twice", size, n, start, w)
					}
					seen[w] |= bits
				})
				for i := range size {
					in := (i+size-start)%size < n
					if got := seen[i>>6]>>(i&63)&1 == 1; got != in {
						t.Fatalf("size %d, %d slots from %d: slot %d covered %v, want %v", size, n, start, i, got, in)
					}
				}
			}
		}
	}
}
