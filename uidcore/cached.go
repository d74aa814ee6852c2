package uidcore

import (
	"cmp"
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
	// DefaultRingSeconds sizes the ring at eight seconds of one lane's IDs
	// (UidGenerator's boostPower 3), capped by DefaultRingMemory.
	DefaultRingSeconds   = 8
	DefaultPaddingFactor = 50
	// DefaultMaxAhead keeps IDs within two seconds of real time: demand
	// beyond what the lanes sustain is met by claiming more lanes, not by
	// borrowing the future.
	DefaultMaxAhead = 2 * time.Second
	// DefaultMaxLag: an ID carries the current second or the one before.
	DefaultMaxLag = time.Second
	// DefaultRingMemory bounds the ring: 8 MiB is 1,048,576 IDs.
	DefaultRingMemory = 8 << 20
	// DefaultMaxLanes caps the worker IDs one generator holds: 16 lanes of
	// the default layout sustain 67 M IDs/s, above what NATS carries on
	// one host, and leave 1,008 of 1,024 worker IDs to the rest of the
	// fleet.
	DefaultMaxLanes = 16
	// DefaultLaneIdle is how long an extra lane goes unused before it is
	// given back.
	DefaultLaneIdle = 30 * time.Second
	// SmallTake is the largest take that is never made to wait behind bulk
	// takes: while the generator runs at its capacity, larger NextN calls
	// leave a reserve in the ring for takes of up to SmallTake IDs.
	SmallTake = 64
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
	// fillFloor is the least padding keeps ready (the whole ring when it
	// is smaller): enough for a burst while the fill target catches up
	// with demand, small enough that refreshing it every second is free.
	fillFloor = 1 << 16
)

// CachedOptions configure a CachedGenerator. Zero values take defaults.
type CachedOptions struct {
	Layout Layout // zero value: DefaultLayout()
	Claim  Claim  // required: the first lane, which the caller owns
	Clock  Clock  // zero value: SystemClock

	// Lanes claims extra worker IDs ("lanes") when demand exceeds what the
	// lanes held sustain (2^SeqBits IDs per second each) without running
	// ahead of the clock. nil: the generator has one lane, Claim. Extra
	// lanes are the generator's own: it gives them back when they have
	// been idle for LaneIdle, and on Close.
	Lanes Assigner
	// MaxLanes caps the lanes held, Claim included (default
	// DefaultMaxLanes; 1 with no Lanes).
	MaxLanes int
	// LaneIdle is how long an extra lane may go unused before it is given
	// back (default DefaultLaneIdle).
	LaneIdle time.Duration

	// RingSeconds sizes the ring at this many seconds of one lane's IDs,
	// (MaxSequence+1) × RingSeconds slots rounded down to a power of two,
	// capped by RingMemory; 1..2^24. Zero means DefaultRingSeconds (8).
	// UidGenerator's boostPower b is RingSeconds 2^b.
	RingSeconds int
	// RingMemory caps the ring's slots at this many bytes (8 per ID;
	// default DefaultRingMemory, 8 MiB). Padding fills only what demand
	// needs of it (twice the IDs taken in the last second, at least
	// 65,536), so an idle instance keeps little to refresh.
	RingMemory int
	// PaddingFactor is the percentage of the fill target under which
	// available IDs trigger padding (default 50).
	PaddingFactor int
	// ScheduleInterval pads on a timer as well as on demand (0 = off).
	ScheduleInterval time.Duration
	// MaxAhead bounds how far the logical second may run ahead of the wall
	// clock (default 2s; NoAheadBound for none). At the bound padding
	// pauses and takes drain the ring: back-pressure instead of burning
	// the runway and drifting away from real time.
	MaxAhead time.Duration
	// TakeWait lets a take on an empty ring wait up to this long for
	// padding instead of failing at once (0 = fail at once).
	TakeWait time.Duration
	// MaxLag bounds how far the seconds of IDs waiting in the ring may fall
	// behind the wall clock (default 1s; NoLagBound for none). At low load
	// the ring would otherwise hand out IDs stamped with the second it was
	// filled in, for as long as it takes to drain it (UidGenerator's IDs
	// lag this way). Padding checks just after each second of the wall
	// clock begins and discards IDs older than the bound before it
	// refills; they are never issued.
	MaxLag time.Duration

	Observer     Observer         // nil: NopObserver; may also implement LaneObserver
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
//
// Padding fills each second lane by lane, in ascending worker-ID order, so
// the IDs of one generator strictly increase whatever lanes it holds.
type CachedGenerator struct {
	layout    Layout
	claim     Claim
	clock     Clock
	workerID  uint64
	size      uint64
	mask      uint64
	factor    uint64
	threshold atomic.Uint64 // padding is requested when fewer IDs remain
	reserve   atomic.Uint64 // what bulk takes leave for small ones while throttled
	maxAhead  int64         // seconds; <0 = unbounded
	maxLag    int64         // seconds; <0 = unbounded
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
	// throttled is set while padding is held at MaxAhead: demand exceeds
	// what the lanes sustain.
	throttled atomic.Bool
	// smallTaken counts the IDs small takes got while throttled, so the
	// reserve follows their demand.
	smallTaken atomic.Uint64

	// Owned by the padding goroutine.
	nextSecond int64
	laneIdx    int // the lane of nextSecond padding fills
	nextSeq    uint64
	dirty      bool // padding wrote some ID of nextSecond
	target     uint64
	smallRate  uint64 // IDs small takes got in the last second while throttled
	hitBound   bool   // a round stopped at MaxAhead since the last second began
	lastCursor uint64
	// lastDiscarded is discarded at the last once-a-second look.
	lastDiscarded uint64
	targetNow     atomic.Uint64 // target, for State
	lanes         laneSet

	logicalSecond  atomic.Int64 // for State, written by padding
	lastFilled     atomic.Int64 // second of the newest ID in the ring
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
	size, err := ringSize(opts)
	if err != nil {
		return nil, err
	}
	if opts.PaddingFactor == 0 {
		opts.PaddingFactor = DefaultPaddingFactor
	}
	if opts.PaddingFactor < 1 || opts.PaddingFactor > 100 {
		return nil, &SettingError{Field: "PaddingFactor", Reason: fmt.Sprintf("%d is outside 1..100", opts.PaddingFactor)}
	}
	if opts.MaxAhead == 0 {
		opts.MaxAhead = DefaultMaxAhead
	}
	if opts.MaxLag == 0 {
		opts.MaxLag = DefaultMaxLag
	}
	for _, f := range []struct {
		field    string
		negative bool
	}{{"ScheduleInterval", opts.ScheduleInterval < 0}, {"TakeWait", opts.TakeWait < 0}, {"LaneIdle", opts.LaneIdle < 0}, {"MaxLanes", opts.MaxLanes < 0}} {
		if f.negative {
			return nil, &SettingError{Field: f.field, Reason: "must not be negative"}
		}
	}
	if opts.Observer == nil {
		opts.Observer = NopObserver{}
	}
	g := &CachedGenerator{
		layout:   opts.Layout,
		claim:    opts.Claim,
		clock:    opts.Clock,
		workerID: opts.Claim.WorkerID(),
		size:     size,
		mask:     size - 1,
		factor:   uint64(opts.PaddingFactor),
		maxAhead: -1,
		maxLag:   -1,
		schedule: opts.ScheduleInterval,
		takeWait: opts.TakeWait,
		observer: opts.Observer,
		onPut:    opts.OnPutReject,
		onTake:   opts.OnTakeReject,
		slots:    make([]uint64, size),
		canTake:  make([]atomic.Uint64, size/64),
		wake:     make(chan struct{}, 1),
		forced:   make(chan chan PaddingReport),
		done:     make(chan struct{}),
	}
	if opts.MaxAhead > 0 {
		g.maxAhead = int64(opts.MaxAhead / time.Second)
	}
	if opts.MaxLag > 0 {
		g.maxLag = int64(max(opts.MaxLag/time.Second, 1))
	}
	g.lanes.init(g, opts)
	g.setTarget(min(size, fillFloor))
	ch := make(chan struct{})
	g.roundEnd.Store(&ch)
	// Lanes skip the seconds an earlier holder of their worker ID may have
	// used (Claim.After); the generator itself starts at the clock.
	g.nextSecond = g.clock.Now().Unix()
	g.logicalSecond.Store(g.nextSecond)
	g.lastFilled.Store(g.nextSecond - 1)
	g.pad(TriggerStartup)
	g.wg.Add(1)
	go g.paddingLoop()
	g.lanes.start()
	return g, nil
}

// ringSize is (MaxSequence+1) × RingSeconds slots, capped by RingMemory,
// a power of two and at least 64 (the can-take bits are kept in 64-bit
// words; a smaller ring would share a word with itself).
func ringSize(opts CachedOptions) (uint64, error) {
	seconds := cmp.Or(opts.RingSeconds, DefaultRingSeconds)
	if seconds < 1 || seconds > 1<<24 {
		return 0, &SettingError{Field: "RingSeconds", Reason: fmt.Sprintf("%d is outside 1..%d", seconds, 1<<24)}
	}
	boost := bits.Len64(uint64(seconds)) - 1 // a power of two of seconds
	if opts.RingMemory == 0 {
		opts.RingMemory = DefaultRingMemory
	}
	if opts.RingMemory < 64*8 || opts.RingMemory > maxRingSlots*8 {
		return 0, &SettingError{Field: "RingMemory", Reason: fmt.Sprintf("%d bytes is outside %d..%d", opts.RingMemory, 64*8, maxRingSlots*8)}
	}
	byMemory := uint64(1) << (bits.Len64(uint64(opts.RingMemory/8)) - 1) // a power of two
	perSecond := opts.Layout.MaxSequence() + 1
	size := byMemory
	if bits.Len64(perSecond)+boost <= 63 && perSecond<<boost < size {
		size = perSecond << boost
	}
	return max(size, 64), nil
}

// setTarget sets how many IDs padding keeps ready, and the thresholds that
// follow from it.
func (g *CachedGenerator) setTarget(target uint64) {
	g.target = target
	g.targetNow.Store(target)
	g.threshold.Store(max(target*g.factor/100, 1))
	// Small takes need little, but all of it: the reserve is twice what
	// they took in the last second, at least a little, at most half the
	// ring's fill.
	base := min(target/8, fillFloor/4, (g.layout.MaxSequence()+1)/8)
	g.reserve.Store(min(max(base, 2*g.smallRate), target/2))
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
	taken := (c - g.lastCursor) - (dropped - g.lastDiscarded)
	g.lastCursor, g.lastDiscarded = c, dropped
	g.smallRate = g.smallTaken.Swap(0)
	g.throttled.Store(g.hitBound)
	g.hitBound = false
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
	if g.tail.Load() == g.cursor.Load() && trigger != TriggerStartup && g.target < g.size {
		// Takers emptied the ring before padding came: demand is rising
		// faster than the once-a-second estimate.
		g.setTarget(min(g.size, 2*g.target))
	}
	maxSeq := g.layout.MaxSequence()
	tail := g.tail.Load()
	var stop *PutRejection
	var now int64
	// Of the current second, in this round: lanes skipped for seconds
	// their previous holder may have used, and why the last other skipped
	// lane could not serve. (Whether any lane wrote to it, in any round,
	// is g.dirty.)
	var afterSkips int
	var invalid error
	for stop == nil {
		if !g.dirty && g.lanes.hasPending() {
			// Nothing of this second is written yet: new lanes may join it.
			g.lanes.sync()
			g.laneIdx, g.nextSeq = 0, 0
			afterSkips, invalid = 0, nil
		}
		inRing := tail - g.cursor.Load()
		if inRing >= g.target {
			break
		}
		free := g.target - inRing
		now = g.clock.Now().Unix()
		if now > g.nextSecond {
			// Re-sync: at low load the wall clock overtakes the logical
			// second, and IDs should carry the real time.
			g.startSecond(now)
			afterSkips, invalid = 0, nil
		}
		if g.laneIdx >= g.lanes.len() {
			if !g.dirty && afterSkips == 0 && invalid != nil {
				// No lane may fill any second now (claims lost): wait
				// rather than burn seconds, and look at the lanes again
				// from the first. Only when nothing of this second was
				// written, by this round or an earlier one: a lane that
				// filled part of it must never fill it again.
				stop = &PutRejection{Reason: RejectNotReserved, Second: g.nextSecond, Err: invalid}
				g.laneIdx, g.nextSeq = 0, 0
				break
			}
			g.startSecond(g.nextSecond + 1)
			afterSkips, invalid = 0, nil
			continue
		}
		if g.maxAhead >= 0 && g.nextSecond-now > g.maxAhead {
			stop = &PutRejection{Reason: RejectAheadBound, Second: g.nextSecond,
				Err: fmt.Errorf("demand exceeds the %d IDs/s of %d lane(s): IDs would run %ds ahead of the wall clock, the bound is %ds",
					g.lanes.len()*int(maxSeq+1), g.lanes.len(), g.nextSecond-now, g.maxAhead)}
			break
		}
		if g.nextSecond > now && trigger == TriggerThreshold {
			// Takers borrow the future: demand needs another lane.
			g.lanes.want()
		}
		ln := g.lanes.at(g.laneIdx)
		if err := ln.usableFor(g.nextSecond); err != nil {
			if errors.Is(err, ErrNotReserved) {
				// Valid, but not reserved this far yet: the reservation is
				// asked for and padding resumes here shortly.
				stop = &PutRejection{Reason: RejectNotReserved, Second: g.nextSecond, Err: err}
				break
			}
			if errors.Is(err, errBeforeAfter) {
				afterSkips++
			} else {
				invalid = err
			}
			g.laneIdx, g.nextSeq = g.laneIdx+1, 0
			continue
		}
		base, err := g.layout.secondBase(g.nextSecond, ln.workerID)
		if err != nil {
			stop = &PutRejection{Reason: RejectExhausted, Second: g.nextSecond, Err: err}
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
		ln.lastUsed = g.nextSecond
		g.dirty = true
		g.nextSeq += written
		if g.nextSeq > maxSeq {
			g.laneIdx, g.nextSeq = g.laneIdx+1, 0
		}
		tail += written
		g.lastFilled.Store(g.nextSecond)
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
		g.hitBound = true
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
	g.nextSecond, g.laneIdx, g.nextSeq, g.dirty = sec, 0, 0, false
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

// State is a snapshot of a CachedGenerator for monitoring.
type State struct {
	WorkerID       uint64   // the first lane's, which the caller claimed
	Lanes          []uint64 // worker IDs of every lane held, ascending
	MaxLanes       int
	LanesClaimed   uint64 // extra lanes claimed since start
	LanesReleased  uint64 // extra lanes given back since start
	LaneError      string // the last failed lane claim ("" when none)
	Size           uint64
	Target         uint64 // IDs padding keeps ready (follows demand)
	Tail           uint64 // slots ever filled
	Cursor         uint64 // slots ever taken
	Available      uint64 // IDs ready to take
	LogicalSecond  int64  // unix second padding fills next
	SecondsAhead   int64  // second of the newest ID in the ring minus the wall clock's (negative when behind)
	Throttled      bool   // demand exceeds what the lanes sustain: padding waits at MaxAhead
	PerSecond      uint64 // IDs per second the lanes held sustain at wall-clock pace
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
	lanes := *g.lanes.ids.Load()
	st := State{
		WorkerID:       g.workerID,
		Lanes:          lanes,
		MaxLanes:       g.lanes.max,
		LanesClaimed:   g.lanes.claimed.Load(),
		LanesReleased:  g.lanes.returned.Load(),
		Size:           g.size,
		Target:         g.targetNow.Load(),
		Tail:           tail,
		Cursor:         cursor,
		Available:      tail - min(cursor, tail),
		LogicalSecond:  g.logicalSecond.Load(),
		SecondsAhead:   g.secondsAhead(),
		Throttled:      g.isThrottled(),
		PerSecond:      uint64(len(lanes)) * (g.layout.MaxSequence() + 1),
		PaddingRounds:  g.paddingRounds.Load(),
		PutRejections:  g.putRejections.Load(),
		TakeRejections: g.takeRejections.Load(),
		Discarded:      g.discarded.Load(),
	}
	if p := g.lanes.lastErr.Load(); p != nil {
		st.LaneError = (*p).Error()
	}
	return st
}

// Close stops padding and waits for the padding goroutine to end, then
// gives back the extra lanes. Takes after Close drain what is left in the
// ring, then fail with ErrClosed. A claim that implements Retirer learns
// the last second padding filled for it: no ID of this generator, taken
// before or after Close, is later.
func (g *CachedGenerator) Close() error {
	first := false
	g.closeOnce.Do(func() {
		close(g.done)
		g.lanes.cancel()
		first = true
	})
	g.wg.Wait()
	if first {
		g.lanes.close()
	}
	return nil
}
