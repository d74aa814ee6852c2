package uidcore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

// setTarget sets how many IDs padding keeps ready, and the thresholds that
// follow from it.
func (g *CachedGenerator) setTarget(target uint64) {
	g.padding.target = target
	g.targetNow.Store(target)
	g.threshold.Store(max(target*g.factor/100, 1))
	// Small takes need little, but all of it: the reserve is twice what
	// they took in the last second, at least a little, at most half the
	// ring's fill.
	base := min(target/8, fillFloor/4, (g.layout.MaxSequence()+1)/8)
	g.reserve.Store(min(max(base, 2*g.padding.smallRate), target/2))
}

// paddingLoop is the padding goroutine: it waits for a reason to pad (a
// taker's request, the schedule, a new second, a new lane, a forced
// round), runs the round, and rests after one that stopped short.
func (g *CachedGenerator) paddingLoop() {
	defer g.wg.Done()
	var tick <-chan time.Time
	if g.schedule > 0 {
		t := time.NewTicker(g.schedule)
		defer t.Stop()
		tick = t.C
	}
	// Once a second, just after the wall clock's second begins: freshness,
	// the fill target and idle lanes follow the clock.
	second := time.NewTimer(untilNextSecond(g.clock.Now()) + time.Millisecond)
	defer second.Stop()
	backoff := time.NewTimer(0)
	<-backoff.C
	defer backoff.Stop()
	var backingOff bool
	for {
		var trigger PaddingTrigger
		var reply chan PaddingReport
		wake := g.wake
		if backingOff {
			wake = nil // honour the back-off; a pending request stays queued
		}
		select {
		case <-g.done:
			return
		case <-wake:
			trigger = TriggerThreshold
		case <-tick:
			trigger = TriggerSchedule
		case <-second.C:
			second.Reset(untilNextSecond(g.clock.Now()) + time.Millisecond)
			if !g.secondBegan(backingOff) {
				continue
			}
			trigger = TriggerFreshness
		case <-backoff.C:
			backingOff = false
			continue
		case <-g.lanes.arrived:
			// A new lane is capacity now, whatever the back-off says.
			if backingOff {
				backoff.Stop()
				backingOff = false
			}
			trigger = TriggerThreshold
		case reply = <-g.forced:
			trigger = triggerForced
		case res := <-g.reserves:
			// Answered even while padding backs off: a reservation stops
			// at the same bounds a round does, and says so to its taker.
			reason := g.answerReservation(res)
			if reason == "" || backingOff {
				continue
			}
			backoff.Reset(g.backoffAfter(reason))
			backingOff = true
			continue
		}
		report, reason := g.pad(trigger)
		if reply != nil {
			reply <- report
		}
		if pause := g.backoffAfter(reason); pause > 0 {
			if backingOff {
				backoff.Stop()
			}
			backoff.Reset(pause)
			backingOff = true
		}
	}
}

// secondBegan is the once-a-second look, just after the wall clock's
// second begins: it adapts padding to the last second and reports whether
// IDs in the ring now lag the clock (a freshness round must run). If not,
// it asks for an ordinary round when the ring is below the threshold and
// padding is not backing off.
func (g *CachedGenerator) secondBegan(backingOff bool) bool {
	g.everySecond()
	if g.hasStale() {
		return true
	}
	if !backingOff && g.tail.Load()-g.cursor.Load() < g.threshold.Load() {
		g.requestPadding()
	}
	return false
}

// everySecond adapts the fill target to the IDs taken in the last second
// (twice as many, so a second's demand is met from the ring while padding
// runs) and gives back lanes that went unused.
func (g *CachedGenerator) everySecond() {
	// Takes only: IDs dropped for lagging the clock moved the cursor too,
	// and counting them as demand would keep idle lanes "needed".
	c, dropped := g.cursor.Load(), g.discarded.Load()
	taken := (c - g.padding.lastCursor) - (dropped - g.padding.lastDiscarded)
	g.padding.lastCursor, g.padding.lastDiscarded = c, dropped
	// Reservations need lanes as takes do, but not room in the ring (what
	// they took from the ring moved the cursor too).
	reserved := g.padding.reserved
	g.padding.reserved = 0
	g.padding.smallRate = g.smallTaken.Swap(0)
	g.throttled.Store(g.padding.hitBound)
	g.padding.hitBound = false
	// Never more than the lanes give in a second: refreshing a target
	// beyond that would borrow the future at idle.
	perLane := g.layout.MaxSequence() + 1
	capacity := perLane * uint64(g.lanes.len())
	g.setTarget(max(min(g.size, max(2*taken, fillFloor), capacity), 64))
	// Lanes for the demand with a quarter of headroom; the rest are
	// surplus, and go back once they have been for LaneIdle.
	demand := taken + reserved
	needed := int(min((demand+demand/4)/perLane+1, uint64(g.lanes.max)))
	g.lanes.dropIdle(g.clock.Now().Unix(), needed)
}

// backoffAfter is how long padding rests after a round that stopped for
// reason, so that takers hitting an empty ring do not spin it.
func (g *CachedGenerator) backoffAfter(reason PutRejectReason) time.Duration {
	switch reason {
	case RejectAheadBound:
		// Nothing changes before the wall clock's next second, unless a
		// new lane arrives (which wakes padding: see laneSet.claimOne).
		return max(untilNextSecond(g.clock.Now()), 5*time.Millisecond)
	case RejectNotReserved, RejectSlotBusy:
		return 5 * time.Millisecond
	case RejectExhausted:
		return time.Second
	}
	return 0
}

// round is one padding round's own state: what it reports, where its
// writes stand, and why it stopped. The padding goroutine's state that
// outlives a round is g.padding.
type round struct {
	trigger PaddingTrigger
	began   time.Time
	report  PaddingReport
	tail    uint64 // the next slot the round writes; takers see it after each run
	now     int64  // the wall clock's second, read before each step
	// Of the current second, in this round: lanes skipped for seconds their
	// previous holder may have used, and why the last other skipped lane
	// could not serve. (Whether any lane wrote to the second, in any round,
	// is g.padding.dirty.)
	afterSkips int
	invalid    error
	stop       *PutRejection // why the round stopped short; nil while it fills
	// sink, when set, takes the round's IDs as runs instead of the ring:
	// a reservation (ReserveRuns). The round fills it to its want.
	sink *reservation
}

// demanded tells a round that takers asked for: when it has to borrow
// the future, demand needs another lane.
func (r *round) demanded() bool {
	return r.trigger == TriggerThreshold || r.trigger == TriggerReserve
}

// pad runs a padding round: it fills the ring from the logical second
// onwards, lane by lane within each second, until the ring holds the fill
// target or a bound stops it. Only the padding goroutine (and NewCached
// before it starts) calls it.
func (g *CachedGenerator) pad(trigger PaddingTrigger) (PaddingReport, PutRejectReason) {
	ctx := g.observer.PaddingStarted(context.Background(), trigger)
	r := g.beginRound(trigger)
	g.fill(&r)
	return g.finishRound(ctx, &r)
}

// beginRound clears the padding request, discards IDs that lag the clock,
// and raises the fill target when takers emptied the ring.
func (g *CachedGenerator) beginRound(trigger PaddingTrigger) round {
	g.wantPad.Store(false)
	r := round{trigger: trigger, began: time.Now()}
	// Looked at before stale IDs go: a ring that discarding empties was
	// not emptied by demand.
	emptied := g.tail.Load() == g.cursor.Load()
	r.report = PaddingReport{Trigger: trigger, Discarded: g.discardStale()}
	if emptied && trigger != TriggerStartup && g.padding.target < g.size {
		// Takers emptied the ring before padding came: demand is rising
		// faster than the once-a-second estimate.
		g.setTarget(min(g.size, 2*g.padding.target))
	}
	r.tail = g.tail.Load()
	return r
}

// fill writes runs of IDs until the ring holds the fill target, or a step
// stops the round (r.stop).
func (g *CachedGenerator) fill(r *round) {
	for r.stop == nil {
		g.admitLanes(r)
		free := g.room(r)
		if free == 0 {
			return
		}
		if ln := g.chooseLane(r); ln != nil {
			g.writeRun(r, ln, free)
		}
	}
}

// admitLanes lets the lanes claimed since join the logical second while
// nothing of it is written, and starts the second's lanes over.
func (g *CachedGenerator) admitLanes(r *round) {
	p := &g.padding
	if p.dirty || !g.lanes.hasPending() {
		return
	}
	g.lanes.settleForSecond()
	p.laneIdx, p.nextSeq = 0, p.firstSeq
	r.afterSkips, r.invalid = 0, nil
}

// room is how many IDs the ring lacks of the fill target (0: none).
func (g *CachedGenerator) room(r *round) uint64 {
	if r.sink != nil {
		return r.sink.want - r.sink.got
	}
	inRing := r.tail - g.cursor.Load()
	if inRing >= g.padding.target {
		return 0
	}
	return g.padding.target - inRing
}

// chooseLane takes one step towards the second and lane padding writes
// next: it returns the lane (of g.padding.nextSecond), or nil when it
// moved on to another lane or second (the caller looks again) or stopped
// the round.
func (g *CachedGenerator) chooseLane(r *round) *lane {
	p := &g.padding
	r.now = g.clock.Now().Unix()
	if r.now > p.nextSecond {
		// Re-sync: at low load the wall clock overtakes the logical
		// second, and IDs should carry the real time. The new second
		// continues the sequence where the last one's issued IDs stopped
		// (spreadStart), so that the low bits spread at any rate.
		g.dropOlder(r)
		g.startSecond(r, r.now, g.spreadStart())
	}
	if p.laneIdx >= g.lanes.len() {
		g.pastTheLastLane(r)
		return nil
	}
	if g.pastAheadBound(r.now) {
		n := g.lanes.len()
		r.stop = &PutRejection{Reason: RejectAheadBound, Second: p.nextSecond,
			Err: fmt.Errorf("demand exceeds the %d IDs/s of %d lane(s): IDs would run %ds ahead of the wall clock, the bound is %ds",
				n*int(g.layout.MaxSequence()+1), n, p.nextSecond-r.now, g.maxAhead)}
		return nil
	}
	if p.nextSecond > r.now && r.demanded() {
		// Takers borrow the future: demand needs another lane.
		g.lanes.askForAnother()
	}
	ln := g.lanes.at(p.laneIdx)
	if err := ln.usableFor(p.nextSecond); err != nil {
		g.skipLane(r, err)
		return nil
	}
	return ln
}

// pastTheLastLane moves padding on to the next second once every lane of
// the logical second is written or skipped, unless no lane may fill any
// second now.
func (g *CachedGenerator) pastTheLastLane(r *round) {
	p := &g.padding
	if !p.dirty && r.afterSkips == 0 && r.invalid != nil {
		// No lane may fill any second now (claims lost): wait rather than
		// burn seconds, and look at the lanes again from the first. Only
		// when nothing of this second was written, by this round or an
		// earlier one: a lane that filled part of it must never fill it
		// again.
		r.stop = &PutRejection{Reason: RejectNotReserved, Second: p.nextSecond, Err: r.invalid}
		p.laneIdx, p.nextSeq = 0, p.firstSeq
		return
	}
	// Every lane of the second is used up: demand meets the capacity, and
	// the next second starts at sequence 0, whole.
	g.startSecond(r, p.nextSecond+1, 0)
}

// skipLane passes over a lane that cannot serve the logical second (err
// from usableFor), or stops the round when the lane only needs its
// reservation extended.
func (g *CachedGenerator) skipLane(r *round, err error) {
	p := &g.padding
	if errors.Is(err, ErrNotReserved) {
		// Valid, but not reserved this far yet: the reservation is asked
		// for and padding resumes here shortly.
		r.stop = &PutRejection{Reason: RejectNotReserved, Second: p.nextSecond, Err: err}
		return
	}
	if errors.Is(err, errBeforeAfter) {
		r.afterSkips++
	} else {
		r.invalid = err
	}
	p.laneIdx, p.nextSeq = p.laneIdx+1, 0
}

// startSecond moves padding to the first lane of second sec, from
// sequence first on that lane (0 on the others); lanes that arrived or
// were dropped meanwhile take effect here, never within a second, so a
// second's lanes stay in worker-ID order.
func (g *CachedGenerator) startSecond(r *round, sec int64, first uint64) {
	p := &g.padding
	p.nextSecond, p.laneIdx, p.nextSeq, p.firstSeq, p.dirty = sec, 0, first, first, false
	g.lanes.settleForSecond()
	r.afterSkips, r.invalid = 0, nil
}

// spreadStart is the first sequence of a second padding re-syncs to: the
// one after the last ID issued, or written and still waiting in the
// ring, modulo the spread (a multiple of 64, so the low bits go on
// counting). At 1 ID a second every ID would otherwise carry sequence 0,
// and id % n put most rows on a few shards (CosId's
// sequenceResetThreshold answers the same). Only a second nothing was
// written to yet starts there, so no ID repeats; a second whose lanes
// were used up ends a busy stretch, and the next one starts at 0, so
// what the lanes sustain is unchanged.
func (g *CachedGenerator) spreadStart() uint64 {
	if g.spread == 0 {
		return 0
	}
	return g.padding.spreadNext % g.spread
}

// dropOlder, with the spread on, discards the IDs still in the ring
// when padding re-syncs to the wall clock: they are of older seconds,
// and the new second's sequence goes on from the first of them, the
// first ID never issued, so the issued IDs' low bits keep counting
// whatever the rate. Only the padding goroutine calls it.
func (g *CachedGenerator) dropOlder(r *round) {
	if g.spread == 0 {
		return
	}
	for {
		c, t := g.cursor.Load(), g.tail.Load()
		if c >= t {
			return
		}
		first := g.slots[c&g.mask]
		if !g.cursor.CompareAndSwap(c, t) {
			continue // a taker moved the cursor; look again
		}
		k := t - c
		g.padding.spreadNext = first & g.layout.MaxSequence()
		forEachWord(c&g.mask, k, g.size, func(w int, bits uint64) { g.canTake[w].And(^bits) })
		r.report.Discarded += int(k)
		g.discarded.Add(k)
		return
	}
}

// spreadOf is the span of first sequences spreadStart uses: a sixteenth
// of a lane's second, at most 65,536, for layouts with at least 4,096
// sequences a second (0, no spread, below: a small layout's first
// sequences would cost a large share of its second).
func spreadOf(l Layout) uint64 {
	perLane := l.MaxSequence() + 1
	if perLane < 1<<12 {
		return 0
	}
	return min(perLane/16, 1<<16)
}

// writeRun writes the lane's next IDs of the logical second into at most
// free slots, at most a chunk of them so that takers need not wait for a
// long round, and makes what it wrote visible to takers.
func (g *CachedGenerator) writeRun(r *round, ln *lane, free uint64) {
	p := &g.padding
	base, err := g.layout.secondBase(p.nextSecond, ln.workerID)
	if err != nil {
		r.stop = &PutRejection{Reason: RejectExhausted, Second: p.nextSecond, Err: err}
		return
	}
	if r.sink != nil {
		g.reserveRun(r, base, ln, free)
		return
	}
	n := min(free, g.layout.MaxSequence()+1-p.nextSeq, publishChunk)
	written, busy := g.writeSlots(r.tail, n, base, p.nextSeq)
	if busy {
		// A taker claimed a slot a lap ago and is still reading it.
		r.stop = &PutRejection{Reason: RejectSlotBusy, Second: p.nextSecond}
	}
	if written > 0 {
		g.publishRun(r, ln, written)
	}
}

// writeSlots writes up to n IDs, base|seq onwards, into the slots from
// tail and sets their can-take bits, a word of the bitmap at a time. It
// stops short at a word whose slots are not all free to write (busy).
// It walks the words itself rather than through forEachWord so that it
// can stop with a return (an iterator over the words, in the take path
// and here, cost NextN 9% of CPU per ID: BENCHMARKS.md).
func (g *CachedGenerator) writeSlots(tail, n, base, seq uint64) (written uint64, busy bool) {
	start := tail & g.mask
	for n > 0 {
		k, want := wordRun(start, n, g.size)
		w := int(start >> 6)
		if g.canTake[w].Load()&want != 0 {
			return written, true
		}
		// The slots of one word are contiguous: fill them as a run.
		run := g.slots[start : start+k]
		id := base | (seq + written)
		for j := range run {
			run[j] = id + uint64(j)
		}
		written += k
		g.canTake[w].Or(want)
		n -= k
		start = (start + k) & g.mask
	}
	return written, false
}

// publishRun accounts for a run of written IDs and hands the run to
// takers by storing the tail.
func (g *CachedGenerator) publishRun(r *round, ln *lane, written uint64) {
	if r.report.Added == 0 {
		r.report.FirstSecond = g.padding.nextSecond
	}
	r.report.Added += int(written)
	g.advance(r, ln, written)
	r.tail += written
	g.tail.Store(r.tail)
}

// advance accounts for n IDs of the lane in the logical second, written
// to the ring or reserved: the report, the lane, and the logical
// sequence, which moves past them for good.
func (g *CachedGenerator) advance(r *round, ln *lane, n uint64) {
	p := &g.padding
	if r.sink != nil {
		if r.report.Reserved == 0 {
			r.report.FirstSecond = p.nextSecond
		}
		r.report.Reserved += int(n)
	}
	r.report.LastSecond = p.nextSecond
	ln.lastUsed = p.nextSecond
	p.dirty = true
	p.nextSeq += n
	p.spreadNext = p.nextSeq
	if p.nextSeq > g.layout.MaxSequence() {
		p.laneIdx, p.nextSeq = p.laneIdx+1, 0
	}
	g.lastFilled.Store(p.nextSecond)
}

// finishRound publishes where padding stands and why the round stopped,
// and wakes the takers waiting for the round's end.
func (g *CachedGenerator) finishRound(ctx context.Context, r *round) (PaddingReport, PutRejectReason) {
	g.logicalSecond.Store(g.padding.nextSecond)
	reason := g.recordStop(ctx, r.stop)
	if reason == RejectAheadBound {
		if r.demanded() {
			g.lanes.askForAnother()
		}
		// Sticky until a second passes without the bound: the refill at
		// each new second must not open the reserve to bulk takes.
		g.throttled.Store(true)
		g.padding.hitBound = true
	}
	g.paddingRounds.Add(1)
	report := r.report
	report.SecondsAhead = g.secondsAhead()
	report.Duration = time.Since(r.began)
	report.Available = g.tail.Load() - g.cursor.Load()
	report.Lanes = g.lanes.len()
	g.observer.PaddingFinished(ctx, report)
	next := make(chan struct{})
	close(*g.roundEnd.Swap(&next))
	if r.trigger != TriggerReserve || r.report.Added > 0 {
		fresh := make(chan struct{})
		close(*g.refilled.Swap(&fresh))
	}
	return report, reason
}

// recordStop counts and reports why a round stopped short (stop; nil when
// it filled the ring) and keeps the cause for takers that find the ring
// empty. It returns the reason ("" for none).
func (g *CachedGenerator) recordStop(ctx context.Context, stop *PutRejection) PutRejectReason {
	if stop == nil {
		g.stopErr.Store(nil)
		return ""
	}
	g.putRejections.Add(1)
	g.observer.PutRejected(ctx, *stop)
	if g.onPut != nil {
		g.onPut(ctx, *stop)
	}
	cause := stop.Err
	if cause == nil {
		cause = fmt.Errorf("padding stopped: %s at second %d", stop.Reason, stop.Second)
	}
	g.stopErr.Store(&cause)
	return stop.Reason
}

// secondsAhead is how far the newest ID in the ring runs ahead of the
// wall clock (negative when it is behind).
func (g *CachedGenerator) secondsAhead() int64 {
	return g.lastFilled.Load() - g.clock.Now().Unix()
}

// staleBefore is the first second that is fresh enough to hand out, or
// math.MinInt64 when there is no lag bound.
func (g *CachedGenerator) staleBefore() int64 {
	if g.maxLag < 0 {
		return math.MinInt64
	}
	return g.clock.Now().Unix() - g.maxLag
}

// secondOf is the unix second of an ID of this generator.
func (g *CachedGenerator) secondOf(id uint64) int64 {
	return g.layout.EpochSecond() + int64(id>>g.layout.timeShift())
}

// hasStale reports whether the oldest ID in the ring is too old to hand
// out. Only the padding goroutine calls it: the slot at the cursor cannot
// be rewritten meanwhile, as only padding writes slots.
func (g *CachedGenerator) hasStale() bool {
	c, t := g.cursor.Load(), g.tail.Load()
	return c < t && g.secondOf(g.slots[c&g.mask]) < g.staleBefore()
}

// discardStale takes the IDs that lag the wall clock by more than MaxLag
// out of the ring as a taker would, so they are never issued, and returns
// how many it took. Only the padding goroutine calls it.
func (g *CachedGenerator) discardStale() int {
	limit := g.staleBefore()
	discarded := 0
	for {
		c, t := g.cursor.Load(), g.tail.Load()
		if c >= t || g.secondOf(g.slots[c&g.mask]) >= limit {
			return discarded
		}
		// Seconds only grow along the ring: find the first fresh slot.
		k := uint64(sort.Search(int(t-c), func(j int) bool {
			return g.secondOf(g.slots[(c+uint64(j))&g.mask]) >= limit
		}))
		if !g.cursor.CompareAndSwap(c, c+k) {
			continue // a taker moved the cursor; look again
		}
		if k > 0 && c+k == t {
			// Nothing is left waiting: the sequence goes on from the first
			// ID never issued.
			g.padding.spreadNext = g.slots[c&g.mask] & g.layout.MaxSequence()
		}
		forEachWord(c&g.mask, k, g.size, func(w int, bits uint64) { g.canTake[w].And(^bits) })
		discarded += int(k)
		g.discarded.Add(k)
	}
}
