package uidcore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
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
			g.everySecond()
			if !g.hasStale() {
				if !backingOff && g.tail.Load()-g.cursor.Load() < g.threshold.Load() {
					g.requestPadding()
				}
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
			trigger = TriggerForced
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

// everySecond adapts the fill target to the IDs taken in the last second
// (twice as many, so a second's demand is met from the ring while padding
// runs) and gives back lanes that went unused.
func (g *CachedGenerator) everySecond() {
	// Takes only: IDs dropped for lagging the clock moved the cursor too,
	// and counting them as demand would keep idle lanes "needed".
	c, dropped := g.cursor.Load(), g.discarded.Load()
	taken := (c - g.padding.lastCursor) - (dropped - g.padding.lastDiscarded)
	g.padding.lastCursor, g.padding.lastDiscarded = c, dropped
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
	needed := int(min((taken+taken/4)/perLane+1, uint64(g.lanes.max)))
	g.lanes.dropIdle(g.clock.Now().Unix(), needed)
}

// backoffAfter is how long padding rests after a round that stopped for
// reason, so that takers hitting an empty ring do not spin it.
func (g *CachedGenerator) backoffAfter(reason PutRejectReason) time.Duration {
	switch reason {
	case RejectAheadBound:
		// Nothing changes before the wall clock's next second, unless a
		// new lane arrives (which wakes padding: see laneSet.adopt).
		return max(untilNextSecond(g.clock.Now()), 5*time.Millisecond)
	case RejectNotReserved, RejectSlotBusy:
		return 5 * time.Millisecond
	case RejectExhausted:
		return time.Second
	}
	return 0
}

// pad fills the ring from the logical second onwards, lane by lane within
// each second, until it holds the fill target or a bound stops it. Only
// the padding goroutine (and NewCached before it starts) calls it.
func (g *CachedGenerator) pad(trigger PaddingTrigger) (PaddingReport, PutRejectReason) {
	ctx := g.observer.PaddingStarted(context.Background(), trigger)
	g.wantPad.Store(false)
	began := time.Now()
	report := PaddingReport{Trigger: trigger, Discarded: g.discardStale()}
	if g.tail.Load() == g.cursor.Load() && trigger != TriggerStartup && g.padding.target < g.size {
		// Takers emptied the ring before padding came: demand is rising
		// faster than the once-a-second estimate.
		g.setTarget(min(g.size, 2*g.padding.target))
	}
	maxSeq := g.layout.MaxSequence()
	tail := g.tail.Load()
	var stop *PutRejection
	var now int64
	// Of the current second, in this round: lanes skipped for seconds
	// their previous holder may have used, and why the last other skipped
	// lane could not serve. (Whether any lane wrote to it, in any round,
	// is g.padding.dirty.)
	var afterSkips int
	var invalid error
	for stop == nil {
		if !g.padding.dirty && g.lanes.hasPending() {
			// Nothing of this second is written yet: new lanes may join it.
			g.lanes.sync()
			g.padding.laneIdx, g.padding.nextSeq = 0, 0
			afterSkips, invalid = 0, nil
		}
		inRing := tail - g.cursor.Load()
		if inRing >= g.padding.target {
			break
		}
		free := g.padding.target - inRing
		now = g.clock.Now().Unix()
		if now > g.padding.nextSecond {
			// Re-sync: at low load the wall clock overtakes the logical
			// second, and IDs should carry the real time.
			g.startSecond(now)
			afterSkips, invalid = 0, nil
		}
		if g.padding.laneIdx >= g.lanes.len() {
			if !g.padding.dirty && afterSkips == 0 && invalid != nil {
				// No lane may fill any second now (claims lost): wait
				// rather than burn seconds, and look at the lanes again
				// from the first. Only when nothing of this second was
				// written, by this round or an earlier one: a lane that
				// filled part of it must never fill it again.
				stop = &PutRejection{Reason: RejectNotReserved, Second: g.padding.nextSecond, Err: invalid}
				g.padding.laneIdx, g.padding.nextSeq = 0, 0
				break
			}
			g.startSecond(g.padding.nextSecond + 1)
			afterSkips, invalid = 0, nil
			continue
		}
		if g.maxAhead >= 0 && g.padding.nextSecond-now > g.maxAhead {
			stop = &PutRejection{Reason: RejectAheadBound, Second: g.padding.nextSecond,
				Err: fmt.Errorf("demand exceeds the %d IDs/s of %d lane(s): IDs would run %ds ahead of the wall clock, the bound is %ds",
					g.lanes.len()*int(maxSeq+1), g.lanes.len(), g.padding.nextSecond-now, g.maxAhead)}
			break
		}
		if g.padding.nextSecond > now && trigger == TriggerThreshold {
			// Takers borrow the future: demand needs another lane.
			g.lanes.want()
		}
		ln := g.lanes.at(g.padding.laneIdx)
		if err := ln.usableFor(g.padding.nextSecond); err != nil {
			if errors.Is(err, ErrNotReserved) {
				// Valid, but not reserved this far yet: the reservation is
				// asked for and padding resumes here shortly.
				stop = &PutRejection{Reason: RejectNotReserved, Second: g.padding.nextSecond, Err: err}
				break
			}
			if errors.Is(err, errBeforeAfter) {
				afterSkips++
			} else {
				invalid = err
			}
			g.padding.laneIdx, g.padding.nextSeq = g.padding.laneIdx+1, 0
			continue
		}
		base, err := g.layout.secondBase(g.padding.nextSecond, ln.workerID)
		if err != nil {
			stop = &PutRejection{Reason: RejectExhausted, Second: g.padding.nextSecond, Err: err}
			break
		}
		n := min(free, maxSeq+1-g.padding.nextSeq, publishChunk)
		var written uint64
		forEachWord(tail&g.mask, n, g.size, func(w int, want uint64) {
			if stop != nil {
				return
			}
			if g.canTake[w].Load()&want != 0 {
				// A taker claimed the slot a lap ago and is still reading it.
				stop = &PutRejection{Reason: RejectSlotBusy, Second: g.padding.nextSecond}
				return
			}
			// The bits of one call are contiguous: fill them as a run.
			from := w<<6 + bits.TrailingZeros64(want)
			run := g.slots[from : from+bits.OnesCount64(want)]
			seq := base | (g.padding.nextSeq + written)
			for j := range run {
				run[j] = seq + uint64(j)
			}
			written += uint64(len(run))
			g.canTake[w].Or(want)
		})
		if written == 0 {
			continue
		}
		if report.Added == 0 {
			report.FirstSecond = g.padding.nextSecond
		}
		report.LastSecond = g.padding.nextSecond
		report.Added += int(written)
		ln.lastUsed = g.padding.nextSecond
		g.padding.dirty = true
		g.padding.nextSeq += written
		if g.padding.nextSeq > maxSeq {
			g.padding.laneIdx, g.padding.nextSeq = g.padding.laneIdx+1, 0
		}
		tail += written
		g.lastFilled.Store(g.padding.nextSecond)
		g.tail.Store(tail)
	}
	g.logicalSecond.Store(g.padding.nextSecond)
	reason := PutRejectReason("")
	if stop != nil {
		reason = stop.Reason
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
	} else {
		g.stopErr.Store(nil)
	}
	if reason == RejectAheadBound && trigger == TriggerThreshold {
		g.lanes.want()
	}
	if reason == RejectAheadBound {
		// Sticky until a second passes without the bound: the refill at
		// each new second must not open the reserve to bulk takes.
		g.throttled.Store(true)
		g.padding.hitBound = true
	}
	g.paddingRounds.Add(1)
	report.SecondsAhead = g.secondsAhead()
	report.Duration = time.Since(began)
	report.Available = g.tail.Load() - g.cursor.Load()
	report.Lanes = g.lanes.len()
	g.observer.PaddingFinished(ctx, report)
	next := make(chan struct{})
	close(*g.roundEnd.Swap(&next))
	return report, reason
}

// startSecond moves padding to the first lane of second sec; lanes that
// arrived or were dropped meanwhile take effect here, never within a
// second, so a second's lanes stay in worker-ID order.
func (g *CachedGenerator) startSecond(sec int64) {
	g.padding.nextSecond, g.padding.laneIdx, g.padding.nextSeq, g.padding.dirty = sec, 0, 0, false
	g.lanes.sync()
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
		forEachWord(c&g.mask, k, g.size, func(w int, bits uint64) { g.canTake[w].And(^bits) })
		discarded += int(k)
		g.discarded.Add(k)
	}
}
