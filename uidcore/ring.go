package uidcore

import (
	"context"
)

// Next takes one ID from the ring. On an empty ring it waits up to
// TakeWait (bounded by ctx) for padding, then applies the take policy,
// which by default returns an error wrapping ErrBufferEmpty.
func (g *CachedGenerator) Next(ctx context.Context) (uint64, error) {
	for {
		if _, err := g.claim.Until(); err != nil {
			return 0, g.rejectTake(ctx, 1, err)
		}
		c := g.cursor.Load()
		t := g.tail.Load()
		if c >= t {
			if err := g.awaitPadding(ctx, 1); err != nil {
				return 0, err
			}
			continue
		}
		if !g.cursor.CompareAndSwap(c, c+1) {
			continue
		}
		i := c & g.mask
		id := g.slots[i]
		g.canTake[i>>6].And(^(1 << (i & 63)))
		if t-c <= g.threshold.Load() {
			g.requestPadding()
			if g.isThrottled() {
				g.smallTaken.Add(1)
			}
		}
		return id, nil
	}
}

// NextN fills dst with new IDs, in increasing order, taking as many as the
// ring holds with one step of the cursor. When the ring runs dry it waits
// or fails as Next does; it then returns how many IDs it did put in dst
// (those are valid and issued) with the error.
//
// While demand exceeds what the generator sustains (padding is held at
// MaxAhead), a NextN of more than SmallTake IDs leaves a small reserve in
// the ring, so that single IDs and small batches are still served at once
// while bulk takes wait for the next second's IDs.
func (g *CachedGenerator) NextN(ctx context.Context, dst []uint64) (int, error) {
	return g.take(ctx, dst, true)
}

// TryNextN is NextN without waiting: it fills dst if the ring holds
// len(dst) IDs now, and takes none otherwise (a partial take would be
// lost if the rest never came). It returns how many it took; the error is
// nil unless the claim is lost or the generator closed, so that a caller
// can wait elsewhere for the whole batch.
func (g *CachedGenerator) TryNextN(dst []uint64) (int, error) {
	return g.take(context.Background(), dst, false)
}

func (g *CachedGenerator) take(ctx context.Context, dst []uint64, wait bool) (int, error) {
	filled := 0
	for filled < len(dst) {
		if _, err := g.claim.Until(); err != nil {
			return filled, g.rejectTake(ctx, len(dst)-filled, err)
		}
		c := g.cursor.Load()
		t := g.tail.Load()
		if len(dst) > SmallTake && g.isThrottled() {
			t -= min(t-min(c, t), g.bulkReserve(len(dst)))
		}
		if !wait && t-min(c, t) < uint64(len(dst)-filled) {
			// All or nothing: a partial take would be dropped if the rest
			// never came.
			if c >= t {
				select {
				case <-g.done:
					return filled, ErrClosed
				default:
				}
			}
			g.requestPadding()
			return filled, nil
		}
		if c >= t {
			if !wait {
				select {
				case <-g.done:
					if g.cursor.Load() >= g.tail.Load() {
						return filled, ErrClosed
					}
				default:
				}
				g.requestPadding()
				return filled, nil
			}
			if err := g.awaitPadding(ctx, len(dst)-filled); err != nil {
				return filled, err
			}
			continue
		}
		k := min(t-c, uint64(len(dst)-filled))
		if !g.cursor.CompareAndSwap(c, c+k) {
			continue
		}
		start := c & g.mask
		first := min(k, g.size-start) // the part before the ring wraps
		copy(dst[filled:], g.slots[start:start+first])
		copy(dst[filled+int(first):], g.slots[:k-first])
		forEachWord(start, k, g.size, func(w int, bits uint64) { g.canTake[w].And(^bits) })
		filled += int(k)
		if t-c-k < g.threshold.Load() {
			g.requestPadding()
			if len(dst) <= SmallTake && g.isThrottled() {
				g.smallTaken.Add(k)
			}
		}
	}
	return filled, nil
}

// forEachWord calls fn for each 64-bit word of the can-take bitmap that
// the n slots from start (wrapping at size) touch, with their bits.
func forEachWord(start, n, size uint64, fn func(word int, bits uint64)) {
	for n > 0 {
		k, m := wordRun(start, n, size)
		fn(int(start>>6), m)
		n -= k
		start = (start + k) & (size - 1)
	}
}

// wordRun is the part of the n slots from start that the word of the
// can-take bitmap holding start covers: k slots (up to the word's end or
// the ring's, size), and their bits, which are contiguous. (For k = 64,
// 1<<k is 0 in Go, so the bits are all ones.)
func wordRun(start, n, size uint64) (k, bits uint64) {
	k = min(n, 64-start&63, size-start)
	return k, (1<<k - 1) << (start & 63)
}

func (g *CachedGenerator) requestPadding() {
	if g.wantPad.Load() || !g.wantPad.CompareAndSwap(false, true) {
		return
	}
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// awaitPadding is called by a take that met an empty ring: it returns nil
// when IDs may have arrived, or the rejection error.
func (g *CachedGenerator) awaitPadding(ctx context.Context, wanted int) error {
	select {
	case <-g.done:
		return g.rejectTake(ctx, wanted, ErrClosed)
	default:
	}
	round := *g.roundEnd.Load()
	g.requestPadding()
	if g.takeWait <= 0 {
		return g.rejectTake(ctx, wanted, g.emptyCause())
	}
	if g.ready(wanted) {
		return nil
	}
	deadline, cancel := context.WithTimeout(ctx, g.takeWait)
	defer cancel()
	for {
		select {
		case <-round:
			if g.ready(wanted) {
				return nil
			}
			round = *g.roundEnd.Load()
			g.requestPadding()
		case <-g.done:
			return g.rejectTake(ctx, wanted, ErrClosed)
		case <-deadline.Done():
			return g.rejectTake(ctx, wanted, g.emptyCause())
		}
	}
}

// ready reports whether a take of wanted IDs would find some: a bulk take
// leaves the small takes' reserve while the generator is throttled.
func (g *CachedGenerator) ready(wanted int) bool {
	c, t := g.cursor.Load(), g.tail.Load()
	if wanted > SmallTake && g.isThrottled() {
		return c+g.bulkReserve(wanted) < t
	}
	return c < t
}

// isThrottled tells whether demand meets what the lanes sustain: padding
// met the ahead bound within the last second (sticky across the refill of
// each new second), or the ring already reaches it, so that what it holds
// is all there is until the wall clock's next second. The second half
// matters on a loaded machine: the round that would meet the bound may run
// late (after the once-a-second reset, or not before a burst), and bulk
// takes then emptied the ring, reserve included, and small takes waited
// up to a second.
func (g *CachedGenerator) isThrottled() bool {
	return g.throttled.Load() || (g.maxAhead >= 0 && g.secondsAhead() >= g.maxAhead)
}

// bulkReserve is what a bulk take of n IDs leaves for small takes: the
// reserve, but never so much that a take fitting in one second of the
// lanes held could not be served in a second.
func (g *CachedGenerator) bulkReserve(n int) uint64 {
	perSecond := uint64(len(*g.lanes.ids.Load())) * (g.layout.MaxSequence() + 1)
	return min(g.reserve.Load(), perSecond-min(perSecond, uint64(n)))
}

// emptyCause explains an empty ring: ErrBufferEmpty, wrapping why padding
// last stopped short when it did.
func (g *CachedGenerator) emptyCause() error {
	if p := g.stopErr.Load(); p != nil {
		return &EmptyError{Cause: *p}
	}
	return ErrBufferEmpty
}

func (g *CachedGenerator) rejectTake(ctx context.Context, wanted int, err error) error {
	g.takeRejections.Add(1)
	r := TakeRejection{Wanted: wanted, Err: err}
	g.observer.TakeRejected(ctx, r)
	if g.onTake != nil {
		return g.onTake(ctx, r)
	}
	return err
}
