package uidcore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// ErrBufferEmpty is returned (possibly wrapping the reason padding stopped,
// such as ErrClaimLost or ErrTimeExhausted) when a take finds the ring
// buffer empty and may not wait.
var ErrBufferEmpty = errors.New("uidcore: ring buffer empty")

// ErrClosed is returned by a CachedGenerator after Close.
var ErrClosed = errors.New("uidcore: generator closed")

// Defaults of CachedOptions.
const (
	DefaultBoostPower    = 3
	DefaultPaddingFactor = 50
	DefaultMaxAhead      = 60 * time.Second
	DefaultMaxLag        = 5 * time.Second
	// NoLagBound keeps IDs in the ring however old they get.
	NoLagBound time.Duration = -1
	// NoAheadBound lets the logical second run ahead of the wall clock
	// without limit (still within the claim's reservation).
	NoAheadBound time.Duration = -1
	// maxRingSlots caps the ring at 128 MiB of slots.
	maxRingSlots = 1 << 24
	// publishChunk is how many slots padding writes before it makes them
	// visible to takers, so takers need not wait for a long round.
	publishChunk = 8192
)

// CachedOptions configure a CachedGenerator. Zero values take defaults.
type CachedOptions struct {
	Layout Layout // zero value: DefaultLayout()
	Claim  Claim  // required
	Clock  Clock  // zero value: SystemClock

	// BoostPower sizes the ring at (MaxSequence+1) << BoostPower slots.
	// Zero means DefaultBoostPower (3); use a negative value for 0.
	BoostPower int
	// PaddingFactor is the percentage of the ring under which available
	// IDs trigger padding (default 50).
	PaddingFactor int
	// ScheduleInterval pads on a timer as well as on demand (0 = off).
	ScheduleInterval time.Duration
	// MaxAhead bounds how far the logical second may run ahead of the wall
	// clock (default 60s; NoAheadBound for none). At the bound padding
	// pauses and takes drain the ring: back-pressure instead of burning
	// the runway and drifting away from real time.
	MaxAhead time.Duration
	// TakeWait lets a take on an empty ring wait up to this long for
	// padding instead of failing at once (0 = fail at once).
	TakeWait time.Duration
	// MaxLag bounds how far the seconds of IDs waiting in the ring may fall
	// behind the wall clock (default 5s; NoLagBound for none). At low load
	// the ring would otherwise hand out IDs stamped with the second it was
	// filled in, for as long as it takes to drain it (UidGenerator's IDs
	// lag this way). Padding checks once a second and discards IDs older
	// than the bound before it refills; they are never issued.
	MaxLag time.Duration

	Observer     Observer         // nil: NopObserver
	OnPutReject  PutRejectPolicy  // nil: count and drop
	OnTakeReject TakeRejectPolicy // nil: return r.Err
}

// CachedGenerator hands out IDs from a ring buffer that one padding
// goroutine keeps filled ahead of demand. Next and NextN are safe for
// concurrent use and lock-free.
//
// Takers claim slots by advancing the cursor with compare-and-swap, so two
// takers can never claim the same slot, even at the empty edge
// (UidGenerator's take can hand one ID to two takers there). Each slot has
// a can-take bit; padding writes a slot only when its bit shows the
// previous taker has finished reading it.
type CachedGenerator struct {
	layout    Layout
	claim     Claim
	clock     Clock
	workerID  uint64
	size      uint64
	mask      uint64
	threshold uint64 // padding is requested when fewer IDs remain
	maxAhead  int64  // seconds; <0 = unbounded
	maxLag    int64  // seconds; <0 = unbounded
	schedule  time.Duration
	takeWait  time.Duration
	observer  Observer
	onPut     PutRejectPolicy
	onTake    TakeRejectPolicy

	slots    []uint64
	canTake  []atomic.Uint64 // one bit per slot: 1 = can take, 0 = can put
	_        [64]byte
	tail     atomic.Uint64 // next slot padding writes; only padding stores it
	_        [56]byte
	cursor   atomic.Uint64 // next slot a taker claims
	_        [56]byte
	wantPad  atomic.Bool
	stopErr  atomic.Pointer[error] // why the last padding round stopped short, nil when it filled the ring
	roundEnd atomic.Pointer[chan struct{}]

	// Owned by the padding goroutine.
	nextSecond int64
	nextSeq    uint64

	logicalSecond  atomic.Int64 // for State, written by padding
	paddingRounds  atomic.Uint64
	putRejections  atomic.Uint64
	takeRejections atomic.Uint64
	discarded      atomic.Uint64

	wake      chan struct{}
	forced    chan chan PaddingReport
	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// NewCached builds the ring, fills it once (the start-up padding round) and
// starts the padding goroutine. Close it to stop padding.
func NewCached(opts CachedOptions) (*CachedGenerator, error) {
	if err := checkBasics(&opts.Layout, opts.Claim, &opts.Clock); err != nil {
		return nil, err
	}
	switch {
	case opts.BoostPower == 0:
		opts.BoostPower = DefaultBoostPower
	case opts.BoostPower < 0:
		opts.BoostPower = 0
	}
	perSecond := opts.Layout.MaxSequence() + 1
	if opts.BoostPower > 24 || perSecond > maxRingSlots>>opts.BoostPower {
		return nil, fmt.Errorf("uidcore: ring of %d<<%d slots is larger than %d: lower BoostPower or SeqBits", perSecond, opts.BoostPower, maxRingSlots)
	}
	size := perSecond << opts.BoostPower
	if size < 64 {
		// The can-take bits are kept in 64-bit words; a smaller ring would
		// share a word with itself.
		size = 64
	}
	if opts.PaddingFactor == 0 {
		opts.PaddingFactor = DefaultPaddingFactor
	}
	if opts.PaddingFactor < 1 || opts.PaddingFactor > 100 {
		return nil, fmt.Errorf("uidcore: PaddingFactor %d is outside 1..100", opts.PaddingFactor)
	}
	if opts.MaxAhead == 0 {
		opts.MaxAhead = DefaultMaxAhead
	}
	if opts.MaxLag == 0 {
		opts.MaxLag = DefaultMaxLag
	}
	if opts.ScheduleInterval < 0 || opts.TakeWait < 0 {
		return nil, errors.New("uidcore: ScheduleInterval and TakeWait must not be negative")
	}
	if opts.Observer == nil {
		opts.Observer = NopObserver{}
	}
	g := &CachedGenerator{
		layout:    opts.Layout,
		claim:     opts.Claim,
		clock:     opts.Clock,
		workerID:  opts.Claim.WorkerID(),
		size:      size,
		mask:      size - 1,
		threshold: size * uint64(opts.PaddingFactor) / 100,
		maxAhead:  -1,
		maxLag:    -1,
		schedule:  opts.ScheduleInterval,
		takeWait:  opts.TakeWait,
		observer:  opts.Observer,
		onPut:     opts.OnPutReject,
		onTake:    opts.OnTakeReject,
		slots:     make([]uint64, size),
		canTake:   make([]atomic.Uint64, size/64),
		wake:      make(chan struct{}, 1),
		forced:    make(chan chan PaddingReport),
		done:      make(chan struct{}),
	}
	if opts.MaxAhead > 0 {
		g.maxAhead = int64(opts.MaxAhead / time.Second)
	}
	if opts.MaxLag > 0 {
		g.maxLag = int64(max(opts.MaxLag/time.Second, 1))
	}
	ch := make(chan struct{})
	g.roundEnd.Store(&ch)
	// Start strictly after the seconds an earlier holder of the worker ID
	// may have used, and not before the clock.
	g.nextSecond = max(g.clock.Now().Unix(), opts.Claim.After()+1)
	g.logicalSecond.Store(g.nextSecond)
	g.pad(TriggerStartup)
	g.wg.Add(1)
	go g.paddingLoop()
	return g, nil
}

// Layout returns the generator's layout.
func (g *CachedGenerator) Layout() Layout { return g.layout }

// WorkerID returns the worker ID of the generator's claim.
func (g *CachedGenerator) WorkerID() uint64 { return g.workerID }

// Size is the number of slots in the ring.
func (g *CachedGenerator) Size() int { return int(g.size) }

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
		if t-c <= g.threshold {
			g.requestPadding()
		}
		return id, nil
	}
}

// NextN fills dst with new IDs, in increasing order, taking as many as the
// ring holds with one step of the cursor. When the ring runs dry it waits
// or fails as Next does; it then returns how many IDs it did put in dst
// (those are valid and issued) with the error.
func (g *CachedGenerator) NextN(ctx context.Context, dst []uint64) (int, error) {
	filled := 0
	for filled < len(dst) {
		if _, err := g.claim.Until(); err != nil {
			return filled, g.rejectTake(ctx, len(dst)-filled, err)
		}
		c := g.cursor.Load()
		t := g.tail.Load()
		if c >= t {
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
		if t-c-k < g.threshold {
			g.requestPadding()
		}
	}
	return filled, nil
}

// forEachWord calls fn for each 64-bit word of the can-take bitmap that
// the n slots from start (wrapping at size) touch, with their bits.
func forEachWord(start, n, size uint64, fn func(word int, bits uint64)) {
	for n > 0 {
		off := start & 63
		k := min(n, 64-off, size-start)
		var m uint64
		if k == 64 {
			m = ^uint64(0)
		} else {
			m = (1<<k - 1) << off
		}
		fn(int(start>>6), m)
		n -= k
		start = (start + k) & (size - 1)
	}
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
	if g.cursor.Load() < g.tail.Load() {
		return nil
	}
	deadline, cancel := context.WithTimeout(ctx, g.takeWait)
	defer cancel()
	for {
		select {
		case <-round:
			if g.cursor.Load() < g.tail.Load() {
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

// emptyCause explains an empty ring: ErrBufferEmpty, wrapping why padding
// last stopped short when it did.
func (g *CachedGenerator) emptyCause() error {
	if p := g.stopErr.Load(); p != nil {
		return fmt.Errorf("%w: %w", ErrBufferEmpty, *p)
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

// Pad runs a padding round now, even while padding backs off, and returns
// its report (trigger TriggerForced). It is for operators and tests;
// padding runs on its own.
func (g *CachedGenerator) Pad(ctx context.Context) (PaddingReport, error) {
	reply := make(chan PaddingReport, 1)
	select {
	case g.forced <- reply:
	case <-g.done:
		return PaddingReport{}, ErrClosed
	case <-ctx.Done():
		return PaddingReport{}, ctx.Err()
	}
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		return PaddingReport{}, ctx.Err()
	}
}

func (g *CachedGenerator) paddingLoop() {
	defer g.wg.Done()
	var tick, freshness <-chan time.Time
	if g.schedule > 0 {
		t := time.NewTicker(g.schedule)
		defer t.Stop()
		tick = t.C
	}
	if g.maxLag >= 0 {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		freshness = t.C
	}
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
		case <-freshness:
			if !g.hasStale() {
				continue
			}
			trigger = TriggerFreshness
		case <-backoff.C:
			backingOff = false
			continue
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

// backoffAfter is how long padding rests after a round that stopped for
// reason, so that takers hitting an empty ring do not spin it.
func (g *CachedGenerator) backoffAfter(reason PutRejectReason) time.Duration {
	switch reason {
	case RejectAheadBound:
		// Nothing changes before the wall clock's next second.
		return max(untilNextSecond(g.clock.Now()), 5*time.Millisecond)
	case RejectNotReserved, RejectSlotBusy:
		return 5 * time.Millisecond
	case RejectExhausted:
		return time.Second
	}
	return 0
}

// pad fills the ring from the logical second onwards until it is full or a
// bound stops it. Only the padding goroutine (and NewCached before it
// starts) calls it.
func (g *CachedGenerator) pad(trigger PaddingTrigger) (PaddingReport, PutRejectReason) {
	ctx := g.observer.PaddingStarted(context.Background(), trigger)
	g.wantPad.Store(false)
	began := time.Now()
	report := PaddingReport{Trigger: trigger, Discarded: g.discardStale()}
	maxSeq := g.layout.MaxSequence()
	tail := g.tail.Load()
	var stop *PutRejection
	var now int64
	for stop == nil {
		free := g.size - (tail - g.cursor.Load())
		if free == 0 {
			break
		}
		if g.nextSeq > maxSeq {
			g.nextSecond, g.nextSeq = g.nextSecond+1, 0
		}
		now = g.clock.Now().Unix()
		if now > g.nextSecond {
			// Re-sync: at low load the wall clock overtakes the logical
			// second, and IDs should carry the real time.
			g.nextSecond, g.nextSeq = now, 0
		}
		base, err := g.layout.secondBase(g.nextSecond, g.workerID)
		if stop = g.checkSecond(now, err); stop != nil {
			break
		}
		n := min(free, maxSeq+1-g.nextSeq, publishChunk)
		var written uint64
		forEachWord(tail&g.mask, n, g.size, func(w int, want uint64) {
			if stop != nil {
				return
			}
			if g.canTake[w].Load()&want != 0 {
				// A taker claimed the slot a lap ago and is still reading it.
				stop = &PutRejection{Reason: RejectSlotBusy, Second: g.nextSecond}
				return
			}
			// The bits of one call are contiguous: fill them as a run.
			from := w<<6 + bits.TrailingZeros64(want)
			run := g.slots[from : from+bits.OnesCount64(want)]
			seq := base | (g.nextSeq + written)
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
			report.FirstSecond = g.nextSecond
		}
		report.LastSecond = g.nextSecond
		report.Added += int(written)
		g.nextSeq += written
		tail += written
		g.tail.Store(tail)
	}
	g.logicalSecond.Store(g.nextSecond)
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
			cause = fmt.Errorf("uidcore: padding stopped: %s at second %d", stop.Reason, stop.Second)
		}
		g.stopErr.Store(&cause)
	} else {
		g.stopErr.Store(nil)
	}
	g.paddingRounds.Add(1)
	report.SecondsAhead = g.nextSecond - g.clock.Now().Unix()
	report.Duration = time.Since(began)
	report.Available = g.tail.Load() - g.cursor.Load()
	g.observer.PaddingFinished(ctx, report)
	next := make(chan struct{})
	close(*g.roundEnd.Swap(&next))
	return report, reason
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

// checkSecond returns why padding may not fill the logical second, or nil.
func (g *CachedGenerator) checkSecond(now int64, baseErr error) *PutRejection {
	sec := g.nextSecond
	if baseErr != nil {
		return &PutRejection{Reason: RejectExhausted, Second: sec, Err: baseErr}
	}
	if g.maxAhead >= 0 && sec-now > g.maxAhead {
		return &PutRejection{Reason: RejectAheadBound, Second: sec,
			Err: fmt.Errorf("uidcore: logical second is %ds ahead of the wall clock, the bound is %ds", sec-now, g.maxAhead)}
	}
	until, err := g.claim.Until()
	if err != nil {
		return &PutRejection{Reason: RejectNotReserved, Second: sec, Err: err}
	}
	if sec > until {
		if r, ok := g.claim.(Reserver); ok {
			r.Reserve(sec)
		}
		return &PutRejection{Reason: RejectNotReserved, Second: sec, Err: fmt.Errorf("%w: second %d > %d", ErrNotReserved, sec, until)}
	}
	return nil
}

// State is a snapshot of a CachedGenerator for monitoring.
type State struct {
	WorkerID       uint64
	Size           uint64
	Tail           uint64 // slots ever filled
	Cursor         uint64 // slots ever taken
	Available      uint64 // IDs ready to take
	LogicalSecond  int64  // unix second padding fills next
	SecondsAhead   int64  // logical second minus the wall clock's (negative when behind)
	PaddingRounds  uint64
	PutRejections  uint64
	TakeRejections uint64
	Discarded      uint64 // IDs dropped for lagging the wall clock by more than MaxLag
}

// State returns a snapshot; its fields are read one by one, not atomically
// together.
func (g *CachedGenerator) State() State {
	cursor := g.cursor.Load()
	tail := g.tail.Load()
	logical := g.logicalSecond.Load()
	return State{
		WorkerID:       g.workerID,
		Size:           g.size,
		Tail:           tail,
		Cursor:         cursor,
		Available:      tail - min(cursor, tail),
		LogicalSecond:  logical,
		SecondsAhead:   logical - g.clock.Now().Unix(),
		PaddingRounds:  g.paddingRounds.Load(),
		PutRejections:  g.putRejections.Load(),
		TakeRejections: g.takeRejections.Load(),
		Discarded:      g.discarded.Load(),
	}
}

// Close stops padding and waits for the padding goroutine to end. Takes
// after Close drain what is left in the ring, then fail with ErrClosed.
// A claim that implements Retirer learns the last second padding filled:
// no ID of this generator, taken before or after Close, is later.
func (g *CachedGenerator) Close() error {
	first := false
	g.closeOnce.Do(func() {
		close(g.done)
		first = true
	})
	g.wg.Wait()
	if r, ok := g.claim.(Retirer); ok && first {
		r.Retire(g.logicalSecond.Load())
	}
	return nil
}
