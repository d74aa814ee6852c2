package sequencetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/sequence"
)

// testTakeAboveFloor: a take never starts below its floor, and says by
// how much the store's counter was below it; a take of 0 numbers raises
// the counter to the floor and never lowers it.
func testTakeAboveFloor(t *testing.T, st Store) {
	if st.SetCounter == nil {
		t.Skip("the store cannot be put back")
	}
	s := st.New(t, st.Addr)
	declare(t, s, "orders", 1)
	ctx := ctxFor(t)
	take := func(step, floor uint64) sequence.Segment {
		t.Helper()
		seg, err := s.Take(ctx, "orders", step, floor)
		if err != nil {
			t.Fatalf("Take(%d, floor %d): %v", step, floor, err)
		}
		return seg
	}
	if seg := take(10, 0); seg != (sequence.Segment{From: 1, To: 11}) {
		t.Fatalf("first take %+v, want [1, 11)", seg)
	}
	st.SetCounter(t, "orders", 1) // the store forgot it
	if seg := take(10, 11); seg != (sequence.Segment{From: 11, To: 21, Behind: 10}) {
		t.Fatalf("take above the floor %+v, want [11, 21) 10 behind", seg)
	}
	if seg := take(10, 0); seg != (sequence.Segment{From: 21, To: 31}) {
		t.Fatalf("take after the raise %+v, want [21, 31)", seg)
	}
	if seg := take(0, 31); seg != (sequence.Segment{From: 31, To: 31}) {
		t.Fatalf("check at the counter %+v, want nothing behind", seg)
	}
	if seg := take(0, 5); seg.Behind != 0 {
		t.Fatalf("a check below the counter %+v lowered it", seg)
	}
	if seg := take(0, 40); seg != (sequence.Segment{From: 40, To: 40, Behind: 9}) {
		t.Fatalf("raise to 40 %+v, want 9 behind", seg)
	}
	if seg := take(10, 0); seg != (sequence.Segment{From: 40, To: 50}) {
		t.Fatalf("take after raising to 40: %+v, want [40, 50)", seg)
	}
}

// testForgottenSegments: two instances hand out numbers from many
// goroutines while the store forgets every segment it gave them (its
// counter put back to where it started); a third instance starts right
// after. The survivors' takes and checks raise the counter past what they
// were given, the newcomer waits its settle period, and no number is
// handed out twice.
func testForgottenSegments(t *testing.T, st Store) {
	if st.SetCounter == nil {
		t.Skip("the store cannot be put back")
	}
	const name = "orders"
	d, open := lossInstances(t, st, name)
	// A survivor that finds the loss holds its takes for its settle
	// period (without one, three check intervals: 150 ms) while the other
	// survivor's check raises the counter past its own numbers: on a
	// loaded machine that check came later than 150 ms, and the first
	// survivor took the other's forgotten segment (make test: 80 numbers
	// twice). 2 s, the newcomer's, is 40 check intervals.
	survivors := []*sequence.Allocator{open(2 * time.Second), open(2 * time.Second)}
	for _, a := range survivors {
		d.Start(a)
	}
	// Each survivor must hold a high-water mark before the loss: one given
	// nothing yet is not a survivor but a newcomer, whose first take came
	// after the loss and got numbers the other survivor had handed out
	// ([1, 471) again, when the survivors had no settle period).
	testwait.WaitFor(t, 30*time.Second, "numbers from several segments of every survivor", func() bool {
		return d.Count() > 500 && Issued(survivors[0], name) > 0 && Issued(survivors[1], name) > 0
	})
	st.SetCounter(t, name, 1)         // the store forgot every segment
	newcomer := open(2 * time.Second) // 40 check intervals of the survivors
	d.Start(newcomer)
	before := d.Count()
	testwait.WaitFor(t, 60*time.Second, "numbers from the newcomer and the survivors after the loss", func() bool {
		return d.Count() > before+1000 && Issued(newcomer, name) > 0
	})
	numbers := d.Finish(t)
	regressions := survivors[0].Regressions() + survivors[1].Regressions()
	if regressions == 0 {
		t.Error("no regression counted: the test did not reach the loss")
	}
	if newcomer.Regressions() != 0 {
		t.Errorf("the newcomer counted %d regressions: it was given nothing before the loss", newcomer.Regressions())
	}
	t.Logf("%d numbers, 0 duplicates; %d regressions found by the survivors", numbers, regressions)
}

// testSilentLoss: two instances hand out numbers; a third, running since
// before the loss, has taken nothing yet. The store forgets every segment
// without any request failing (Store.Forget: only the store's epoch
// tells), the third starts drawing at once and a fourth starts right
// after. The third's first take may be the others' forgotten numbers: it
// hands none of it out and settles (D7); the fourth settles at start (the
// epoch is young); the survivors' checks raise the counter meanwhile. No
// number is handed out twice.
func testSilentLoss(t *testing.T, st Store) {
	if st.Forget == nil {
		t.Skip("the store cannot forget silently")
	}
	const name = "orders"
	d, open := lossInstances(t, st, name)
	// Every instance settles 2 s (40 check intervals) when it finds the
	// loss, as in ForgottenSegments: three check intervals (150 ms, with
	// no settle period) were less than a loaded machine can delay the
	// survivors' checks that raise the counter meanwhile.
	const settle = 2 * time.Second
	d.Start(open(settle))
	d.Start(open(settle))
	idle := open(settle)
	testwait.WaitFor(t, 30*time.Second, "numbers from several segments", func() bool { return d.Count() > 500 })
	st.Forget(t, name, 1)
	d.Start(idle)
	newcomer := open(settle)
	d.Start(newcomer)
	before := d.Count()
	testwait.WaitFor(t, 60*time.Second, "numbers from every instance after the loss", func() bool {
		return d.Count() > before+1000 && Issued(idle, name) > 0 && Issued(newcomer, name) > 0
	})
	numbers := d.Finish(t)
	if idle.EpochChanges() == 0 {
		t.Error("the instance that took nothing before the loss did not see the epoch change")
	}
	t.Logf("%d numbers, 0 duplicates; epoch changes seen: %d by the idle survivor, %d by the newcomer", numbers, idle.EpochChanges(), newcomer.EpochChanges())
}

// lossInstances declares name on st, starting at 1, and gives drawers of
// it and an opener of allocators on st with the suite's configuration,
// checks every 50 ms and the settle period given, abandoned when the test
// ends.
func lossInstances(t *testing.T, st Store, name string) (*Drawers, func(settle time.Duration) *sequence.Allocator) {
	t.Helper()
	declare(t, st.New(t, st.Addr), name, 1)
	open := func(settle time.Duration) *sequence.Allocator {
		t.Helper()
		cfg := Config()
		cfg.CheckInterval = 50 * time.Millisecond
		cfg.Settle = settle
		a, err := sequence.NewAllocator(st.New(t, st.Addr), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Abandon)
		return a
	}
	return NewDrawers(t, name), open
}

// Drawers hand out one sequence's numbers from allocators, three
// goroutines an allocator, each filling batches of 3 until stopped, and
// count how often each number came: a test of many instances under a
// fault checks with them that no number came twice.
type Drawers struct {
	name    string
	stop    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
	mu      sync.Mutex
	seen    map[uint64]int
}

// NewDrawers gives drawers of the sequence name, stopped when the test
// ends at the latest.
func NewDrawers(t testing.TB, name string) *Drawers {
	d := &Drawers{name: name, stop: make(chan struct{}), seen: map[uint64]int{}}
	t.Cleanup(d.Stop)
	return d
}

// Start runs three goroutines drawing from a until Stop, or until the
// function it returns is called: that one stops these three only (a fill
// under way completes), and returns at once.
func (d *Drawers) Start(a *sequence.Allocator) (stop func()) {
	own := make(chan struct{})
	for range 3 {
		d.wg.Add(1)
		go d.draw(a, own)
	}
	var once sync.Once
	return func() { once.Do(func() { close(own) }) }
}

func (d *Drawers) draw(a *sequence.Allocator, own <-chan struct{}) {
	defer d.wg.Done()
	for {
		select {
		case <-d.stop:
			return
		case <-own:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var batch [3]uint64
		err := a.Fill(ctx, d.name, batch[:])
		cancel()
		if err != nil {
			continue
		}
		d.mu.Lock()
		for _, n := range batch {
			d.seen[n]++
		}
		d.mu.Unlock()
	}
}

// Count is how many distinct numbers came so far.
func (d *Drawers) Count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.seen)
}

// Stop stops every goroutine and waits for them.
func (d *Drawers) Stop() {
	d.stopped.Do(func() { close(d.stop) })
	d.wg.Wait()
}

// Finish stops every goroutine, fails t if a number came twice, and
// returns how many numbers came.
func (d *Drawers) Finish(t testing.TB) int {
	t.Helper()
	d.Stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	dups := 0
	for _, c := range d.seen {
		if c > 1 {
			dups++
		}
	}
	if dups > 0 {
		t.Fatalf("%d of %d numbers handed out twice", dups, len(d.seen))
	}
	return len(d.seen)
}

// Issued is how many numbers of name a has handed out.
func Issued(a *sequence.Allocator, name string) uint64 {
	for _, s := range a.Stats() {
		if s.Name == name {
			return s.Issued
		}
	}
	return 0
}
