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
	ctx := ctxFor(t, 20*time.Second)
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
	cfg := Config()
	cfg.CheckInterval = 50 * time.Millisecond
	const name = "orders"
	declare(t, st.New(t, st.Addr), name, 1)
	d := newDrawers(name)
	var survivors []*sequence.Allocator
	for range 2 {
		a, err := sequence.NewAllocator(st.New(t, st.Addr), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Abandon()
		survivors = append(survivors, a)
		d.start(a)
	}
	// Each survivor must hold a high-water mark before the loss: one given
	// nothing yet is not a survivor but a newcomer with no settle period
	// (cfg.Settle is 0), and under load its first take came after the loss
	// and got numbers the other survivor had handed out ([1, 471) again).
	testwait.WaitFor(t, 30*time.Second, "numbers from several segments of every survivor", func() bool {
		return d.count() > 500 && issued(survivors[0], name) > 0 && issued(survivors[1], name) > 0
	})
	st.SetCounter(t, name, 1) // the store forgot every segment
	late := cfg
	late.Settle = 2 * time.Second // 40 check intervals of the survivors
	newcomer, err := sequence.NewAllocator(st.New(t, st.Addr), late)
	if err != nil {
		t.Fatal(err)
	}
	defer newcomer.Abandon()
	d.start(newcomer)
	before := d.count()
	testwait.WaitFor(t, 60*time.Second, "numbers from the newcomer and the survivors after the loss", func() bool {
		return d.count() > before+1000 && issued(newcomer, name) > 0
	})
	numbers := d.finish(t)
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
	cfg := Config()
	cfg.CheckInterval = 50 * time.Millisecond
	const name = "orders"
	declare(t, st.New(t, st.Addr), name, 1)
	d := newDrawers(name)
	open := func() *sequence.Allocator {
		a, err := sequence.NewAllocator(st.New(t, st.Addr), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Abandon)
		return a
	}
	d.start(open())
	d.start(open())
	idle := open()
	testwait.WaitFor(t, 30*time.Second, "numbers from several segments", func() bool { return d.count() > 500 })
	st.Forget(t, name, 1)
	d.start(idle)
	newcomer := open()
	d.start(newcomer)
	before := d.count()
	testwait.WaitFor(t, 60*time.Second, "numbers from every instance after the loss", func() bool {
		return d.count() > before+1000 && issued(idle, name) > 0 && issued(newcomer, name) > 0
	})
	numbers := d.finish(t)
	if idle.EpochChanges() == 0 {
		t.Error("the instance that took nothing before the loss did not see the epoch change")
	}
	t.Logf("%d numbers, 0 duplicates; epoch changes seen: %d by the idle survivor, %d by the newcomer", numbers, idle.EpochChanges(), newcomer.EpochChanges())
}

// drawers hand out one name's numbers from allocators, three goroutines
// an allocator, each filling batches of 3 until finish, and count how
// often each number came.
type drawers struct {
	name string
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	seen map[uint64]int
}

func newDrawers(name string) *drawers {
	return &drawers{name: name, stop: make(chan struct{}), seen: map[uint64]int{}}
}

// start runs three goroutines drawing from a.
func (d *drawers) start(a *sequence.Allocator) {
	for range 3 {
		d.wg.Add(1)
		go d.draw(a)
	}
}

func (d *drawers) draw(a *sequence.Allocator) {
	defer d.wg.Done()
	for {
		select {
		case <-d.stop:
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

// count is how many distinct numbers came so far.
func (d *drawers) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.seen)
}

// finish stops every goroutine, fails t if a number came twice, and
// returns how many numbers came.
func (d *drawers) finish(t *testing.T) int {
	t.Helper()
	close(d.stop)
	d.wg.Wait()
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

// issued is how many numbers of name a has handed out.
func issued(a *sequence.Allocator, name string) uint64 {
	for _, s := range a.Stats() {
		if s.Name == name {
			return s.Issued
		}
	}
	return 0
}
