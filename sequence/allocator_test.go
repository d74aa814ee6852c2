package sequence_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/sequence/sequencetest"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestMemStore runs the conformance suite on the reference store: the
// allocator's own tests.
func TestMemStore(t *testing.T) {
	sequencetest.Run(t, func(t *testing.T) sequencetest.Store {
		m := sequencetest.NewMemStore()
		return sequencetest.Store{New: func(testing.TB, string) sequence.SegmentStore { return m },
			SetCounter: func(_ testing.TB, name string, v uint64) { m.SetCounter(name, v) },
			Forget:     func(_ testing.TB, name string, v uint64) { m.Forget(name, v) }}
	})
}

// TestStepHalvesWhenSegmentsLastLong: once a segment lasts more than
// twice the target, the next step halves (Leaf's rule), not below the
// min step; the doubling side is the suite's StepDoublesUpToTheLimit.
func TestStepHalvesWhenSegmentsLastLong(t *testing.T) {
	t.Parallel()
	store := sequencetest.NewMemStore()
	if _, err := store.Declare(context.Background(), "slow", 0); err != nil {
		t.Fatal(err)
	}
	cfg := sequencetest.Config()
	cfg.Target = time.Second
	a := sequencetest.NewAllocator(t, store, cfg)
	stats := func() sequence.Stats { return a.Stats()[0] }
	next := func() {
		t.Helper()
		if _, err := a.Next(context.Background(), "slow"); err != nil {
			t.Fatal(err)
		}
	}
	for next(); stats().Step < cfg.MaxStep; next() {
	}
	// Idle for three targets, not just over two: a fetch still in flight
	// when the loop ends (the double buffer's) starts its segment a little
	// after idle does, later still on a loaded machine, and that segment
	// must still have lasted more than twice the target.
	idle := time.Now()
	testenv.WaitFor(t, 10*time.Second, "three targets passed", func() bool { return time.Since(idle) > 3*cfg.Target })
	for taken := stats().Segments; stats().Segments == taken; next() {
	}
	if got := stats().Step; got != cfg.MaxStep/2 {
		t.Fatalf("step %d after a segment lasting more than twice the target, want %d", got, cfg.MaxStep/2)
	}
}

// TestTryFillNeverWaits: TryFill takes only numbers at hand, all or
// nothing, without asking the store; a name it cannot serve leaves no
// state behind; what it hands out continues what Fill handed out, with no
// number twice.
func TestTryFillNeverWaits(t *testing.T) {
	t.Parallel()
	store := sequencetest.NewMemStore()
	if _, err := store.Declare(context.Background(), "orders", 1); err != nil {
		t.Fatal(err)
	}
	a := sequencetest.NewAllocator(t, store, sequencetest.Config())
	one := make([]uint64, 1)
	if ok, err := a.TryFill("orders", one); ok || err != nil {
		t.Fatalf("TryFill before any segment: %v %v, want false and no error (nothing at hand)", ok, err)
	}
	if len(a.Stats()) != 0 {
		t.Fatalf("a TryFill with nothing at hand left state: %+v", a.Stats())
	}
	ctx := context.Background()
	first, err := a.Next(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	held := a.Stats()[0].Held
	got := []uint64{first}
	too := make([]uint64, held+1)
	if ok, err := a.TryFill("orders", too); ok || err != nil {
		t.Fatalf("TryFill of %d with %d held: %v %v, want false", len(too), held, ok, err)
	}
	if a.Stats()[0].Held != held {
		t.Fatalf("a refused TryFill took numbers: held %d, was %d", a.Stats()[0].Held, held)
	}
	rest := make([]uint64, held)
	if ok, err := a.TryFill("orders", rest); !ok || err != nil {
		t.Fatalf("TryFill of the %d held: %v %v", held, ok, err)
	}
	got = append(got, rest...)
	sequencetest.CheckIncreasing(t, "one allocator", got)
	if sequencetest.CheckUnique(t, got) != len(got) {
		t.Fatalf("a number twice in %v", got)
	}
	if ok, err := a.TryFill("nosuch", one); ok || err != nil {
		t.Fatalf("TryFill of an undeclared name: %v %v, want false (the store is asked only by Fill)", ok, err)
	}
}

// TestRedeclaredFirstNumberWarns: declaring a first number for a
// sequence the store already holds changes nothing and says so, as a
// warning naming the sequence; the first declaration, and re-declaring
// without a first number, do not warn.
func TestRedeclaredFirstNumberWarns(t *testing.T) {
	ctx := context.Background()
	store := sequencetest.NewMemStore()
	var logs testenv.LogBuffer
	cfg := sequencetest.Config()
	cfg.Logger = logs.Logger(slog.LevelInfo)
	a := sequencetest.NewAllocator(t, store, cfg)
	if err := a.Declare(ctx, []sequence.Declaration{{Name: "orders", First: 1000}}); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Next(ctx, "orders"); err != nil || n != 1000 {
		t.Fatalf("first number %d, %v; want 1000", n, err)
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("the first declaration warned:\n%s", logs.String())
	}
	again := sequencetest.NewAllocator(t, store, cfg)
	if err := again.Declare(ctx, []sequence.Declaration{{Name: "orders", First: 5_000_000}, {Name: "orders2", First: 7}}); err != nil {
		t.Fatal(err)
	}
	if err := again.Declare(ctx, []sequence.Declaration{{Name: "orders", First: 1}}); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") {
			warnings = append(warnings, l)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "its stored numbers win") || !strings.Contains(warnings[0], "sequence=orders first=5000000") {
		t.Fatalf("warnings %q, want one that the stored orders wins over first=5000000", warnings)
	}
	if n, err := again.Next(ctx, "orders"); err != nil || n < 1000 || n >= 5_000_000 {
		t.Fatalf("after re-declaring: %d, %v; want the stored numbers to continue", n, err)
	}
}

// slowTakes is a store whose every Take first sleeps for delay: a store
// that answers late, as a loaded MySQL or a KV leader election does.
type slowTakes struct {
	sequence.SegmentStore
	delay time.Duration
}

func (s slowTakes) Take(ctx context.Context, name string, step, floor uint64) (sequence.Segment, error) {
	time.Sleep(s.delay)
	return s.SegmentStore.Take(ctx, name, step, floor)
}

// TestSegmentWaitsAreTimed: a request that waits for a segment adds its
// wait to the stats (in all and the longest), and one served from the
// numbers at hand adds nothing.
func TestSegmentWaitsAreTimed(t *testing.T) {
	t.Parallel()
	mem := sequencetest.NewMemStore()
	if _, err := mem.Declare(context.Background(), "orders", 1); err != nil {
		t.Fatal(err)
	}
	const delay = 40 * time.Millisecond
	a := sequencetest.NewAllocator(t, slowTakes{mem, delay}, sequencetest.Config())
	start := time.Now()
	first, err := a.Next(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	st := a.Stats()[0]
	if st.Waits != 1 || st.LongestWait < delay || st.LongestWait > took || st.WaitTime != st.LongestWait {
		t.Fatalf("after a first request that waited %v for a store taking %v: %+v", took, delay, st)
	}
	second, err := a.Next(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	if second <= first {
		t.Fatalf("numbers %d then %d", first, second)
	}
	if again := a.Stats()[0]; again.Waits != 1 || again.WaitTime != st.WaitTime || again.LongestWait != st.LongestWait {
		t.Fatalf("a request served from the numbers at hand changed the wait stats: %+v, was %+v", again, st)
	}
}

// outageStore fails every call while down.
type outageStore struct {
	*sequencetest.MemStore
	down atomic.Bool
}

var errDown = errors.New("store down")

func (s *outageStore) Take(ctx context.Context, name string, step, floor uint64) (sequence.Segment, error) {
	if s.down.Load() {
		return sequence.Segment{}, errDown
	}
	return s.MemStore.Take(ctx, name, step, floor)
}

// TestSurvivorSettlesAfterAnOutage (issue 31, the models' finding 2): the
// store goes down and comes back having forgotten A's segment; B, which
// lived through the outage holding nothing (so nothing of its own to
// repair), must not take the forgotten numbers before A's check raises
// the counter: after an outage every instance settles, not only a new
// one.
func TestSurvivorSettlesAfterAnOutage(t *testing.T) {
	store := &outageStore{MemStore: sequencetest.NewMemStore()}
	if _, err := store.Declare(context.Background(), "orders", 1); err != nil {
		t.Fatal(err)
	}
	cfg := sequencetest.Config()
	cfg.CheckInterval = 20 * time.Millisecond
	cfg.Settle = 2 * time.Second // 100 of A's checks
	newAlloc := func() *sequence.Allocator {
		a, err := sequence.NewAllocator(store, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Declare(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Abandon)
		return a
	}
	a, b := newAlloc(), newAlloc()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fromA := make([]uint64, 5)
	if err := a.Fill(ctx, "orders", fromA); err != nil {
		t.Fatal(err)
	}
	store.down.Store(true)
	testwait.WaitFor(t, 10*time.Second, "both instances to see the outage in their checks", func() bool {
		return slices.ContainsFunc(b.Stats(), func(s sequence.Stats) bool { return s.Name == "orders" }) && checkFails(b) && checkFails(a)
	})
	store.SetCounter("orders", 1) // the store comes back without A's segment
	store.down.Store(false)
	n, err := b.Next(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(fromA, n) {
		t.Fatalf("B handed out %d, which A had handed out before the loss (A's: %v)", n, fromA)
	}
	if a.Regressions() == 0 {
		t.Error("A counted no regression")
	}
}

// An undeclared name is unknown at once, not after the settle period:
// a new instance answers 404 for it, as a settled one does. And an
// allocator closed in its settle period (Abandon, at Cleanup) does not
// wait the period out for the fetch left waiting in it.
func TestUnknownNameIsNotHeldBySettle(t *testing.T) {
	store := sequencetest.NewMemStore()
	cfg := sequencetest.Config()
	cfg.Settle = time.Hour // no test waits this out
	a, err := sequence.NewAllocator(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Abandon)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.Next(ctx, "nosuch"); !errors.Is(err, sequence.ErrUnknownSequence) {
		t.Fatalf("an undeclared name during the settle period: %v, want ErrUnknownSequence", err)
	}
	if _, err := store.Declare(ctx, "orders", 1); err != nil {
		t.Fatal(err)
	}
	quick, cancelQuick := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelQuick()
	if n, err := a.Next(quick, "orders"); err == nil {
		t.Fatalf("a declared name was served (%d) before the settle period ended", n)
	}
}

// checkFails says whether a check of a's counters fails now.
func checkFails(a *sequence.Allocator) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return a.Check(ctx) != nil
}

// checkGatedStore holds an armed check (a take of 0 numbers) that found
// the counter behind, after the store raised the counter and before the
// allocator hears of it, until gate is closed; it counts the takes of
// numbers that reach the store meanwhile.
// checkGatedStore holds the armed check (a read: step 0) at gate when it
// finds the counter behind, or, with checkFails set, always, and then
// fails it with checkFails; it counts the takes that reach the store
// while the check is held, and times the first one after a failed check.
type checkGatedStore struct {
	*sequencetest.MemStore
	armed, holding atomic.Bool
	gate           chan struct{}
	takesBeside    atomic.Int32
	checkFails     error
	failedAt       atomic.Int64 // unix ns
	// firstTakeAfterFail is when the first take reached the store after
	// the failed check (unix ns).
	firstTakeAfterFail atomic.Int64
}

func (s *checkGatedStore) Take(ctx context.Context, name string, step, floor uint64) (sequence.Segment, error) {
	if step > 0 && s.holding.Load() {
		s.takesBeside.Add(1)
	}
	if step > 0 && s.failedAt.Load() != 0 {
		s.firstTakeAfterFail.CompareAndSwap(0, time.Now().UnixNano())
	}
	seg, err := s.MemStore.Take(ctx, name, step, floor)
	if step == 0 && err == nil && (seg.Behind > 0 || s.checkFails != nil) && s.armed.Swap(false) {
		s.holding.Store(true)
		<-s.gate
		s.holding.Store(false)
		if s.checkFails != nil {
			s.failedAt.Store(time.Now().UnixNano())
			return sequence.Segment{}, s.checkFails
		}
	}
	return seg, err
}

// TestTakeBesideACheckThatFoundALoss (make test, sequencetest's
// ForgottenSegments: 80 numbers twice): the store forgot the segments of
// this instance and of another one above them. A check finds the counter
// behind and raises it to this instance's high-water mark; a take whose
// floor is that mark, running beside the check, would then find nothing
// behind and take the other instance's forgotten numbers before the
// quarantine the check sets. It must not: the take waits for the check,
// then for the quarantine (three hours here), and hands out none of them.
func TestTakeBesideACheckThatFoundALoss(t *testing.T) {
	store := &checkGatedStore{MemStore: sequencetest.NewMemStore(), gate: make(chan struct{})}
	if _, err := store.Declare(context.Background(), "orders", 1); err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	cfg := sequencetest.Config()
	cfg.CheckInterval = time.Hour // checks only when called here; the quarantine outlasts the test
	cfg.Logger = logs.JSONLogger(slog.LevelDebug)
	ctx := testwait.Context(t)
	a, atHand := prefetched(ctx, t, store, cfg)
	other, err := store.Take(ctx, "orders", 80, 0) // another instance's, above this one's
	if err != nil {
		t.Fatal(err)
	}
	store.SetCounter("orders", 1) // the store forgets every segment
	store.armed.Store(true)
	checked := make(chan error, 1)
	go func() { checked <- a.Check(ctx) }()
	testwait.WaitFor(t, time.Second, "the check held once it raised the counter", store.holding.Load)
	filled := make(chan []uint64, 1)
	go func() {
		batch := make([]uint64, atHand+1) // one more than at hand: a take
		if err := a.Fill(ctx, "orders", batch); err != nil {
			batch = nil // closed while waiting out the quarantine
		}
		filled <- batch
	}()
	testwait.WaitFor(t, time.Second, "the take at the store, or waiting for the check", func() bool {
		return store.takesBeside.Load() > 0 || takeWaitsForTheStore()
	})
	close(store.gate)
	if err := testwait.Receive(t, time.Second, "the check's end", checked); err != nil {
		t.Fatal(err)
	}
	testwait.WaitFor(t, time.Second, "the quarantine after the regression", func() bool {
		return a.Regressions() > 0 && time.Now().Before(a.SettledAt())
	})
	a.Abandon() // ends the take waiting out the quarantine; the log is complete
	batch := testwait.Receive(t, time.Second, "the request's end", filled)
	if n := store.takesBeside.Load(); n > 0 {
		t.Errorf("%d takes reached the store while a check that found the counter behind had not told the allocator", n)
	}
	for _, n := range batch {
		if other.From <= n && n < other.To {
			t.Fatalf("handed out %d, of the other instance's forgotten segment %s (batch %v)", n, other, batch)
		}
	}
	for _, rec := range logs.Records(t) {
		if rec[event.Key] != event.SequenceSegment {
			continue
		}
		if first, last := uint64(rec[event.AttrFirst].(float64)), uint64(rec[event.AttrLast].(float64)); first < other.To && other.From <= last {
			t.Fatalf("took [%d, %d] for handing out, over the other instance's forgotten segment %s", first, last, other)
		}
	}
}

// prefetched is an allocator of store with cfg that has handed out the
// first number of "orders" and prefetched the segment after it, and how
// many numbers it holds at hand.
func prefetched(ctx context.Context, t *testing.T, store sequence.SegmentStore, cfg sequence.Config) (*sequence.Allocator, uint64) {
	t.Helper()
	a := sequencetest.NewAllocator(t, store, cfg)
	if _, err := a.Next(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	testwait.WaitFor(t, time.Second, "the segment prefetched after the first", func() bool { return a.Stats()[0].Segments == 2 })
	return a, a.Stats()[0].Held
}

// TestTakeBesideACheckThatMetAnOutage: a check meets a store outage (a
// failover, after which the new leader may lack what the old one
// acknowledged) while a take waits for it (storeMu). The take must wait
// the settle period, as a take after the outage does, before it reaches
// the store: the other instances' checks raise in that period what the
// store forgot above this instance's floor. (A loaded machine only makes
// the take later: it cannot fail this test.)
func TestTakeBesideACheckThatMetAnOutage(t *testing.T) {
	store := &checkGatedStore{MemStore: sequencetest.NewMemStore(), gate: make(chan struct{}),
		checkFails: errors.New("nats: no responders available for request")}
	if _, err := store.Declare(context.Background(), "orders", 1); err != nil {
		t.Fatal(err)
	}
	cfg := sequencetest.Config()
	cfg.CheckInterval = time.Hour // checks only when called here
	cfg.Settle = 300 * time.Millisecond
	ctx := testwait.Context(t)
	a, atHand := prefetched(ctx, t, store, cfg) // after the start's settle period
	store.armed.Store(true)
	checked := make(chan error, 1)
	go func() { checked <- a.Check(ctx) }()
	testwait.WaitFor(t, time.Second, "the check held at the store", store.holding.Load)
	filled := make(chan error, 1)
	go func() { filled <- a.Fill(ctx, "orders", make([]uint64, atHand+1)) }() // one more than at hand: a take
	testwait.WaitFor(t, time.Second, "the take waiting for the check", takeWaitsForTheStore)
	close(store.gate)
	if err := testwait.Receive(t, time.Second, "the check's end", checked); err == nil {
		t.Fatal("the check met the outage but returned no error")
	}
	if err := testwait.Receive(t, time.Second, "the request's end", filled); err != nil {
		t.Fatal(err)
	}
	failedAt, tookAt := store.failedAt.Load(), store.firstTakeAfterFail.Load()
	if tookAt == 0 {
		t.Fatal("the request was answered without a take after the failed check: the test proves nothing")
	}
	if held := time.Duration(tookAt - failedAt); held < cfg.Settle {
		t.Errorf("the take reached the store %s after the check met the outage, within the settle period %s", held, cfg.Settle)
	}
}

// takeWaitsForTheStore says whether a goroutine of a take waits for the
// store's lock of its name (behind a check), from the goroutines' stacks:
// a state no other signal shows.
func takeWaitsForTheStore() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "[sync.Mutex.Lock") && strings.Contains(g, "sequence.(*Allocator).takeOnce") {
			return true
		}
	}
	return false
}

// epochGatedStore holds the first epoch read after it is armed (the read
// that confirms a take's segment) until gate is closed.
type epochGatedStore struct {
	*sequencetest.MemStore
	armed, holding atomic.Bool
	gate           chan struct{}
}

func (s *epochGatedStore) Epoch(ctx context.Context) (sequence.Epoch, error) {
	e, err := s.MemStore.Epoch(ctx)
	if s.armed.Swap(false) {
		s.holding.Store(true)
		<-s.gate
	}
	return e, err
}

// TestCheckBetweenATakeAndItsRecord (make test, sequencetest's
// ForgottenSegments: 80 numbers twice): the store gives this instance a
// segment, then forgets it while the take reads the epoch to confirm it.
// A check meanwhile must raise the counter past that segment, not only to
// the high-water mark before it: otherwise another instance takes the
// segment's numbers, and this one hands them out too.
func TestCheckBetweenATakeAndItsRecord(t *testing.T) {
	store := &epochGatedStore{MemStore: sequencetest.NewMemStore(), gate: make(chan struct{})}
	if _, err := store.Declare(context.Background(), "orders", 1); err != nil {
		t.Fatal(err)
	}
	cfg := sequencetest.Config()
	cfg.CheckInterval = time.Hour // checks only when called here
	ctx := testwait.Context(t)
	a, atHand := prefetched(ctx, t, store, cfg)
	store.armed.Store(true)
	filled := make(chan []uint64, 1)
	go func() {
		batch := make([]uint64, atHand+1) // one more than at hand: a take
		if err := a.Fill(ctx, "orders", batch); err != nil {
			t.Error(err)
			batch = nil
		}
		filled <- batch
	}()
	testwait.WaitFor(t, time.Second, "the take confirming its segment", store.holding.Load)
	store.SetCounter("orders", 1) // the store forgets every segment, the one being confirmed too
	if err := a.Check(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := store.Take(ctx, "orders", 80, 0) // another instance's take after the check
	if err != nil {
		t.Fatal(err)
	}
	close(store.gate)
	batch := testwait.Receive(t, time.Second, "the request's numbers", filled)
	if len(batch) == 0 {
		t.Fatal("the request got no numbers")
	}
	for _, n := range batch {
		if other.From <= n && n < other.To {
			t.Fatalf("handed out %d, which the other instance took after the check, %s (batch %v)", n, other, batch)
		}
	}
}

// TestProbeKeepsTheSettleAfterAnOutage: a request the store failed is
// reported (Unserved) and Probe fails while the store is down; once it
// is back, Probe starts the settle period the outage calls for, as the
// next take would, and reports it as a hold, so that a caller that
// waits for Probe's 0 before sending requests again (the dispenser's
// sequence endpoints rejoining their queue group) brings none in before
// the settle. A request after Probe's 0 is served.
func TestProbeKeepsTheSettleAfterAnOutage(t *testing.T) {
	store := &outageStore{MemStore: sequencetest.NewMemStore()}
	if _, err := store.Declare(context.Background(), "orders", 1); err != nil {
		t.Fatal(err)
	}
	cfg := sequencetest.Config()
	cfg.CheckInterval = -1 // only Probe checks
	cfg.Settle = time.Second
	a := sequencetest.NewAllocator(t, store, cfg)
	if err := a.Declare(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	ctx := testwait.Context(t)
	first, err := a.Next(ctx, "orders") // after the start's settle period
	if err != nil {
		t.Fatal(err)
	}
	store.down.Store(true)
	more := make([]uint64, a.Stats()[0].Held+1)
	if err := a.Fill(ctx, "orders", more); !errors.Is(err, sequence.ErrUnavailable) {
		t.Fatalf("more than held with the store down: %v, want ErrUnavailable", err)
	}
	select {
	case reported := <-a.Unserved():
		if !errors.Is(reported, errDown) {
			t.Fatalf("reported %v, want the store's error", reported)
		}
	default:
		t.Fatal("the request the store failed was not reported")
	}
	if _, err := a.Probe(ctx); !errors.Is(err, errDown) {
		t.Fatalf("Probe with the store down: %v, want its error", err)
	}
	store.down.Store(false)
	back := time.Now()
	held, err := a.Probe(ctx)
	if err != nil || held <= 0 || a.SettledAt().Before(back.Add(cfg.Settle)) {
		t.Fatalf("Probe right after the outage: hold %v, %v, takes held until %s; want them held the settle period (%v) from %s",
			held, err, a.SettledAt().Format(time.StampMicro), cfg.Settle, back.Format(time.StampMicro))
	}
	testwait.WaitFor(t, 2*cfg.Settle, "Probe to say a take succeeds now", func() bool {
		held, err := a.Probe(ctx)
		return err == nil && held == 0
	})
	n, err := a.Next(ctx, "orders")
	if err != nil || n <= first {
		t.Fatalf("after Probe said 0: %d, %v (first %d)", n, err, first)
	}
}
