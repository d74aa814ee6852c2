package uidcore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
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
	// MaxRingSeconds is the largest RingSeconds.
	MaxRingSeconds = 1 << 24
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
	// Floor is a last second no ID may carry, on every lane, whatever the
	// claims' After and the clock read: a fleet generation's StartsAfter,
	// up to which an earlier generation's IDs may reach. A clock stepped
	// back below it makes padding wait, never issue below it. 0: none.
	Floor int64

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
	// Configuration: set by NewCached, read-only afterwards.
	layout   Layout
	claim    Claim
	clock    Clock
	workerID uint64
	size     uint64
	mask     uint64
	factor   uint64
	maxAhead int64  // seconds; <0 = unbounded
	maxLag   int64  // seconds; <0 = unbounded
	spread   uint64 // span of a re-synced second's first sequence (spreadOf); 0: none
	schedule time.Duration
	takeWait time.Duration
	observer Observer
	onPut    PutRejectPolicy
	onTake   TakeRejectPolicy

	// Shared by takers and padding: the ring, and what padding tells takers
	// (stored by padding, read on the take path).
	threshold atomic.Uint64 // padding is requested when fewer IDs remain
	reserve   atomic.Uint64 // what bulk takes leave for small ones while throttled
	slots     []uint64
	canTake   []atomic.Uint64 // one bit per slot: 1 = can take, 0 = can put
	_         [64]byte
	tail      atomic.Uint64 // next slot padding writes; only padding stores it
	_         [56]byte
	cursor    atomic.Uint64 // next slot a taker claims
	_         [56]byte
	wantPad   atomic.Bool
	stopErr   atomic.Pointer[error] // why the last padding round stopped short, nil when it filled the ring
	roundEnd  atomic.Pointer[chan struct{}]
	// refilled is closed at the end of each round that may give a waiting
	// reservation more: a padding round, or a reservation's answer that
	// wrote to the ring. An answer that only took does not close it, so
	// waiting reservations do not wake each other in turn.
	refilled atomic.Pointer[chan struct{}]
	// throttled is set while padding is held at MaxAhead: demand exceeds
	// what the lanes sustain.
	throttled atomic.Bool
	// smallTaken counts the IDs small takes got while throttled, so the
	// reserve follows their demand.
	smallTaken atomic.Uint64

	// Owned by the padding goroutine.
	padding paddingState
	lanes   laneSet // its list is padding's, the rest shared: see laneSet

	// Statistics for State, written by padding and takers.
	targetNow      atomic.Uint64 // padding.target
	logicalSecond  atomic.Int64  // padding.nextSecond at the end of the last round
	lastFilled     atomic.Int64  // second of the newest ID in the ring; takers read it too (isThrottled)
	paddingRounds  atomic.Uint64
	putRejections  atomic.Uint64
	takeRejections atomic.Uint64
	discarded      atomic.Uint64

	// Lifecycle and padding's triggers.
	wake      chan struct{}
	forced    chan chan PaddingReport
	reserves  chan *reservation
	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// paddingState is what only the padding goroutine touches (and NewCached,
// before it starts the goroutine): where padding stands in the logical
// second, and what it adapts once a second. Takers see its effects only
// through the ring's tail and the atomics padding stores (threshold,
// reserve, throttled, lastFilled).
type paddingState struct {
	nextSecond int64  // the logical second: the one padding fills next
	laneIdx    int    // the lane of nextSecond padding fills
	nextSeq    uint64 // the next sequence of that lane in nextSecond
	firstSeq   uint64 // the first lane's first sequence in nextSecond (spreadStart)
	spreadNext uint64 // the sequence after the last ID written, or after the last issued once the ring is emptied of stale IDs
	dirty      bool   // padding wrote some ID of nextSecond, in any round
	target     uint64 // IDs padding keeps ready
	smallRate  uint64 // IDs small takes got in the last second while throttled
	hitBound   bool   // a round stopped at MaxAhead since the last second began
	// lastCursor and lastDiscarded are the cursor and discarded at the
	// last once-a-second look: the IDs taken since are the demand.
	lastCursor    uint64
	lastDiscarded uint64
	// reserved counts the IDs reservations took since the last look
	// (ReserveRuns): demand that moved no cursor.
	reserved uint64
}

// NewCached builds the ring, fills it once (the start-up padding round) and
// starts the padding goroutine. Close it to stop padding.
func NewCached(opts CachedOptions) (*CachedGenerator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := checkBasics(&opts.Layout, opts.Claim, &opts.Clock); err != nil {
		return nil, err
	}
	size, _ := ringSize(opts) // Validate checked it
	opts.PaddingFactor = cmp.Or(opts.PaddingFactor, DefaultPaddingFactor)
	opts.MaxAhead = cmp.Or(opts.MaxAhead, DefaultMaxAhead)
	opts.MaxLag = cmp.Or(opts.MaxLag, DefaultMaxLag)
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
		reserves: make(chan *reservation),
		done:     make(chan struct{}),
	}
	if opts.MaxAhead > 0 {
		g.maxAhead = int64(opts.MaxAhead / time.Second)
	}
	g.spread = spreadOf(opts.Layout)
	if opts.MaxLag > 0 {
		g.maxLag = int64(max(opts.MaxLag/time.Second, 1))
	}
	g.lanes.init(g, opts)
	g.setTarget(min(size, fillFloor))
	ch, refilled := make(chan struct{}), make(chan struct{})
	g.roundEnd.Store(&ch)
	g.refilled.Store(&refilled)
	// Lanes skip the seconds an earlier holder of their worker ID may have
	// used (Claim.After); the generator itself starts at the clock.
	g.padding.nextSecond = g.clock.Now().Unix()
	g.logicalSecond.Store(g.padding.nextSecond)
	g.lastFilled.Store(g.padding.nextSecond - 1)
	g.pad(TriggerStartup)
	g.wg.Add(1)
	go g.paddingLoop()
	g.lanes.start()
	return g, nil
}

// Validate reports the first setting NewCached would refuse, as a
// *setting.Error, without building anything: the layout (zero: the
// default), the ring's size, the padding and lane settings, and the
// durations it counts in whole seconds (at least 1s when set). The Claim,
// which NewCached also requires, is not a setting and is not checked.
func (opts CachedOptions) Validate() error {
	if opts.Layout != (Layout{}) {
		if err := opts.Layout.Validate(); err != nil {
			return err
		}
	}
	if _, err := ringSize(opts); err != nil {
		return err
	}
	if f := opts.PaddingFactor; f < 0 || f > 100 {
		return &setting.Error{Field: "PaddingFactor", Reason: fmt.Sprintf("%d is outside 1..100", f)}
	}
	switch {
	case opts.ScheduleInterval < 0:
		return negative("ScheduleInterval")
	case opts.TakeWait < 0:
		return negative("TakeWait")
	case opts.LaneIdle < 0:
		return negative("LaneIdle")
	case opts.MaxLanes < 0:
		return negative("MaxLanes")
	}
	// The generator counts these in whole seconds: a positive value below
	// one would silently round (to no running ahead at all, for MaxAhead).
	for _, d := range [...]struct {
		field    string
		value    time.Duration
		negative string // what a negative value means, "" when refused above
	}{
		{"LaneIdle", opts.LaneIdle, ""},
		{"MaxAhead", opts.MaxAhead, "no bound"},
		{"MaxLag", opts.MaxLag, "no bound"},
	} {
		if d.value > 0 && d.value < time.Second {
			return subSecond(d.field, d.value, d.negative)
		}
	}
	return nil
}

func negative(field string) error {
	return &setting.Error{Field: field, Reason: "must not be negative"}
}

func subSecond(field string, d time.Duration, negative string) error {
	reason := fmt.Sprintf("%s: use at least 1s", d)
	if negative != "" {
		reason += ", or a negative value for " + negative
	}
	return &setting.Error{Field: field, Reason: reason}
}

// ringSize is (MaxSequence+1) × RingSeconds slots, capped by RingMemory,
// a power of two and at least 64 (the can-take bits are kept in 64-bit
// words; a smaller ring would share a word with itself).
func ringSize(opts CachedOptions) (uint64, error) {
	seconds := cmp.Or(opts.RingSeconds, DefaultRingSeconds)
	if seconds < 1 || seconds > MaxRingSeconds {
		return 0, &setting.Error{Field: "RingSeconds", Reason: fmt.Sprintf("%d is outside 1..%d", seconds, MaxRingSeconds)}
	}
	boost := bits.Len64(uint64(seconds)) - 1 // a power of two of seconds
	if opts.RingMemory == 0 {
		opts.RingMemory = DefaultRingMemory
	}
	if opts.RingMemory < 64*8 || opts.RingMemory > maxRingSlots*8 {
		return 0, &setting.Error{Field: "RingMemory", Reason: fmt.Sprintf("%d bytes is outside %d..%d", opts.RingMemory, 64*8, maxRingSlots*8)}
	}
	byMemory := uint64(1) << (bits.Len64(uint64(opts.RingMemory/8)) - 1) // a power of two
	perSecond := opts.Layout.MaxSequence() + 1
	size := byMemory
	if bits.Len64(perSecond)+boost <= 63 && perSecond<<boost < size {
		size = perSecond << boost
	}
	return max(size, 64), nil
}

// Layout returns the generator's layout.
func (g *CachedGenerator) Layout() Layout { return g.layout }

// WorkerID returns the worker ID of the generator's claim.
func (g *CachedGenerator) WorkerID() uint64 { return g.workerID }

// Size is the number of slots in the ring.
func (g *CachedGenerator) Size() int { return int(g.size) }

// padNow runs a padding round now, even while padding backs off, and
// returns its report (trigger triggerForced): the package's tests use it
// to step the ring; padding runs on its own.
func (g *CachedGenerator) padNow(ctx context.Context) (PaddingReport, error) {
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
