package uidcore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// errBeforeAfter: the lane's previous holder may have used the second.
var errBeforeAfter = errors.New("uidcore: second not after the worker ID's previous holder")

// errLaneDropped: the lane is on its way back to the store.
var errLaneDropped = errors.New("uidcore: lane being given back")

// LaneObserver is an optional extension of Observer: a generator whose
// observer implements it reports every lane it claims or gives back.
type LaneObserver interface {
	LaneChanged(ctx context.Context, e LaneEvent)
}

// LaneEvent is a lane claimed, given back, or a failed attempt to claim
// one.
type LaneEvent struct {
	WorkerID uint64
	Added    bool  // claimed (false: given back, or a failed claim with Err)
	Held     int   // lanes held afterwards, the first one included
	Err      error // a failed claim; WorkerID is then 0
	// ReleaseErr is why a lane given back could not be released in the
	// store (unreachable, say): the lane is given back all the same (it
	// issues nothing more), and its lease runs out in the store.
	ReleaseErr error
}

// lane is one worker ID a generator fills.
type lane struct {
	claim    Claim
	workerID uint64
	after    int64
	primary  bool  // the caller's claim: never dropped by the generator
	lastUsed int64 // newest second padding filled (0: none); padding-owned
	// surplusSince is the second since which demand has not needed the
	// lane (0: it is needed); padding-owned.
	surplusSince int64
	drop         bool // padding-owned: give it back at the next second
}

// usableFor says whether padding may fill second sec on the lane: nil, an
// error wrapping ErrNotReserved when the claim must reserve further first
// (it is asked to), or why the lane cannot serve the second at all.
func (l *lane) usableFor(sec int64) error {
	if l.drop {
		return errLaneDropped
	}
	if sec <= l.after {
		return errBeforeAfter
	}
	until, err := l.claim.Until()
	if err != nil {
		return err
	}
	if sec > until {
		if r, ok := l.claim.(Reserver); ok {
			r.Reserve(sec)
		}
		return &NotReservedError{WorkerID: l.workerID, Second: sec, Until: until}
	}
	return nil
}

// retireAt is the last second the lane may have issued IDs for.
func (l *lane) retireAt() int64 {
	if l.lastUsed > 0 {
		return l.lastUsed
	}
	return l.after
}

// laneSet holds a generator's lanes. The list itself belongs to the
// padding goroutine; a lane goroutine claims new lanes and gives dropped
// ones back, so that padding never waits for the store.
type laneSet struct {
	g        *CachedGenerator
	assigner Assigner
	max      int
	idle     int64 // seconds
	obs      LaneObserver

	lanes    []*lane // padding-owned, ascending worker ID
	dropping bool    // padding-owned: some lane is marked drop

	mu       sync.Mutex
	pending  []*lane // claimed, waiting for the next second
	npending atomic.Int32
	held     atomic.Int32 // lanes held, pending and being given back included
	wanted   chan struct{}
	arrived  chan struct{}
	release  chan *lane
	ids      atomic.Pointer[[]uint64]
	claimed  atomic.Uint64
	returned atomic.Uint64
	lastErr  atomic.Pointer[error]
	floor    int64 // CachedOptions.Floor: every lane's after is at least it
	cancel   context.CancelFunc
	ctx      context.Context
}

func (s *laneSet) init(g *CachedGenerator, opts CachedOptions) {
	s.g, s.assigner, s.floor = g, opts.Lanes, opts.Floor
	s.max = opts.MaxLanes
	switch {
	case s.assigner == nil:
		s.max = 1
	case s.max == 0:
		s.max = DefaultMaxLanes
	}
	idle := opts.LaneIdle
	if idle == 0 {
		idle = DefaultLaneIdle
	}
	s.idle = int64(max(idle/time.Second, 1))
	s.obs, _ = opts.Observer.(LaneObserver)
	s.wanted = make(chan struct{}, 1)
	s.arrived = make(chan struct{}, 1)
	s.release = make(chan *lane, s.max)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	c := opts.Claim
	s.lanes = []*lane{{claim: c, workerID: c.WorkerID(), after: max(c.After(), s.floor), primary: true}}
	s.held.Store(1)
	s.publish()
}

func (s *laneSet) start() {
	if s.assigner == nil {
		return
	}
	s.g.wg.Add(1)
	go s.run()
}

func (s *laneSet) len() int         { return len(s.lanes) }
func (s *laneSet) at(i int) *lane   { return s.lanes[i] }
func (s *laneSet) hasPending() bool { return s.npending.Load() > 0 }

// askForAnother asks the lane goroutine to claim one more lane, if the
// generator may hold another (it holds fewer than MaxLanes).
func (s *laneSet) askForAnother() {
	if s.assigner == nil || int(s.held.Load()) >= s.max {
		return
	}
	select {
	case s.wanted <- struct{}{}:
	default:
	}
}

// settleForSecond fixes the lanes of the second padding is about to fill:
// it adopts the lanes claimed since and lets dropped ones go. Padding
// calls it only before it writes any ID of a second.
func (s *laneSet) settleForSecond() {
	if !s.hasPending() && !s.dropping {
		return
	}
	s.mu.Lock()
	add := s.pending
	s.pending = nil
	s.npending.Store(0)
	s.mu.Unlock()
	kept := make([]*lane, 0, len(s.lanes)+len(add))
	for _, ln := range s.lanes {
		if ln.drop {
			s.release <- ln // never blocks: it has room for every lane
			continue
		}
		kept = append(kept, ln)
	}
	kept = append(kept, add...)
	slices.SortFunc(kept, func(a, b *lane) int {
		switch {
		case a.workerID < b.workerID:
			return -1
		case a.workerID > b.workerID:
			return 1
		}
		return 0
	})
	s.lanes, s.dropping = kept, false
	s.publish()
}

// dropIdle marks for giving back, at the next second, the extra lanes
// beyond the needed ones (the first lane counts first, wherever it sits;
// then the others in worker-ID order) that have been surplus for the idle
// time, and those lost for good.
// Padding calls it once a second.
func (s *laneSet) dropIdle(now int64, needed int) {
	kept := 1 // the first lane, wherever it sits in worker-ID order
	for _, ln := range s.lanes {
		if ln.drop || ln.primary {
			continue
		}
		if lostForGood(ln.claim) {
			ln.drop, s.dropping = true, true
			continue
		}
		kept++
		if kept <= needed {
			ln.surplusSince = 0
			continue
		}
		if ln.surplusSince == 0 {
			ln.surplusSince = now
		}
		if now-ln.surplusSince >= s.idle {
			ln.drop, s.dropping = true, true
		}
	}
}

// lostChan is a claim's Done channel, closed once it is lost for good;
// nil (never ready) for a claim without one.
func lostChan(c Claim) <-chan struct{} {
	if d, ok := c.(interface{ Done() <-chan struct{} }); ok {
		return d.Done()
	}
	return nil
}

// lostForGood reports whether a claim with a Done channel has closed it.
func lostForGood(c Claim) bool {
	select {
	case <-lostChan(c):
		return true
	default:
		return false
	}
}

func (s *laneSet) publish() {
	ids := make([]uint64, len(s.lanes))
	for i, ln := range s.lanes {
		ids[i] = ln.workerID
	}
	s.ids.Store(&ids)
}

// run is the lane goroutine: it claims lanes padding asks for and gives
// back the ones it dropped.
func (s *laneSet) run() {
	defer s.g.wg.Done()
	for {
		select {
		case <-s.g.done:
			return
		case ln := <-s.release:
			s.giveBack(ln)
		case <-s.wanted:
			if int(s.held.Load()) < s.max {
				s.claimOne()
			}
		}
	}
}

func (s *laneSet) claimOne() {
	c, err := s.assigner.Claim(s.ctx, s.g.layout)
	if err == nil && c.WorkerID() > s.g.layout.MaxWorkerID() {
		_ = releaseWithin(c, time.Second) // never used: an expiring lease is as good
		err = fmt.Errorf("%w: worker %d > %d (layout %s)", ErrWorkerRange, c.WorkerID(), s.g.layout.MaxWorkerID(), s.g.layout)
	}
	if err != nil {
		if s.ctx.Err() != nil {
			return
		}
		s.lastErr.Store(&err)
		s.notify(LaneEvent{Held: int(s.held.Load()), Err: err})
		// Do not hammer a failing store; padding asks again meanwhile.
		select {
		case <-s.g.done:
		case <-time.After(time.Second):
		}
		return
	}
	held := s.held.Add(1)
	s.claimed.Add(1)
	ln := &lane{claim: c, workerID: c.WorkerID(), after: max(c.After(), s.floor)}
	if !s.awaitReady(c) {
		// Lost before it could issue, or the generator is closing: it
		// issued nothing, so give it back at once.
		s.giveBack(ln)
		return
	}
	s.mu.Lock()
	s.pending = append(s.pending, ln)
	s.npending.Add(1)
	s.mu.Unlock()
	s.notify(LaneEvent{WorkerID: c.WorkerID(), Added: true, Held: int(held)})
	select {
	case s.arrived <- struct{}{}:
	default:
	}
}

// awaitReady waits until a new lane's claim can issue (uidcore.Warming:
// a lease waits for its first durable reservation) before padding sees
// it: a lane padding must skip would stall every second it visits, and
// capacity counts only lanes that serve. Meanwhile this goroutine claims
// no further lane (demand keeps asking) and still gives dropped lanes
// back. It returns false when the claim was lost or the generator is
// closing.
func (s *laneSet) awaitReady(c Claim) bool {
	ready, lost := Ready(c), lostChan(c)
	for {
		select {
		case <-ready:
			return true
		case <-lost:
			return false
		case <-s.g.done:
			return false
		case ln := <-s.release:
			s.giveBack(ln)
		}
	}
}

// giveBack tells the lane's claim the last second it may have used, then
// releases it.
func (s *laneSet) giveBack(ln *lane) {
	if r, ok := ln.claim.(Retirer); ok {
		r.Retire(ln.retireAt())
	}
	err := releaseWithin(ln.claim, 2*time.Second)
	held := s.held.Add(-1)
	s.returned.Add(1)
	s.notify(LaneEvent{WorkerID: ln.workerID, Held: int(held), ReleaseErr: err})
}

// releaseWithin releases c, waiting at most d: if the store is away the
// lease expires by itself.
func releaseWithin(c Claim, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.Release(ctx)
}

func (s *laneSet) notify(e LaneEvent) {
	if s.obs != nil {
		s.obs.LaneChanged(context.Background(), e)
	}
}

// close gives back every extra lane once padding and the lane goroutine
// have stopped, and retires the first one (its caller releases it).
func (s *laneSet) close() {
	s.mu.Lock()
	rest := append(s.lanes, s.pending...)
	s.pending = nil
	s.mu.Unlock()
	for more := true; more; {
		select {
		case ln := <-s.release:
			rest = append(rest, ln)
		default:
			more = false
		}
	}
	var wg sync.WaitGroup
	for _, ln := range rest {
		if ln.primary {
			if r, ok := ln.claim.(Retirer); ok {
				r.Retire(ln.retireAt())
			}
			continue
		}
		wg.Go(func() { s.giveBack(ln) })
	}
	wg.Wait()
}
