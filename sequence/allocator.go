package sequence

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
)

// Config tunes an Allocator. Zero values take the defaults of
// DefaultConfig.
type Config struct {
	// MinStep is the first segment's size and the smallest the adaptive
	// step halves to.
	MinStep uint64
	// MaxStep caps the adaptive step, and so what a kill can lose: at most
	// two segments per name.
	MaxStep uint64
	// Target is how long a segment should last: a shorter one doubles
	// the next step, one lasting more than twice as long halves it. The
	// store then sees about one write per Target per name and instance.
	Target time.Duration
	// FetchTimeout bounds one Take on the store.
	FetchTimeout time.Duration
	// RetryPause is how long after a failed Take the allocator answers
	// from the failure instead of asking the store again, so an outage is
	// not hammered by every request.
	RetryPause time.Duration
	// CheckInterval is how often each name's counter is checked against
	// the highest number the store gave this allocator, and raised past it
	// when the store forgot allocations (a power loss, a failover), so that
	// no other instance takes them again; 0: DefaultConfig's, negative:
	// never (every take still checks).
	CheckInterval time.Duration
	// Settle is how long a new allocator waits before its first segment,
	// and any allocator before its next one after the store failed a take
	// or a check (an outage, which a loss may come with): long enough for
	// the instances that lived through a store's loss to check and repair
	// the counters (a few CheckIntervals); 0: no wait, for a store that
	// keeps what it acknowledged.
	Settle time.Duration
	// StoreName names the store in errors ("MySQL at db:3306"); default:
	// the store's String method, else "the sequence store".
	StoreName string
	Logger    *slog.Logger // default slog.Default()
	// SettingName, when set, is how error messages name a field of
	// Config other than the one in error (a program's own name for the
	// setting, such as its environment variable).
	SettingName func(field string) string
}

// DefaultConfig is Leaf's tuning: steps from 1,000 doubling up to
// 1,000,000, aiming at segments that last 15 minutes.
func DefaultConfig() Config {
	return Config{
		MinStep:      1000,
		MaxStep:      1_000_000,
		Target:       15 * time.Minute,
		FetchTimeout: 5 * time.Second,
		RetryPause:   500 * time.Millisecond,
		// Checks are a read per name, and writes nothing unless the
		// store went back.
		CheckInterval: 2 * time.Second,
	}
}

// Validate reports the first setting NewAllocator would refuse, as a
// *setting.Error naming its field; zero settings read as DefaultConfig's.
// SettingName, when set, names the other setting a reason mentions.
func (cfg Config) Validate() error {
	def := DefaultConfig()
	minStep, maxStep := cmp.Or(cfg.MinStep, def.MinStep), cmp.Or(cfg.MaxStep, def.MaxStep)
	switch target := cmp.Or(cfg.Target, def.Target); {
	case minStep > MaxValue:
		return &setting.Error{Field: "MinStep", Reason: fmt.Sprintf("%d is above %d, the largest number", minStep, uint64(MaxValue))}
	case maxStep < minStep || maxStep > MaxValue:
		return &setting.Error{Field: "MaxStep", Reason: fmt.Sprintf("%d is below %s %d (or above %d)", maxStep, cfg.name("MinStep"), minStep, uint64(MaxValue))}
	case target < time.Second:
		return &setting.Error{Field: "Target", Reason: fmt.Sprintf("%s: use at least 1s", target)}
	}
	return nil
}

// name is how messages name the setting of the Config field: by
// SettingName when set, else the field name.
func (cfg Config) name(field string) string {
	if cfg.SettingName == nil {
		return field
	}
	return cfg.SettingName(field)
}

// SettleFor is the settle period that covers the checks of the instances
// that lived through a loss: three check intervals (a survivor may be
// one interval from its next check and retry a failed one), 0 without a
// loss window.
func SettleFor(lossWindow, checkInterval time.Duration) time.Duration {
	if lossWindow <= 0 || checkInterval <= 0 {
		return 0
	}
	return 3 * checkInterval
}

// prefetchPercent is how much of a segment is used when the next one is
// taken in the background (Leaf's 10%): early, so that a store outage
// finds almost two segments in hand.
const prefetchPercent = 10

// unknownTTL is how long a name the store did not know is answered 404
// without asking again; a name declared meanwhile is served after it.
const unknownTTL = time.Second

// Allocator hands out the numbers of named sequences from segments of a
// SegmentStore. It is safe for concurrent use. Close it to give the
// unused rest of its segments back.
type Allocator struct {
	store  SegmentStore
	cfg    Config
	ctx    context.Context // ends fetches in flight on Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // fetches in flight
	closed atomic.Bool

	mu      sync.Mutex
	seqs    map[string]*seqState
	unknown map[string]time.Time // negative cache: name -> until

	settled     atomic.Int64 // unix ns: no segment is taken before (Config.Settle, and after a regression)
	regressions atomic.Uint64
	// outage is set when the store failed a take or a check: the next
	// take waits the settle period, so that the instances that lived
	// through a loss raise the counters first (survivors included).
	outage atomic.Bool
	// watcher is the store as a LossWatcher (nil: it cannot tell a loss
	// no request saw); base is the epoch takes settled on (epoch.go).
	watcher      LossWatcher
	epochMu      sync.Mutex
	base         baseline
	epochChanges atomic.Uint64
	checkStop    chan struct{} // closed by stop: ends checkLoop
	checkDone    chan struct{}
	// unserved holds the last request answered ErrUnavailable for the
	// store's sake that nobody has received yet (Unserved).
	unserved chan error
}

// seqState is one name's segments and counters.
type seqState struct {
	name  string
	known bool // listed by the store at start: kept in Stats whatever happens

	// dropped: removed from the allocator (forget); set under mu.
	dropped bool

	// storeMu: a take and a check of this name on the store run one at a
	// time (see take). Taken before mu, never while holding it.
	storeMu sync.Mutex

	mu   sync.Mutex
	held []Segment // in the order taken; numbers come from held[0]
	// high is the end of the highest segment the store gave this
	// allocator: every take asks for segments at or above it, and the
	// checks raise the store's counter back to it.
	high     uint64
	curSize  uint64 // held[0]'s size when taken
	step     uint64 // size of the next background take
	lastTake time.Time
	fetch    *fetch // in flight, or nil
	failedAt time.Time
	lastErr  error
	issued   uint64
	segments uint64
	waits    uint64 // fill calls that waited for a segment
	// waitTime and longestWait: how long those calls waited, in all and
	// at most (a request's segment wait is what a caller of a sequence
	// feels of the store; the count alone does not say it).
	waitTime    time.Duration
	longestWait time.Duration
}

// noteWait records one fill call's wait for a segment; st.mu is held.
func (st *seqState) noteWait(d time.Duration) {
	st.waitTime += d
	st.longestWait = max(st.longestWait, d)
}

// fetch is one Take in flight; done is closed when err (or the segment,
// appended to held) is in.
type fetch struct {
	done chan struct{}
	err  error
}

// NewAllocator serves the sequences of store.
func NewAllocator(store SegmentStore, cfg Config) (*Allocator, error) {
	def := DefaultConfig()
	cfg.MinStep = cmp.Or(cfg.MinStep, def.MinStep)
	cfg.MaxStep = cmp.Or(cfg.MaxStep, def.MaxStep)
	cfg.Target = cmp.Or(cfg.Target, def.Target)
	cfg.FetchTimeout = cmp.Or(cfg.FetchTimeout, def.FetchTimeout)
	cfg.RetryPause = cmp.Or(cfg.RetryPause, def.RetryPause)
	cfg.CheckInterval = cmp.Or(cfg.CheckInterval, def.CheckInterval)
	if cfg.StoreName == "" {
		cfg.StoreName = "the sequence store"
		if s, ok := store.(fmt.Stringer); ok {
			cfg.StoreName = s.String()
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Allocator{store: store, cfg: cfg, ctx: ctx, cancel: cancel,
		seqs: map[string]*seqState{}, unknown: map[string]time.Time{},
		checkStop: make(chan struct{}), checkDone: make(chan struct{}), unserved: make(chan error, 1)}
	a.watcher, _ = store.(LossWatcher)
	a.startEpoch()
	a.hold(max(cfg.Settle, 0))
	if cfg.CheckInterval > 0 {
		go a.checkLoop()
	} else {
		close(a.checkDone)
	}
	return a, nil
}

// Declare declares each sequence on the store (an existing one keeps its
// numbers: first matters only when it is created), then lists in Stats
// every sequence the store holds, declared here or elsewhere. It reads
// the store's epoch first when NewAllocator could not. It may be called
// again after an error (a store unavailable for now): declaring an
// existing sequence changes nothing.
func (a *Allocator) Declare(ctx context.Context, decls []Declaration) error {
	if err := a.readBaseline(ctx); err != nil {
		return fmt.Errorf("read the epoch of %s: %w", a.cfg.StoreName, err)
	}
	for _, d := range decls {
		if err := ValidName(d.Name); err != nil {
			return err
		}
		created, err := a.store.Declare(ctx, d.Name, d.First)
		if err != nil {
			return fmt.Errorf("declare sequence %q on %s: %w", d.Name, a.cfg.StoreName, err)
		}
		switch {
		case created:
			a.cfg.Logger.Info("sequence declared", "sequence", d.Name, "first", d.First, "store", a.cfg.StoreName)
		case d.First != 1:
			// A first number matters only when the sequence is created: an
			// operator who changes it on an existing one would otherwise
			// believe the numbers now start there.
			a.cfg.Logger.Warn("sequence already in the store: its stored numbers win, the declared first number applies only to a new sequence",
				"sequence", d.Name, "first", d.First, "store", a.cfg.StoreName)
		}
	}
	names, err := a.store.List(ctx)
	if err != nil {
		return fmt.Errorf("list the sequences of %s: %w", a.cfg.StoreName, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, name := range names {
		delete(a.unknown, name)
		a.state(name).known = true
	}
	return nil
}

// Next returns the next number of the sequence name.
func (a *Allocator) Next(ctx context.Context, name string) (uint64, error) {
	var one [1]uint64
	err := a.Fill(ctx, name, one[:])
	return one[0], err
}

// Fill fills dst with the next numbers of the sequence name, increasing.
// It fails with *UnknownError for a name the store does not know,
// ErrUnavailable when it holds too few numbers and the store gives no
// segment, ErrClosed after Close. On error nothing is taken: a batch
// waits until it holds enough numbers for all of dst.
func (a *Allocator) Fill(ctx context.Context, name string, dst []uint64) error {
	_, err := a.fill(ctx, name, dst, true)
	return err
}

// TryFill is Fill without waiting: false, and nothing taken, when the
// segments held have too few numbers for dst (a caller that may wait
// then calls Fill, off any goroutine that serves other names).
func (a *Allocator) TryFill(name string, dst []uint64) (bool, error) {
	return a.fill(context.Background(), name, dst, false)
}

func (a *Allocator) fill(ctx context.Context, name string, dst []uint64, wait bool) (bool, error) {
	if len(dst) == 0 {
		return true, nil
	}
	if ValidName(name) != nil {
		return false, &UnknownError{Name: name}
	}
	st, err := a.lockedState(name)
	if err != nil {
		return false, err
	}
	defer st.mu.Unlock()
	need := uint64(len(dst))
	var waitStart time.Time // the first wait's start; zero while it has not waited
	for {
		if a.closed.Load() {
			return false, ErrClosed
		}
		if st.heldTotal() >= need {
			break
		}
		if !wait {
			a.mu.Lock()
			a.dropUnused(st, false)
			a.mu.Unlock()
			return false, nil
		}
		if waitStart.IsZero() {
			// Once per call, however many fetches it waits through.
			st.waits++
			waitStart = time.Now()
		}
		if err := a.await(ctx, st, need-st.heldTotal()); err != nil {
			st.noteWait(time.Since(waitStart))
			return false, a.forget(st, err)
		}
	}
	if !waitStart.IsZero() {
		st.noteWait(time.Since(waitStart))
	}
	for i := 0; i < len(dst); {
		cur := &st.held[0]
		for ; i < len(dst) && cur.From < cur.To; i++ {
			dst[i] = cur.From
			cur.From++
		}
		if cur.Len() == 0 {
			st.held = st.held[1:]
			if len(st.held) > 0 {
				st.curSize = st.held[0].Len()
			}
		}
	}
	st.issued += need
	a.maybePrefetch(st)
	return true, nil
}

// lockedState returns name's state locked. A state dropped (by forget)
// while this caller waited for its lock is not used: a second state of
// the name would hand out numbers out of order.
func (a *Allocator) lockedState(name string) (*seqState, error) {
	for {
		st, err := a.lookup(name)
		if err != nil {
			return nil, err
		}
		st.mu.Lock()
		if !st.dropped {
			return st, nil
		}
		st.mu.Unlock()
	}
}

// lookup returns name's state, refusing names the store recently did not
// know.
func (a *Allocator) lookup(name string) (*seqState, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if until, ok := a.unknown[name]; ok {
		if time.Now().Before(until) {
			return nil, &UnknownError{Name: name}
		}
		delete(a.unknown, name)
	}
	return a.state(name), nil
}

// state returns name's state, creating it. a.mu must be held.
func (a *Allocator) state(name string) *seqState {
	st := a.seqs[name]
	if st == nil {
		st = &seqState{name: name, step: a.cfg.MinStep}
		a.seqs[name] = st
	}
	return st
}

// forget turns a failed take into the caller's error. A name that never
// got a segment is dropped, so that requests for made-up names leave
// nothing behind, also while the store is down; one the store does not
// know is cached as unknown for a moment. st.mu is held.
func (a *Allocator) forget(st *seqState, err error) error {
	unknown := errors.Is(err, ErrUnknownSequence)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropUnused(st, unknown)
	if !unknown {
		return err
	}
	if len(a.unknown) >= 1024 { // bounded: made-up names cannot grow it
		clear(a.unknown)
	}
	a.unknown[st.name] = time.Now().Add(unknownTTL)
	return &UnknownError{Name: st.name}
}

// dropUnused drops a state that never got a segment of a name not known
// to exist (or that the store just said it does not know), so that
// made-up names leave nothing behind. a.mu and st.mu are held.
func (a *Allocator) dropUnused(st *seqState, storeUnknown bool) {
	if (storeUnknown || !st.known) && st.segments == 0 && len(st.held) == 0 && st.fetch == nil && a.seqs[st.name] == st {
		delete(a.seqs, st.name)
		st.dropped = true
	}
}

func (st *seqState) heldTotal() uint64 {
	var n uint64
	for _, s := range st.held {
		n += s.Len()
	}
	return n
}

// await waits, with st.mu unlocked, for a segment of at least short
// numbers (or the fetch in flight). st.mu is held on entry and return.
func (a *Allocator) await(ctx context.Context, st *seqState, short uint64) error {
	f := st.fetch
	if f == nil {
		if st.lastErr != nil && time.Since(st.failedAt) < a.cfg.RetryPause {
			return a.unavailable(st, st.lastErr)
		}
		f = a.startFetch(st, min(max(a.adaptStep(st), short), a.cfg.MaxStep))
		if f == nil {
			return ErrClosed
		}
	}
	st.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
	}
	st.mu.Lock()
	select {
	case <-f.done:
		if f.err != nil {
			return a.unavailable(st, f.err)
		}
		return nil
	default:
		// The fetch goes on (its segment is kept); this caller has waited
		// as long as it may.
		return a.unavailable(st, fmt.Errorf("waited for a segment: %w", ctx.Err()))
	}
}

// unavailable is a request's error when the take it waited for failed
// (err), reported to Unserved when the store is the cause.
func (a *Allocator) unavailable(st *seqState, err error) error {
	if errors.Is(err, ErrUnknownSequence) || errors.Is(err, ErrExhausted) {
		return err
	}
	uerr := &UnavailableError{Name: st.name, Store: a.cfg.StoreName, Err: err}
	if a.storeFailed(err) {
		select {
		case a.unserved <- uerr:
		default: // one unreceived report is enough
		}
	}
	return uerr
}

// storeFailed says whether a take's error, or a request's wait for one,
// is the store's: it failed, or did not answer within the request's
// wait. An answer (an unknown name, an exhausted range) is not, nor the
// allocator closing or a request given up by its caller.
func (a *Allocator) storeFailed(err error) bool {
	return !errors.Is(err, ErrUnknownSequence) && !errors.Is(err, ErrExhausted) && !errors.Is(err, ErrClosed) &&
		!errors.Is(err, context.Canceled) && a.ctx.Err() == nil
}

// Unserved reports the requests that Fill answered ErrUnavailable
// because of the store (a take failed, or did not come within the
// request's wait), as their *UnavailableError; not a request for an
// unknown name or an exhausted one. It holds one unreceived report at
// most: a caller that moves the requests elsewhere (the dispenser's
// sequence endpoints leave their queue group) receives it, then waits
// with Probe until a take would succeed. Numbers held bridge an outage
// and report nothing: only a request the store failed does.
func (a *Allocator) Unserved() <-chan error { return a.unserved }

// Probe says how long the allocator will not yet answer a take without
// ErrUnavailable, for a caller that stopped sending it requests after
// Unserved: it reads the store's epoch and checks every name as Check
// does (a loss found holds takes for the quarantine), starts the settle
// period an outage calls for as the next take would (takeOutageSettle),
// and returns what is left of the hold on takes, or of the RetryPause
// after a name's failed take. 0 and nil: a take now goes to the store at
// once. An error: the store does not answer yet (probe again later).
// Probing bypasses none of the loss defenses: a take waits as before.
func (a *Allocator) Probe(ctx context.Context) (time.Duration, error) {
	if a.closed.Load() {
		return 0, ErrClosed
	}
	if a.watcher != nil {
		// One read first: while the store is out of reach, Check would
		// wait FetchTimeout on every name.
		if err := a.checkEpoch(ctx); err != nil {
			return 0, err
		}
	}
	if err := a.Check(ctx); err != nil {
		return 0, err
	}
	a.takeOutageSettle()
	until := time.Unix(0, a.settled.Load())
	a.mu.Lock()
	seqs := make([]*seqState, 0, len(a.seqs))
	for _, st := range a.seqs {
		seqs = append(seqs, st)
	}
	a.mu.Unlock()
	for _, st := range seqs {
		st.mu.Lock()
		if st.lastErr != nil && a.storeFailed(st.lastErr) {
			until = maxTime(until, st.failedAt.Add(a.cfg.RetryPause))
		}
		st.mu.Unlock()
	}
	return max(time.Until(until), 0), nil
}

func maxTime(x, y time.Time) time.Time {
	if x.After(y) {
		return x
	}
	return y
}

// UnavailableError is ErrUnavailable for one sequence: its store (named
// as the allocator's configuration names it) failed with Err.
type UnavailableError struct {
	Name, Store string
	Err         error
}

func (e *UnavailableError) Error() string   { return ErrUnavailable.Error() + ": " + e.Detail() }
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// Detail names the sequence, the store and what failed.
func (e *UnavailableError) Detail() string {
	return fmt.Sprintf("sequence %q: %s: %s", e.Name, e.Store, e.Err)
}

// maybePrefetch takes the next segment in the background once the one
// numbers come from is prefetchPercent used and no other is held.
func (a *Allocator) maybePrefetch(st *seqState) {
	if st.fetch != nil || len(st.held) > 1 || a.closed.Load() {
		return
	}
	if st.lastErr != nil && time.Since(st.failedAt) < a.cfg.RetryPause {
		return
	}
	if len(st.held) == 1 && (st.curSize-st.held[0].Len())*100 < st.curSize*prefetchPercent {
		return
	}
	a.startFetch(st, a.adaptStep(st))
}

// adaptStep is Leaf's rule, applied when a segment is taken: the previous
// one lasted less than the target, double; more than twice, halve.
func (a *Allocator) adaptStep(st *seqState) uint64 {
	if !st.lastTake.IsZero() {
		switch lasted := time.Since(st.lastTake); {
		case lasted < a.cfg.Target:
			st.step = min(st.step*2, a.cfg.MaxStep)
		case lasted > 2*a.cfg.Target:
			st.step = max(st.step/2, a.cfg.MinStep)
		}
	}
	return st.step
}

// startFetch takes a segment of size numbers in the background; nil once
// the allocator is closed. st.mu is held.
func (a *Allocator) startFetch(st *seqState, size uint64) *fetch {
	a.mu.Lock()
	if a.closed.Load() {
		a.mu.Unlock()
		return nil
	}
	a.wg.Add(1)
	a.mu.Unlock()
	f := &fetch{done: make(chan struct{})}
	st.fetch = f
	floor := st.high
	go func() {
		defer a.wg.Done()
		seg, err := a.take(st, size, floor)
		st.mu.Lock()
		st.fetch, f.err = nil, err
		if err == nil {
			a.cfg.Logger.Debug("took a sequence segment", event.Key, event.SequenceSegment, event.AttrName, st.name,
				event.AttrFirst, seg.From, event.AttrLast, seg.To-1, "store", a.cfg.StoreName)
			st.high = max(st.high, seg.To)
			st.held = append(st.held, seg)
			if len(st.held) == 1 {
				st.curSize = seg.Len()
			}
			st.segments++
			st.lastTake, st.lastErr = time.Now(), nil
		} else {
			st.failedAt, st.lastErr = time.Now(), err
			if !errors.Is(err, ErrUnknownSequence) {
				a.cfg.Logger.Warn("taking a sequence segment failed", "sequence", st.name, "store", a.cfg.StoreName, "err", err)
			}
		}
		st.mu.Unlock()
		close(f.done)
	}()
	return f
}

// take takes a segment of name at or above floor once the allocator has
// settled. A segment that found the store's counter below floor (the
// store forgot segments it gave this allocator) is not used: the store
// may have forgotten other instances' segments too, above this one's
// floor, and they raise the counter past them at their next check; the
// allocator waits for that (the settle period) and takes again.
func (a *Allocator) take(st *seqState, size, floor uint64) (Segment, error) {
	name := st.name
	for {
		a.takeOutageSettle()
		snap := a.epochSnapshot()
		if wait := time.Until(time.Unix(0, a.settled.Load())); wait > 0 {
			// An undeclared name is an answer the settle period cannot
			// change: give it now (a 404), not after the wait (a 503).
			// A take of 0 numbers above floor 0 writes nothing.
			if err := a.declared(name); err != nil {
				return Segment{}, err
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-a.ctx.Done():
				t.Stop()
				return Segment{}, a.ctx.Err()
			case <-a.checkStop:
				// Closing waits for the fetches in flight; one that has
				// taken nothing yet has nothing to give back.
				t.Stop()
				return Segment{}, ErrClosed
			}
		}
		seg, settling, err := a.takeOnce(st, size, floor)
		if settling {
			continue
		}
		if err != nil {
			return seg, err
		}
		if seg.Behind > 0 {
			floor = seg.To
			continue
		}
		if a.watcher == nil || seg.Len() == 0 {
			return seg, nil
		}
		if ok, err := a.confirmEpoch(name, snap, seg); ok || err != nil {
			return seg, err
		}
		floor = seg.To
	}
}

// takeOnce is one take of st's name on the store, never beside a check
// of it (storeMu): a check that finds the counter below this allocator's
// high-water mark raises it to that mark, so a take running beside it,
// whose floor is that mark, would find nothing behind and take the
// numbers just above it, which another instance may have handed out and
// the store forgot (make test, sequencetest ForgottenSegments: 80
// numbers twice). After such a check the take waits the quarantine it
// set (settling true: take again from the top). A segment that found the
// counter behind is reported (regressed) before storeMu is released, so
// a check after it sees the hold. And the high-water mark takes in every
// segment the store gave before storeMu is released, handed out or not:
// a check between the store's answer and the fetch's record of it (the
// epoch read in between) raised the counter only to the mark before it,
// and another instance took that segment's numbers after the store forgot
// it (make test, sequencetest ForgottenSegments: 80 numbers twice).
func (a *Allocator) takeOnce(st *seqState, size, floor uint64) (seg Segment, settling bool, err error) {
	st.storeMu.Lock()
	defer st.storeMu.Unlock()
	// A check this take waited for may have met an outage: the settle
	// period after it holds this take too (take's loop starts it), or the
	// take would reach a new leader before the other instances' checks
	// raised what it forgot.
	if time.Now().UnixNano() < a.settled.Load() || (a.cfg.Settle > 0 && a.outage.Load()) {
		return Segment{}, true, nil
	}
	ctx, cancel := context.WithTimeout(a.ctx, a.cfg.FetchTimeout)
	seg, err = a.store.Take(ctx, st.name, size, floor)
	cancel()
	a.noteOutage(err)
	if err != nil {
		return seg, false, err
	}
	st.mu.Lock()
	st.high = max(st.high, seg.To)
	st.mu.Unlock()
	if seg.Behind > 0 {
		a.regressed(st.name, floor, seg)
	}
	return seg, false, nil
}

// takeOutageSettle starts the settle period after an outage the store
// had (a take's first step, and Probe's): takes wait it, so that the
// instances that lived through a loss raise the counters first. The hold
// comes before the outage is cleared, so that a take checking beside it
// (takeOnce) sees one or the other.
func (a *Allocator) takeOutageSettle() {
	if !a.outage.Load() {
		return
	}
	if a.cfg.Settle > 0 {
		a.hold(a.cfg.Settle)
	}
	a.outage.Store(false)
}

// declared is nil unless the store says name is undeclared (a store
// error is left to the take after the wait).
func (a *Allocator) declared(name string) error {
	ctx, cancel := context.WithTimeout(a.ctx, a.cfg.FetchTimeout)
	defer cancel()
	if _, err := a.store.Take(ctx, name, 0, 0); errors.Is(err, ErrUnknownSequence) {
		return err
	}
	return nil
}

// noteOutage marks a store error (not an answer such as an unknown name)
// as an outage: a loss may come with it.
func (a *Allocator) noteOutage(err error) {
	if err != nil && !errors.Is(err, ErrUnknownSequence) && !errors.Is(err, ErrExhausted) && a.ctx.Err() == nil {
		a.outage.Store(true)
	}
}

// hold makes takes wait d from now (or longer, if they already must).
func (a *Allocator) hold(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := a.settled.Load()
		if cur >= until || a.settled.CompareAndSwap(cur, until) {
			return
		}
	}
}

// quarantine is how long takes wait after a regression: the settle
// period, or three check intervals without one.
func (a *Allocator) quarantine() time.Duration {
	if a.cfg.Settle > 0 {
		return a.cfg.Settle
	}
	return 3 * max(a.cfg.CheckInterval, 0)
}

// regressed logs and counts a counter the store had put back below what
// it gave this allocator (the take or check that found it raised it
// again), and holds this allocator's takes for the quarantine.
func (a *Allocator) regressed(name string, remembered uint64, seg Segment) {
	a.hold(a.quarantine())
	a.regressions.Add(1)
	found := remembered - seg.Behind
	a.cfg.Logger.Error("the sequence store forgot segments it had given this instance: raised its counter back past them; none of them is handed out again",
		event.Key, event.SequenceRegression, event.AttrName, name, event.AttrRemembered, remembered, "found", found, "store", a.cfg.StoreName)
	a.cfg.Logger.Error("store regression", event.Key, event.StoreRegression, "record", "sequence", event.AttrName, name)
	a.cfg.Logger.Warn("sequence counter repaired", event.Key, event.SequenceRepaired, event.AttrName, name, event.AttrRemembered, remembered, "found", found)
}

// Regressions is how many times the store had forgotten segments it gave
// this allocator (for the uid_store_regressions_total metric).
func (a *Allocator) Regressions() uint64 { return a.regressions.Load() }

// Check raises each name's counter in the store back to the highest
// number the store gave this allocator, where it went below (the store
// forgot allocations: a power loss, a failover), before any instance
// takes those numbers again. The allocator runs it every CheckInterval;
// call it too when the connection to the store comes back.
func (a *Allocator) Check(ctx context.Context) error {
	a.mu.Lock()
	seqs := make([]*seqState, 0, len(a.seqs))
	for _, st := range a.seqs {
		seqs = append(seqs, st)
	}
	a.mu.Unlock()
	var errs []error
	if a.watcher != nil {
		if err := a.checkEpoch(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, st := range seqs {
		if err := a.checkOne(ctx, st); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkOne raises st's counter back to its high-water mark, never beside
// a take of the name (storeMu, see takeOnce): a regression it finds holds
// this allocator's takes before the next take can start.
func (a *Allocator) checkOne(ctx context.Context, st *seqState) error {
	st.storeMu.Lock()
	defer st.storeMu.Unlock()
	st.mu.Lock()
	high := st.high
	st.mu.Unlock()
	// With nothing taken yet (high 0) the check is a read: it still
	// tells an outage, after which this instance too settles.
	cctx, cancel := context.WithTimeout(ctx, a.cfg.FetchTimeout)
	seg, err := a.store.Take(cctx, st.name, 0, high)
	cancel()
	a.noteOutage(err)
	switch {
	case errors.Is(err, ErrUnknownSequence):
	case err != nil:
		return fmt.Errorf("sequence %q: check on %s: %w", st.name, a.cfg.StoreName, err)
	case seg.Behind > 0:
		a.regressed(st.name, high, seg)
	}
	return nil
}

// checkLoop runs Check every CheckInterval until stop.
func (a *Allocator) checkLoop() {
	defer close(a.checkDone)
	t := time.NewTicker(a.cfg.CheckInterval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-a.checkStop:
			return
		case <-t.C:
		}
		err := a.Check(a.ctx)
		if err != nil && !failing && a.ctx.Err() == nil {
			a.cfg.Logger.Warn("checking the sequence counters failed; retrying", "err", err)
		}
		failing = err != nil
	}
}

// Close stops serving and gives the unused rest of every name's segments
// back to the store, newest first, each with the store's compare-and-set:
// a rest is given back only when no instance took a later segment since,
// so a number is never handed out twice. What is not given back is lost
// (a gap). Fetches in flight are waited for (their segments are given
// back too) until ctx ends.
func (a *Allocator) Close(ctx context.Context) error {
	seqs, ok := a.stop(ctx)
	if !ok {
		return nil
	}
	var errs []error
	for _, st := range seqs {
		st.mu.Lock()
		held := st.held
		st.held = nil
		st.mu.Unlock()
		var given, lost uint64
		for i := len(held) - 1; i >= 0; i-- {
			if held[i].Len() == 0 {
				continue
			}
			ok, err := a.store.GiveBack(ctx, st.name, held[i])
			if err != nil {
				errs = append(errs, fmt.Errorf("sequence %q: give back %s to %s: %w", st.name, held[i], a.cfg.StoreName, err))
			}
			if err != nil || !ok {
				for _, s := range held[:i+1] {
					lost += s.Len()
				}
				break
			}
			given += held[i].Len()
			a.cfg.Logger.Debug("gave a segment's unused rest back", event.Key, event.SequenceGivenBack, event.AttrName, st.name,
				event.AttrFirst, held[i].From, event.AttrLast, held[i].To-1, "store", a.cfg.StoreName)
		}
		if given+lost > 0 {
			a.cfg.Logger.Info("sequence segments given back", "sequence", st.name, "given_back", given, "lost", lost)
		}
	}
	return errors.Join(errs...)
}

// Abandon stops serving without giving anything back, as a killed
// instance would: the numbers held are lost, never reissued.
func (a *Allocator) Abandon() { a.stop(context.Background()) }

// stop refuses new requests and fetches and waits for the fetches in
// flight (cancelling them when ctx ends); it returns the states, sorted
// by name, and false when already stopped.
func (a *Allocator) stop(ctx context.Context) ([]*seqState, bool) {
	a.mu.Lock()
	if a.closed.Swap(true) {
		a.mu.Unlock()
		return nil, false
	}
	close(a.checkStop)
	seqs := make([]*seqState, 0, len(a.seqs))
	for _, st := range a.seqs {
		seqs = append(seqs, st)
	}
	a.mu.Unlock()
	stopCancel := context.AfterFunc(ctx, a.cancel)
	<-a.checkDone
	a.wg.Wait()
	stopCancel()
	a.cancel()
	slices.SortFunc(seqs, func(x, y *seqState) int { return cmp.Compare(x.name, y.name) })
	return seqs, true
}

// Stats is one sequence's state, as the service's stats show it.
type Stats struct {
	Name     string `json:"name"`
	Issued   uint64 `json:"issued"`   // numbers handed out by this instance
	Segments uint64 `json:"segments"` // segments taken from the store (its writes)
	Step     uint64 `json:"step"`     // size of the next segment
	Left     uint64 `json:"left"`     // numbers left in the current segment
	Held     uint64 `json:"held"`     // numbers left in all segments held
	Waits    uint64 `json:"waits"`    // calls that waited for a segment from the store
	// WaitTime is how long those calls waited in all, LongestWait the
	// longest one: a segment wait is the latency the store adds to a
	// request (its target is under 50 ms).
	WaitTime    time.Duration `json:"wait_time_ns"`
	LongestWait time.Duration `json:"longest_wait_ns"`
	Error       string        `json:"error,omitempty"`
}

// Stats returns every known sequence's state, sorted by name.
func (a *Allocator) Stats() []Stats {
	a.mu.Lock()
	seqs := make([]*seqState, 0, len(a.seqs))
	for _, st := range a.seqs {
		seqs = append(seqs, st)
	}
	a.mu.Unlock()
	out := make([]Stats, 0, len(seqs))
	for _, st := range seqs {
		st.mu.Lock()
		s := Stats{Name: st.name, Issued: st.issued, Segments: st.segments, Step: st.step, Held: st.heldTotal(), Waits: st.waits,
			WaitTime: st.waitTime, LongestWait: st.longestWait}
		if len(st.held) > 0 {
			s.Left = st.held[0].Len()
		}
		if st.lastErr != nil {
			s.Error = st.lastErr.Error()
		}
		st.mu.Unlock()
		out = append(out, s)
	}
	slices.SortFunc(out, func(x, y Stats) int { return cmp.Compare(x.Name, y.Name) })
	return out
}

// SettledAt is when a new allocator may take its first segment (the
// settle period after NewAllocator): the dispenser joins its queue group
// only then, so that a first request does not wait out the period.
func (a *Allocator) SettledAt() time.Time { return time.Unix(0, a.settled.Load()) }
