package uidclient

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// The take path the Prefetcher and the BlockSource share: IDs at hand
// are a chain of runs, handed out without a lock. A take is one atomic
// add on the current run plus a bounds check; moving to the next run is
// one compare-and-swap; only a taker that finds the chain empty waits.
// One producer (the owner's fetcher) appends runs at the tail.
//
// Why no ID is handed out twice:
//   - within a run, each add returns a distinct index, and only an index
//     below count yields an ID (first+index);
//   - a run is linked into the chain once, by its single producer, and
//     never again (successor is set once, on the tail only);
//   - cur only moves forward along successor links (a CAS from a run to
//     its own successor), and a run once left is never current again, so
//     two takers can only share a run, never split one differently;
//   - runs come from the service (or a block) disjoint, so distinct
//     (run, index) pairs are distinct IDs.

// idRange is a run of IDs: the taker whose add on taken returns n <
// count owns first+n, so no two takers get the same ID; adds past count
// are wasted. successor is the run queued after it, set once by the
// producer.
type idRange struct {
	first, count uint64
	wakeAt       uint64 // the take index that wakes the producer
	startsPush   bool   // the first run of a push (a refill, a block)
	taken        atomic.Uint64
	successor    atomic.Pointer[idRange]
}

func (r *idRange) remaining() uint64 {
	n := r.taken.Load()
	if n >= r.count {
		return 0
	}
	return r.count - n
}

// closedRange is the current run of a closed chain: every take misses
// and it has no successor, ever.
var closedRange = &idRange{}

// errChainClosed is what a take on a closed chain returns; the owners
// name it their own way.
var errChainClosed = errors.New("uidclient: closed")

// chainState is what a waiting taker reads: whether the chain is closed,
// the last refill's error, and a channel closed when the state changes
// (runs were appended, a refill ended, or the chain was closed).
type chainState struct {
	changed chan struct{}
	lastErr error // the last refill's, nil after a successful one
	fatal   bool  // lastErr will not go away by waiting (a 400)
	closed  bool
}

// rangeChain is the chain of runs at hand. The zero value is not
// usable; init it.
type rangeChain struct {
	cur   atomic.Pointer[idRange] // the run takers take from
	state atomic.Pointer[chainState]
	wake  chan struct{} // wakes the producer (capacity 1)
	tail  *idRange      // the producer's alone
	waits atomic.Uint64 // takes that found the chain empty and waited
}

// init readies the chain; takers wake the producer on wake (capacity
// 1).
func (c *rangeChain) init(wake chan struct{}) {
	c.tail = &idRange{}
	c.cur.Store(c.tail)
	c.state.Store(&chainState{changed: make(chan struct{})})
	c.wake = wake
}

// take is the hot path: an ID of the current run, or false when it is
// used up (then call next).
func (c *rangeChain) take() (uint64, bool) {
	r := c.cur.Load()
	n := r.taken.Add(1) - 1
	if n >= r.count {
		return 0, false
	}
	if n == r.wakeAt {
		c.wakeProducer()
	}
	return r.first + n, true
}

// next takes one ID, moving along the chain and waiting (within ctx) for
// the producer as needed. Its errors: errChainClosed, a fatal refill
// error, or ctx's error wrapped with the last refill's.
func (c *rangeChain) next(ctx context.Context) (uint64, error) {
	var id [1]uint64
	if _, err := c.nextN(ctx, id[:]); err != nil {
		return 0, err
	}
	return id[0], nil
}

// nextN fills dst, reserving len(dst) IDs of the current run with one
// add and spanning runs as needed; with an error it returns how many IDs
// it did put in dst.
func (c *rangeChain) nextN(ctx context.Context, dst []uint64) (int, error) {
	filled := 0
	for filled < len(dst) {
		r := c.cur.Load()
		filled += c.takeFrom(r, dst[filled:])
		if filled == len(dst) {
			break
		}
		if err := c.advance(ctx, r); err != nil {
			return filled, err
		}
	}
	return filled, nil
}

// takeFrom reserves len(dst) IDs of r with one add and writes those that
// exist.
func (c *rangeChain) takeFrom(r *idRange, dst []uint64) int {
	k := uint64(len(dst))
	end := r.taken.Add(k)
	start := end - k
	if start >= r.count {
		return 0
	}
	end = min(end, r.count)
	for i := range dst[:end-start] {
		dst[i] = r.first + start + uint64(i)
	}
	if start <= r.wakeAt && r.wakeAt < end {
		c.wakeProducer()
	}
	return int(end - start)
}

// advance moves cur past r, used up, to its successor, or waits for one.
// It returns nil when the caller should take again.
func (c *rangeChain) advance(ctx context.Context, r *idRange) error {
	for {
		if cur := c.cur.Load(); cur != r { // another taker moved on already
			return nil
		}
		if s := r.successor.Load(); s != nil {
			c.cur.CompareAndSwap(r, s) // lost: someone else moved cur past r
			return nil
		}
		// The producer links a run before it publishes a new state, so a
		// state read before the successor is checked again cannot miss it.
		st := c.state.Load()
		if st.closed {
			return errChainClosed
		}
		if r.successor.Load() != nil {
			continue
		}
		if st.fatal {
			return st.lastErr
		}
		c.wakeProducer()
		c.waits.Add(1)
		select {
		case <-st.changed:
		case <-ctx.Done():
			if st.lastErr != nil {
				return fmt.Errorf("%w; last refill: %w", ctx.Err(), st.lastErr)
			}
			return ctx.Err()
		}
	}
}

func (c *rangeChain) wakeProducer() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// available is the number of IDs at hand: an estimate while takers take.
func (c *rangeChain) available() uint64 {
	var n uint64
	for r := c.cur.Load(); r != nil; r = r.successor.Load() {
		n += r.remaining()
	}
	return n
}

// pushesAhead counts the pushes queued after the run in use (a
// BlockSource's blocks): an estimate while takers take.
func (c *rangeChain) pushesAhead() int {
	n := 0
	for r := c.cur.Load().successor.Load(); r != nil; r = r.successor.Load() {
		if r.startsPush {
			n++
		}
	}
	return n
}

// push appends runs at the tail (the producer only). Each run wakes the
// producer when a take leaves fewer than wakeBelow of its IDs. It then
// publishes the refill's outcome, err nil when runs arrived, waking the
// waiting takers. It returns false when the chain is closed.
func (c *rangeChain) push(runs []Run, wakeBelow uint64, err error, fatal bool) bool {
	first := true
	for _, run := range runs {
		if run.Count == 0 {
			continue
		}
		r := &idRange{first: run.First, count: run.Count, wakeAt: run.Count - min(run.Count, wakeBelow), startsPush: first}
		first = false
		c.tail.successor.Store(r)
		c.tail = r
	}
	return c.publish(&chainState{lastErr: err, fatal: fatal})
}

// publish replaces the state with next unless the chain is closed, and
// wakes the takers waiting on the old one.
func (c *rangeChain) publish(next *chainState) bool {
	next.changed = make(chan struct{})
	for {
		old := c.state.Load()
		if old.closed {
			return false
		}
		if c.state.CompareAndSwap(old, next) {
			close(old.changed)
			return true
		}
	}
}

// close makes every take fail with errChainClosed from now on and wakes
// the waiting takers; IDs left are dropped. It returns false when the
// chain was closed already.
func (c *rangeChain) close() bool {
	if !c.publish(&chainState{closed: true}) {
		return false
	}
	c.cur.Store(closedRange)
	return true
}
