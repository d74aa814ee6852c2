// Package sequencetest holds what the tests of every sequence store
// share: the conformance suite (Run), which drives a store directly and
// through sequence.Allocator, and MemStore, the reference store.
package sequencetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/faultproxy"
	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/sequence"
)

// Store is a fresh, empty sequence store under test.
type Store struct {
	// Addr is the host:port of the server the store lives on; the suite
	// puts a faultproxy.Proxy in front of it to cut it. Empty: no server
	// (MemStore), the outage test is skipped.
	Addr string
	// New opens the store through the server at addr (Addr or a proxy's);
	// each call is a new client, as another instance would have. It is
	// closed when the test ends; call it from the test's goroutine.
	New func(t testing.TB, addr string) sequence.SegmentStore
	// SetCounter puts name's counter back to v behind every allocator's
	// back: what a store that forgot allocations (a power loss, a
	// failover) looks like. Nil: the loss tests skip.
	SetCounter func(t testing.TB, name string, v uint64)
	// Forget puts name's counter back to v as a loss that no request
	// sees (the connections stay up) and that the store's epoch tells
	// (sequence.LossWatcher). Nil: the silent-loss test skips.
	Forget func(t testing.TB, name string, v uint64)
}

// Config is the allocator configuration of the suite: small steps, so
// that a test crosses many segments, doubling on every take. A take is
// not cut short: on a loaded machine one took more than 2 s (make test
// on CI's two cores, the machine's nats-server shared by every package:
// ThreeInstances' Fill failed ErrUnavailable on a healthy store). A test
// that wants a take to fail sets cutFetchTimeout.
func Config() sequence.Config {
	return sequence.Config{MinStep: 10, MaxStep: 80, Target: time.Hour, FetchTimeout: time.Minute,
		RetryPause: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// cutFetchTimeout bounds a take on a store that is cut off (a NATS client
// buffers its request through the outage): the test expects it to fail.
const cutFetchTimeout = 2 * time.Second

// Run runs the suite; newStore gives each test a fresh store. The tests
// run in parallel.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	for name, test := range map[string]func(*testing.T, Store){
		"FiftyConcurrentTakers":   testConcurrentTakers,
		"GiveBackRaces":           testGiveBackRaces,
		"DeclareAndList":          testDeclareAndList,
		"RestartContinues":        testRestartContinues,
		"ThreeInstances":          testThreeInstances,
		"KillLosesAtMostHeld":     testKillLosesAtMostHeld,
		"StoreCut":                testStoreCut,
		"UnknownSequence":         testUnknownSequence,
		"BatchLargerThanMaxStep":  testBatchLargerThanMaxStep,
		"StepDoublesUpToTheLimit": testStepDoubles,
		"TakeAboveFloor":          testTakeAboveFloor,
		"ForgottenSegments":       testForgottenSegments,
		"SilentLoss":              testSilentLoss,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, newStore(t))
		})
	}
}

// ctxFor is the context of a call on the store or an allocator: bounded
// by the test binary's timeout, not by a deadline of its own that a
// loaded machine could overrun.
func ctxFor(t testing.TB) context.Context { return testwait.Context(t) }

func declare(t testing.TB, s sequence.SegmentStore, name string, first uint64) {
	t.Helper()
	if _, err := s.Declare(ctxFor(t), name, first); err != nil {
		t.Fatalf("Declare %s: %v", name, err)
	}
}

func take(t testing.TB, s sequence.SegmentStore, name string, step uint64) sequence.Segment {
	t.Helper()
	seg, err := s.Take(ctxFor(t), name, step, 0)
	if err != nil {
		t.Fatalf("Take %s %d: %v", name, step, err)
	}
	if seg.Len() != step {
		t.Fatalf("Take %s %d gave %s", name, step, seg)
	}
	return seg
}

// NewAllocator is an allocator with cfg on s, abandoned (not closed)
// when the test ends unless the test closed it.
func NewAllocator(t testing.TB, s sequence.SegmentStore, cfg sequence.Config) *sequence.Allocator {
	t.Helper()
	a, err := sequence.NewAllocator(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Abandon)
	return a
}

// NextN takes count numbers of name from a, one Next at a time, and fails
// t on an error.
func NextN(ctx context.Context, t testing.TB, a *sequence.Allocator, name string, count int) []uint64 {
	t.Helper()
	nums := make([]uint64, 0, count)
	for range count {
		n, err := a.Next(ctx, name)
		if err != nil {
			t.Fatalf("Next(%s) after %d numbers: %v", name, len(nums), err)
		}
		nums = append(nums, n)
	}
	return nums
}

// CheckDisjoint fails the test when two segments overlap.
func CheckDisjoint(t testing.TB, segs []sequence.Segment) {
	t.Helper()
	slices.SortFunc(segs, func(a, b sequence.Segment) int { return cmp.Compare(a.From, b.From) })
	for i := 1; i < len(segs); i++ {
		if segs[i].From < segs[i-1].To {
			t.Fatalf("segments %s and %s overlap", segs[i-1], segs[i])
		}
	}
}

// CheckUnique fails the test when a number appears twice in all.
func CheckUnique(t testing.TB, all ...[]uint64) int {
	t.Helper()
	seen := map[uint64]int{}
	for who, nums := range all {
		for _, n := range nums {
			if prev, dup := seen[n]; dup {
				t.Fatalf("number %d handed out twice (by %d and %d)", n, prev, who)
			}
			seen[n] = who
		}
	}
	return len(seen)
}

// CheckIncreasing fails the test unless nums strictly increase.
func CheckIncreasing(t testing.TB, who string, nums []uint64) {
	t.Helper()
	for i := 1; i < len(nums); i++ {
		if nums[i] <= nums[i-1] {
			t.Fatalf("%s: number %d came after %d", who, nums[i], nums[i-1])
		}
	}
}

// testConcurrentTakers: 50 clients (each its own connection) taking
// segments of varied size at once never get overlapping segments, and
// together they cover the range from the first number without a hole.
func testConcurrentTakers(t *testing.T, st Store) {
	const takers, each = 50, 8
	stores := make([]sequence.SegmentStore, takers)
	for i := range stores {
		stores[i] = st.New(t, st.Addr)
	}
	declare(t, stores[0], "orders", 100)
	var mu sync.Mutex
	var segs []sequence.Segment
	var wg sync.WaitGroup
	errs := make(chan error, takers)
	for i, s := range stores {
		wg.Go(func() {
			for j := range each {
				step := uint64(1 + (i*7+j)%13)
				seg, err := s.Take(context.Background(), "orders", step, 0)
				if err == nil && seg.Len() != step {
					err = fmt.Errorf("asked for %d, got %s", step, seg)
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				segs = append(segs, seg)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	CheckDisjoint(t, segs)
	if segs[0].From != 100 {
		t.Errorf("first segment %s, want it to start at the declared 100", segs[0])
	}
	for i := 1; i < len(segs); i++ {
		if segs[i].From != segs[i-1].To {
			t.Fatalf("hole between %s and %s", segs[i-1], segs[i])
		}
	}
}

// testGiveBackRaces: a give-back is refused once a later segment was
// taken (by anyone); when it succeeds the next take continues from its
// start. Racing take-and-give-back cycles keep what they keep disjoint.
func testGiveBackRaces(t *testing.T, st Store) {
	s := st.New(t, st.Addr)
	declare(t, s, "invoices", 0)
	a := take(t, s, "invoices", 10)
	b := take(t, s, "invoices", 10)
	ctx := ctxFor(t)
	if ok, err := s.GiveBack(ctx, "invoices", sequence.Segment{From: a.From + 3, To: a.To}); err != nil || ok {
		t.Fatalf("give back of %s after %s was taken: ok %v, err %v; want refused", a, b, ok, err)
	}
	if ok, err := s.GiveBack(ctx, "invoices", sequence.Segment{From: b.From + 4, To: b.To}); err != nil || !ok {
		t.Fatalf("give back of the rest of the last segment %s: ok %v, err %v", b, ok, err)
	}
	if c := take(t, s, "invoices", 5); c.From != b.From+4 {
		t.Fatalf("take after the give-back gave %s, want it to start at %d", c, b.From+4)
	}
	if ok, _ := s.GiveBack(ctx, "nosuch", b); ok {
		t.Fatal("give back to an undeclared sequence succeeded")
	}

	// Racing: each worker takes, uses part, tries to give the rest back.
	const workers, rounds = 10, 10
	stores := make([]sequence.SegmentStore, workers)
	for i := range stores {
		stores[i] = st.New(t, st.Addr)
	}
	var mu sync.Mutex
	var kept []sequence.Segment
	var gaveBack int
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i, s := range stores {
		wg.Go(func() {
			for j := range rounds {
				seg, err := s.Take(context.Background(), "invoices", 10, 0)
				if err != nil {
					errs <- err
					return
				}
				used := sequence.Segment{From: seg.From, To: seg.From + uint64(1+(i+j)%9)}
				ok, err := s.GiveBack(context.Background(), "invoices", sequence.Segment{From: used.To, To: seg.To})
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					used = seg // refused: the whole segment stays taken
				}
				mu.Lock()
				kept = append(kept, used)
				if ok {
					gaveBack++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	CheckDisjoint(t, kept)
	if gaveBack == 0 {
		t.Error("no give-back succeeded in 100 rounds: the test checked nothing")
	}
	t.Logf("%d of %d give-backs succeeded", gaveBack, workers*rounds)
}

// testDeclareAndList: declaring twice keeps the numbers (the second first
// value is ignored), List names every sequence.
func testDeclareAndList(t *testing.T, st Store) {
	s := st.New(t, st.Addr)
	ctx := ctxFor(t)
	if created, err := s.Declare(ctx, "b-seq", 7); err != nil || !created {
		t.Fatalf("Declare: created %v, err %v", created, err)
	}
	declare(t, s, "a_seq", 1)
	seg := take(t, s, "b-seq", 3)
	if seg.From != 7 {
		t.Fatalf("first segment %s, want it to start at 7", seg)
	}
	if created, err := st.New(t, st.Addr).Declare(ctx, "b-seq", 1000); err != nil || created {
		t.Fatalf("second Declare: created %v, err %v", created, err)
	}
	if seg := take(t, s, "b-seq", 3); seg.From != 10 {
		t.Fatalf("after a second Declare the segment is %s, want it to continue at 10", seg)
	}
	names, err := s.List(ctx)
	if err != nil || !slices.Equal(names, []string{"a_seq", "b-seq"}) {
		t.Fatalf("List = %v, %v", names, err)
	}
	// An allocator declaring one more shows every sequence of the store.
	a := NewAllocator(t, st.New(t, st.Addr), Config())
	if err := a.Declare(ctx, []sequence.Declaration{{Name: "c", First: 0}}); err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, s := range a.Stats() {
		shown = append(shown, s.Name)
	}
	if !slices.Equal(shown, []string{"a_seq", "b-seq", "c"}) {
		t.Fatalf("stats list %v", shown)
	}
}

// testRestartContinues: an allocator closed gracefully gives the rest of
// its segments back, and the next instance continues with no gap.
func testRestartContinues(t *testing.T, st Store) {
	s := st.New(t, st.Addr)
	declare(t, s, "orders", 1)
	a := NewAllocator(t, s, Config())
	ctx := ctxFor(t)
	got := NextN(ctx, t, a, "orders", 137)
	if held := a.Stats()[0].Held; held == 0 {
		t.Fatal("allocator holds nothing before the restart: the test would check nothing")
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Next(ctx, "orders"); !errors.Is(err, sequence.ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	b := NewAllocator(t, st.New(t, st.Addr), Config())
	batch := make([]uint64, 50)
	if err := b.Fill(ctx, "orders", batch); err != nil {
		t.Fatal(err)
	}
	got = append(got, batch...)
	for i, n := range got {
		if n != uint64(1+i) {
			t.Fatalf("number %d is %d after a graceful restart, want %d (dense)", i, n, 1+i)
		}
	}
}

// testThreeInstances: three allocators (three clients) serving one name
// under concurrent load hand out no number twice, each strictly
// increasing; closed gracefully one after another, the last one's rest
// goes back and a new instance continues after the highest number.
func testThreeInstances(t *testing.T, st Store) {
	declare(t, st.New(t, st.Addr), "orders", 1)
	const instances, clients, requests = 3, 4, 60
	allocs := make([]*sequence.Allocator, instances)
	for i := range allocs {
		allocs[i] = NewAllocator(t, st.New(t, st.Addr), Config())
	}
	nums := make([][]uint64, instances*clients)
	var wg sync.WaitGroup
	errs := make(chan error, instances*clients)
	for i := range nums {
		a := allocs[i%instances]
		wg.Go(func() {
			for j := range requests {
				batch := make([]uint64, 1+j%7)
				if err := a.Fill(context.Background(), "orders", batch); err != nil {
					errs <- err
					return
				}
				nums[i] = append(nums[i], batch...)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, n := range nums {
		CheckIncreasing(t, fmt.Sprintf("instance %d client %d", i%instances, i/instances), n)
	}
	total := CheckUnique(t, nums...)
	var highest uint64
	for _, n := range nums {
		highest = max(highest, slices.Max(n))
	}
	for _, a := range allocs {
		if err := a.Close(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
	}
	next, err := NewAllocator(t, st.New(t, st.Addr), Config()).Next(ctxFor(t), "orders")
	if err != nil {
		t.Fatal(err)
	}
	if next <= highest {
		t.Fatalf("after the restart the next number is %d, not above the highest handed out, %d", next, highest)
	}
	t.Logf("%d numbers from 3 instances, highest %d (%.1f%% gap); after a restart: %d", total, highest, 100*float64(highest-uint64(total))/float64(highest), next)
}

// testKillLosesAtMostHeld: an instance that stops without giving back
// (kill -9) loses exactly the numbers it held, at most two segments.
func testKillLosesAtMostHeld(t *testing.T, st Store) {
	declare(t, st.New(t, st.Addr), "orders", 1)
	cfg := Config()
	a := NewAllocator(t, st.New(t, st.Addr), cfg)
	ctx := ctxFor(t)
	var last uint64
	for range 95 {
		n, err := a.Next(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		last = n
	}
	// The background take after 10% of a segment may still be in flight.
	testwait.WaitFor(t, 5*time.Second, "the next segment taken", func() bool { return a.Stats()[0].Held > a.Stats()[0].Left })
	held := a.Stats()[0].Held
	a.Abandon()
	next, err := NewAllocator(t, st.New(t, st.Addr), cfg).Next(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	lost := next - last - 1
	if lost != held || lost > 2*cfg.MaxStep {
		t.Fatalf("the kill lost %d numbers (next %d after %d); it held %d, at most %d", lost, next, last, held, 2*cfg.MaxStep)
	}
	t.Logf("kill lost %d numbers, the %d held", lost, held)
}

// testStoreCut: with the store cut, an instance serves the numbers it
// holds, then answers ErrUnavailable naming the store (never a made-up
// number) and reports it (Unserved); Probe fails while the cut lasts.
// Once the store is back Probe says when a take succeeds, and from then
// on the instance serves again, uniquely.
func testStoreCut(t *testing.T, st Store) {
	if st.Addr == "" {
		t.Skip("no server to cut")
	}
	declare(t, st.New(t, st.Addr), "orders", 1)
	proxy := faultproxy.NewProxy(t, st.Addr)
	cfg := Config()
	cfg.FetchTimeout = cutFetchTimeout
	a := NewAllocator(t, st.New(t, proxy.Addr()), cfg)
	ctx := ctxFor(t)
	got := NextN(ctx, t, a, "orders", 5)
	testwait.WaitFor(t, 5*time.Second, "the next segment taken", func() bool { return a.Stats()[0].Held > a.Stats()[0].Left })
	held := a.Stats()[0].Held
	proxy.Cut()
	for range held {
		n, err := a.Next(ctx, "orders")
		if err != nil {
			t.Fatalf("after %d of the %d numbers held, with the store cut: %v", len(got)-5, held, err)
		}
		got = append(got, n)
	}
	select {
	case err := <-a.Unserved():
		t.Fatalf("reported unserved while it served the numbers it held: %v", err)
	default:
	}
	_, err := a.Next(ctx, "orders")
	if !errors.Is(err, sequence.ErrUnavailable) {
		t.Fatalf("with the numbers held used up and the store cut: %v, want ErrUnavailable", err)
	}
	t.Logf("served %d held numbers through the cut, then: %v", held, err)
	select {
	case reported := <-a.Unserved():
		if !errors.Is(reported, sequence.ErrUnavailable) {
			t.Fatalf("reported %v, want ErrUnavailable", reported)
		}
	default:
		t.Fatal("a request answered ErrUnavailable with the store cut was not reported")
	}
	if _, err := a.Probe(ctx); err == nil {
		t.Fatal("Probe succeeded with the store cut")
	}
	// A made-up name during the outage is an error too, and leaves no
	// state behind.
	if _, err := a.Next(ctx, "madeup"); err == nil {
		t.Fatal("a made-up name was served with the store cut")
	}
	if n := len(a.Stats()); n != 1 {
		t.Fatalf("%d sequences in the stats after a made-up name, want 1", n)
	}
	proxy.Restore()
	// Probed, not asked: a request before Probe says 0 could still meet
	// the cut's error (RetryPause) or a settle period.
	testwait.WaitFor(t, 30*time.Second, "Probe to say a take succeeds now", func() bool {
		held, err := a.Probe(ctx)
		return err == nil && held == 0
	})
	for range 3 * cfg.MaxStep { // across segments: takes from the store
		n, err := a.Next(ctx, "orders")
		if err != nil {
			t.Fatalf("after Probe said a take succeeds, %d numbers in: %v", len(got), err)
		}
		got = append(got, n)
	}
	CheckIncreasing(t, "the instance", got)
	CheckUnique(t, got)
}

// testUnknownSequence: an undeclared name is an UnknownError at once,
// from the store and the allocator, not reported as the store failing
// (Unserved); once declared (elsewhere) it is served without a restart.
func testUnknownSequence(t *testing.T, st Store) {
	s := st.New(t, st.Addr)
	if _, err := s.Take(ctxFor(t), "nosuch", 10, 0); !errors.Is(err, sequence.ErrUnknownSequence) {
		t.Fatalf("Take of an undeclared name: %v", err)
	}
	a := NewAllocator(t, s, Config())
	ctx := ctxFor(t)
	for _, name := range []string{"nosuch", "bad name", "", "x.y"} {
		_, err := a.Next(ctx, name)
		var ue *sequence.UnknownError
		if !errors.As(err, &ue) || ue.Name != name || err.Error() != fmt.Sprintf("unknown sequence %q", name) {
			t.Fatalf("Next(%q) = %v, want unknown sequence %q", name, err, name)
		}
	}
	if n := len(a.Stats()); n != 0 {
		t.Errorf("unknown names left %d states behind", n)
	}
	select {
	case err := <-a.Unserved():
		t.Errorf("an unknown name was reported as the store failing: %v", err)
	default:
	}
	declare(t, st.New(t, st.Addr), "nosuch", 5)
	testwait.WaitFor(t, 5*time.Second, "a name declared elsewhere served", func() bool {
		n, err := a.Next(ctx, "nosuch")
		return err == nil && n == 5
	})
}

// testBatchLargerThanMaxStep: a batch larger than a segment is filled
// from several, increasing, without loss.
func testBatchLargerThanMaxStep(t *testing.T, st Store) {
	s := st.New(t, st.Addr)
	declare(t, s, "big", 0)
	cfg := Config()
	a := NewAllocator(t, s, cfg)
	batch := make([]uint64, 3*cfg.MaxStep+5)
	if err := a.Fill(ctxFor(t), "big", batch); err != nil {
		t.Fatal(err)
	}
	CheckIncreasing(t, "batch", batch)
	if batch[0] != 0 || batch[len(batch)-1] != uint64(len(batch)-1) {
		t.Fatalf("batch runs %d..%d, want 0..%d", batch[0], batch[len(batch)-1], len(batch)-1)
	}
}

// testStepDoubles: segments used up faster than the target double the
// step, up to MaxStep, and the stats say so.
func testStepDoubles(t *testing.T, st Store) {
	s := st.New(t, st.Addr)
	declare(t, s, "fast", 0)
	cfg := Config()
	a := NewAllocator(t, s, cfg)
	ctx := ctxFor(t)
	var issued uint64
	batch := make([]uint64, 5)
	for {
		if err := a.Fill(ctx, "fast", batch); err != nil {
			t.Fatal(err)
		}
		issued += uint64(len(batch))
		if a.Stats()[0].Step == cfg.MaxStep && issued >= 10*cfg.MaxStep {
			break
		}
		if issued > 100*cfg.MaxStep {
			t.Fatalf("step still %d after %d numbers", a.Stats()[0].Step, issued)
		}
	}
	stats := a.Stats()[0]
	if stats.Step != cfg.MaxStep || stats.Issued != issued {
		t.Fatalf("stats %+v after %d numbers, want step %d", stats, issued, cfg.MaxStep)
	}
	// Doubling from 10 to 80 takes 3 segments; the rest are 80 each.
	if most := 4 + issued/cfg.MaxStep + 1; stats.Segments > most {
		t.Fatalf("%d segments for %d numbers, want at most %d", stats.Segments, issued, most)
	}
}
