package uidcore

import (
	"context"
	"time"
)

// Run is Count consecutive IDs from First: First, First+1, …,
// First+Count-1.
type Run struct {
	First uint64
	Count uint64
}

// reservation is a bulk take that the padding goroutine answers with runs
// of IDs instead of slots of the ring (ReserveRuns).
type reservation struct {
	want uint64
	got  uint64
	runs []Run
	done chan struct{}
	// next is closed by the first round after the answer that may give
	// more (CachedGenerator.refilled, read when the answer ends): a taker
	// that waits for more waits for it, so that a refill which ends
	// before the taker looks (its goroutine woke late) still wakes it.
	next chan struct{}
}

// add appends a run of n IDs from first, merged with the last run when it
// continues it.
func (res *reservation) add(first, n uint64) {
	if k := len(res.runs) - 1; k >= 0 && res.runs[k].First+res.runs[k].Count == first {
		res.runs[k].Count += n
	} else {
		res.runs = append(res.runs, Run{First: first, Count: n})
	}
	res.got += n
}

// addIDs appends ids (increasing) as runs.
func (res *reservation) addIDs(ids []uint64) {
	for _, id := range ids {
		res.add(id, 1)
	}
}

// ReserveRuns appends n new IDs to dst as runs of consecutive IDs, in
// increasing order, and returns how many it appended. It is the bulk
// take that never puts its IDs through the ring one by one: the padding
// goroutine first hands over what the ring holds (leaving the small
// takes' reserve while the generator is throttled), then reserves the
// rest straight from the lanes, as a padding round would write them but
// without writing a slot. Every bound of padding holds: IDs run at most
// MaxAhead ahead of the wall clock, on lanes whose claims allow the
// second.
//
// Without wait it returns what it could reserve at once (possibly fewer
// than n, none on a drained instance); the IDs it returns are issued
// whatever the caller does with them. With wait it waits for the rest
// (the wall clock's next second, a new lane) until ctx ends, then
// returns what it reserved with the error of an empty ring
// (ErrBufferEmpty, wrapping why padding stopped) through the take
// policy. A lost claim or a closed generator is an error at once.
//
// IDs a caller took from the ring before a reservation are below the
// reservation's: the ring is emptied into it, and padding writes the
// ring's next IDs after it. While throttled a reservation leaves the
// small takes' reserve in the ring and then reserves nothing from the
// lanes (those IDs would be above the reserve's), so an instance's IDs
// strictly increase in the order they are issued; when the lanes have
// room it refills the ring first and takes the rest from there.
func (g *CachedGenerator) ReserveRuns(ctx context.Context, dst []Run, n uint64, wait bool) ([]Run, uint64, error) {
	var got uint64
	for got < n {
		if _, err := g.claim.Until(); err != nil {
			return dst, got, g.rejectTake(ctx, int(n-got), err)
		}
		res := &reservation{want: n - got, runs: dst, done: make(chan struct{})}
		select {
		case g.reserves <- res:
		case <-g.done:
			return dst, got, g.rejectTake(ctx, int(n-got), ErrClosed)
		case <-ctx.Done():
			return dst, got, g.rejectTake(ctx, int(n-got), g.emptyCause())
		}
		// Padding answers every reservation it received, also when it
		// stops (paddingLoop), so this wait is short.
		<-res.done
		dst, got = res.runs, got+res.got
		if got == n || !wait {
			return dst, got, nil
		}
		if err := g.awaitCapacity(ctx, int(n-got), res.next); err != nil {
			return dst, got, err
		}
	}
	return dst, got, nil
}

// awaitCapacity waits, after a reservation stopped short, for what may
// let the next one go further: round, closed by the first padding round
// after the answer (a refill, a new lane, a new second of the wall clock,
// an extended claim), or the wall clock's next second. round is taken
// when the answer ends, not when the taker looks: a refill that ended
// meanwhile would be missed, and the taker then waited for the next
// second (a blocks publisher's run take passed its deadline).
func (g *CachedGenerator) awaitCapacity(ctx context.Context, wanted int, round <-chan struct{}) error {
	t := time.NewTimer(untilNextSecond(g.clock.Now()) + time.Millisecond)
	defer t.Stop()
	select {
	case <-round:
	case <-t.C:
	case <-g.done:
		return g.rejectTake(ctx, wanted, ErrClosed)
	case <-ctx.Done():
		return g.rejectTake(ctx, wanted, g.emptyCause())
	}
	return nil
}

// answerReservation answers a reservation on the padding goroutine: from the ring
// first, then, once the ring is empty, from the lanes (a round whose runs
// go to res, not to slots). It reports the round as padding does, with
// TriggerReserve.
func (g *CachedGenerator) answerReservation(res *reservation) PutRejectReason {
	defer close(res.done)
	ctx := g.observer.PaddingStarted(context.Background(), TriggerReserve)
	r := round{trigger: TriggerReserve, began: time.Now()}
	r.report = PaddingReport{Trigger: TriggerReserve, Discarded: g.discardStale()}
	g.takeFromRing(res)
	r.tail = g.tail.Load()
	// The lanes' next IDs are above every ID the ring holds: reserving
	// them while the ring keeps some (the small takes' reserve, left while
	// throttled) would issue those lower IDs after higher ones, and an
	// instance's IDs strictly increase. The rest then comes through the
	// ring, after the reserve. When the lanes have room (the wall clock's
	// second turned since the bound was met, and the generator still
	// counts as throttled), this round writes it to the ring, as the
	// padding round after it would, and the reservation takes it now:
	// waiting for that round cost it up to a second when its taker missed
	// the round's end.
	if res.got < res.want && g.cursor.Load() < r.tail && !g.pastAheadBound(g.clock.Now().Unix()) {
		g.fill(&r)
		g.takeFromRing(res)
	}
	if g.cursor.Load() >= r.tail {
		r.sink = res
		g.fill(&r)
	}
	g.padding.reserved += res.got
	_, reason := g.finishRound(ctx, &r)
	res.next = *g.refilled.Load()
	// The ring gave what it held: refill it for the small takes.
	g.requestPadding()
	return reason
}

// pastAheadBound tells whether padding's logical second runs further
// ahead of now (Unix seconds) than MaxAhead allows: chooseLane stops a
// round there, and a reservation's answer does not refill the ring.
func (g *CachedGenerator) pastAheadBound(now int64) bool {
	return g.maxAhead >= 0 && g.padding.nextSecond-now > g.maxAhead
}

// takeFromRing moves the IDs the ring holds, up to what res still
// wants, into res, as a taker would take them (the cursor moves by
// compare-and-swap; only padding writes slots, so they stay as read).
// While throttled it leaves the small takes' reserve.
func (g *CachedGenerator) takeFromRing(res *reservation) {
	for {
		c, t := g.cursor.Load(), g.tail.Load()
		if g.isThrottled() {
			t -= min(t-min(c, t), g.bulkReserve(int(min(res.want, 1<<62))))
		}
		if c >= t {
			return
		}
		k := min(t-c, res.want-res.got)
		if !g.cursor.CompareAndSwap(c, c+k) {
			continue
		}
		start := c & g.mask
		first := min(k, g.size-start) // the part before the ring wraps
		res.addIDs(g.slots[start : start+first])
		res.addIDs(g.slots[:k-first])
		forEachWord(start, k, g.size, func(w int, bits uint64) { g.canTake[w].And(^bits) })
		return
	}
}

// reserveRun hands the lane's next IDs of the logical second, up to free
// of them, to the round's reservation instead of writing them to slots.
func (g *CachedGenerator) reserveRun(r *round, base uint64, ln *lane, free uint64) {
	p := &g.padding
	n := min(free, g.layout.MaxSequence()+1-p.nextSeq)
	r.sink.add(base|p.nextSeq, n)
	g.advance(r, ln, n)
}
