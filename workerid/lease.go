package workerid

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/retry"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// Errors callers branch on. Test with errors.Is.
var (
	// ErrWorkerIDsExhausted: every worker ID of the layout is taken (leased)
	// or the store handed out one beyond the layout's range (disposable).
	ErrWorkerIDsExhausted = errors.New("workerid: no free worker ID in the layout's range")
	// ErrLeaseTaken: the store says the lease's owner token no longer
	// matches: another instance owns the worker ID now. A Lease that sees
	// it is lost for good.
	ErrLeaseTaken error = leaseError("the worker ID's lease has another owner")
	// ErrLeaseExpired: the lease was not renewed before its local deadline.
	// A later successful renewal clears it.
	ErrLeaseExpired error = leaseError("lease not renewed before its deadline")
	// ErrReleased: the lease was given back with Release.
	ErrReleased error = leaseError("lease released")
	// ErrStoreUnavailable: the store could not be reached within the
	// start-up deadline.
	ErrStoreUnavailable = errors.New("workerid: worker-ID store unavailable")
	// ErrLeaseRegression: the store answered with a lease record older
	// than one this owner wrote (a reservation below the one it had
	// acknowledged, a revision below its last write, or no record): it
	// forgot acknowledged writes. A Lease that sees it is lost for good.
	ErrLeaseRegression error = leaseError("the store forgot an acknowledged lease write")
)

// LeaseStore keeps worker-ID leases. Each method is one atomic operation
// on the store; the Lease machinery does the rest. Implementations: the
// MySQL WORKER_LEASE table here, a JetStream KV bucket in natsio.
type LeaseStore interface {
	// Acquire takes the lowest worker ID in req.MinWorkerID..req.MaxWorkerID whose lease
	// is free (released or never used) or expired, atomically: two
	// concurrent calls never get the same one. The lease is recorded with
	// req.Token as its owner and an expiry req.TTL from now; the reserved
	// second is left as the previous owner left it and returned in
	// Grant.PrevReserved (0 for a worker ID never used). When every worker
	// ID of the range is held it returns an error wrapping
	// ErrWorkerIDsExhausted. Worker IDs outside the range are never
	// touched: they may be another region's.
	Acquire(ctx context.Context, req LeaseRequest) (Grant, error)
	// Renew extends the lease of workerID to ttl from now and raises its
	// reserved second to reserved (never lowers it), if token still owns
	// it, whether or not the lease has expired meanwhile. When token is no
	// longer the owner it returns an error wrapping ErrLeaseTaken. When
	// the record is older than what this owner had acknowledged (its
	// reserved second below verified, or gone) it writes nothing and
	// returns an error wrapping ErrLeaseRegression.
	Renew(ctx context.Context, workerID uint64, token string, ttl time.Duration, reserved, verified int64) error
	// Release frees the worker ID at once if token still owns it, keeping
	// its reserved second for the next owner: raised to verified (what the
	// store had acknowledged to this owner, should it have forgotten it),
	// then lowered to usedUpTo when that is smaller (the owner declares it
	// issued no ID for a later second; never lower than the previous
	// owner's reservation). When token is no longer the owner it returns
	// an error wrapping ErrLeaseTaken.
	Release(ctx context.Context, workerID uint64, token string, usedUpTo, verified int64) error
}

// LeaseRequest is what Acquire records.
type LeaseRequest struct {
	Token string // the new owner's token, unique per claim
	// MinWorkerID..MaxWorkerID is the range to claim from: the region's
	// (regions.go), or 0 to the layout's largest worker ID.
	MinWorkerID uint64
	MaxWorkerID uint64
	TTL         time.Duration
	Host        Host
}

// Grant is an acquired lease.
type Grant struct {
	WorkerID     uint64
	Token        string
	PrevReserved int64 // the last second an earlier owner reserved, as the store has it (0: none)
}

func ceilSeconds(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// LeaseConfig configures a LeaseAssigner and its leases.
type LeaseConfig struct {
	TTL          time.Duration // lease length; renewed every TTL/3
	ReserveChunk time.Duration // how far ahead seconds are reserved, rounded up to whole seconds
	// RetryFor is how long Claim retries a failing store before it gives
	// up (0: one attempt).
	RetryFor time.Duration
	Host     Host
	Clock    uidcore.Clock // wall clock for reserved seconds; nil: SystemClock
	Logger   *slog.Logger  // nil: slog.Default()
	// StoreName names the store in logs and errors, e.g. "MySQL at
	// 10.0.0.5:3306"; never a secret.
	StoreName string
	// Region and Regions restrict claims to the region's range (see
	// Config); zero: every worker ID of the layout.
	Region  string
	Regions Regions
	// LossWindow is W (Config.LossWindow): a lease issues only seconds
	// of a reservation that a renewal started at least W after its write
	// confirmed (Lease.Until); 0: every acknowledged reservation.
	LossWindow time.Duration
}

// LeaseConfigFrom fills LeaseConfig from a Config (its logger included).
func LeaseConfigFrom(cfg Config, host Host, storeName string) LeaseConfig {
	cfg = cfg.WithDefaults()
	return LeaseConfig{
		TTL:          cfg.LeaseTTL,
		ReserveChunk: cfg.ReserveChunk,
		RetryFor:     cfg.StoreStartupDeadline,
		Host:         host,
		Logger:       cfg.Logger,
		StoreName:    storeName,
		Region:       cfg.Region,
		Regions:      cfg.Regions,
		LossWindow:   cfg.LossWindow(),
	}
}

// LeaseAssigner hands out leased worker IDs from a LeaseStore. It
// implements uidcore.Assigner.
type LeaseAssigner struct {
	store       LeaseStore
	cfg         LeaseConfig
	regressions atomic.Uint64
}

// NewLeaseAssigner returns an assigner leasing worker IDs from store.
func NewLeaseAssigner(store LeaseStore, cfg LeaseConfig) (*LeaseAssigner, error) {
	if cfg.TTL < time.Second/10 {
		return nil, fmt.Errorf("workerid: lease TTL %s is too short", cfg.TTL)
	}
	if cfg.ReserveChunk <= 0 {
		return nil, fmt.Errorf("workerid: reserve chunk %s must be positive", cfg.ReserveChunk)
	}
	if cfg.Clock == nil {
		cfg.Clock = uidcore.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &LeaseAssigner{store: store, cfg: cfg}, nil
}

// Regressions is how many times a lease of this assigner found its
// record older than what the store had acknowledged to it (for the
// uid_store_regressions_total metric).
func (a *LeaseAssigner) Regressions() uint64 { return a.regressions.Load() }

// Claim implements uidcore.Assigner; the claim is a *Lease.
func (a *LeaseAssigner) Claim(ctx context.Context, layout uidcore.Layout) (uidcore.Claim, error) {
	l, err := a.ClaimLease(ctx, layout)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// ClaimLease leases the lowest free worker ID of the layout and reserves
// its first seconds. It retries a failing store for RetryFor; it does not
// retry ErrWorkerIDsExhausted. The caller must Release the lease (after
// closing the generator built on it) to stop its heartbeat.
func (a *LeaseAssigner) ClaimLease(ctx context.Context, layout uidcore.Layout) (*Lease, error) {
	if err := layout.Validate(); err != nil {
		return nil, err
	}
	span, err := a.cfg.Regions.claimRange(a.cfg.Region, layout)
	if err != nil {
		return nil, err
	}
	var lease *Lease
	err = RetryStore(ctx, a.cfg.RetryFor, a.cfg.Logger, "claim a worker ID from "+a.cfg.StoreName, func(ctx context.Context) error {
		g, err := a.store.Acquire(ctx, LeaseRequest{Token: newToken(), MinWorkerID: span.Lo, MaxWorkerID: span.Hi, TTL: a.cfg.TTL, Host: a.cfg.Host})
		if errors.Is(err, ErrWorkerIDsExhausted) {
			return Permanent(fmt.Errorf("%w (%d worker IDs %s, layout %s, all leased in %s)", err, span.Len(), a.describeRange(span), layout, a.cfg.StoreName))
		}
		if err != nil {
			return err
		}
		if !span.Contains(g.WorkerID) {
			// A store that ignored the range: never issue IDs from a worker
			// ID that may be another region's.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.TTL)
			_ = a.store.Release(rctx, g.WorkerID, g.Token, g.PrevReserved, g.PrevReserved)
			cancel()
			return Permanent(fmt.Errorf("workerid: %s granted worker ID %d, outside the range %s: %w", a.cfg.StoreName, g.WorkerID, a.describeRange(span), uidcore.ErrWorkerRange))
		}
		l := newLease(a.store, g, a.cfg, &a.regressions)
		if err := l.start(ctx); err != nil {
			// Without a first reservation the lease is useless: give the
			// worker ID back rather than leave it to expire.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.TTL)
			_ = a.store.Release(rctx, g.WorkerID, g.Token, g.PrevReserved, g.PrevReserved) // no ID was issued
			cancel()
			return fmt.Errorf("workerid: first reservation of worker ID %d: %w", g.WorkerID, err)
		}
		lease = l
		return nil
	})
	if err != nil {
		return nil, err
	}
	lease.log.Info("workerid: leased worker ID", event.Key, event.LeaseAcquired, "range", a.describeRange(span), secondAttr(event.AttrAfter, lease.After()),
		secondAttr(event.AttrReserved, lease.reserved.Load()), "ttl", a.cfg.TTL, "loss_window", a.cfg.LossWindow)
	return lease, nil
}

// describeRange names the range claimed from, for messages.
func (a *LeaseAssigner) describeRange(span WorkerRange) string {
	if a.cfg.Regions.IsZero() {
		return span.String()
	}
	return fmt.Sprintf("%s of region %s", span, a.cfg.Region)
}

// Lease is a leased worker ID with its time reservation. It implements
// uidcore.Claim, uidcore.Reserver and uidcore.Warming. A background
// goroutine renews the lease every TTL/3 and extends the reservation in
// chunks; Release stops it.
//
// With a loss window W the store may forget any write it acknowledged
// in the last W, the claim itself included, so the lease issues only
// seconds of a durable reservation (Until): one that a renewal started
// at least W after the write confirmed, without a regression, still in
// the record. Nobody then issues a second the store can forget, and a
// new owner starts right after the reservation it reads (After), with no
// margin (verify/lease.pml, D1 and D2).
type Lease struct {
	store LeaseStore
	grant Grant
	ttl   time.Duration
	chunk int64 // seconds reserved ahead
	// lossWindow is W: a reservation acknowledged at t is durable once a
	// renewal started at t+W or later succeeds (0: at once).
	lossWindow time.Duration
	// after is the last second this owner must not issue: the previous
	// owner's reservation, as the store has it.
	after       int64
	clock       uidcore.Clock
	log         *slog.Logger
	regressions *atomic.Uint64 // the assigner's count

	reserved atomic.Int64 // last second reserved in the store (as far as this process knows)
	// verified is the reserved second the store last acknowledged to this
	// owner (the record's at the claim before the first renewal): a
	// record below it is a regression.
	verified atomic.Int64
	// durable is the last second of the reservation the store can no
	// longer forget: what Until hands the generator. Below reserved by up
	// to W and a renewal interval when W is not 0.
	durable atomic.Int64
	// unconfirmed are the reservations acknowledged but not yet durable,
	// oldest first; only the renewing goroutine (start, then heartbeat)
	// touches them.
	unconfirmed []acknowledged
	ready       chan struct{} // closed once durable is past after
	readyOnce   sync.Once
	retired     atomic.Int64          // last second the generator may have used, once it stopped (0: not yet)
	demanded    atomic.Int64          // the highest second a generator asked for
	invalid     atomic.Pointer[error] // nil until the lease is lost for good or released
	// expired is the error of a lease not renewed before its local
	// deadline (nil while renewals get through). It stops nothing: the
	// reserved seconds stay this lease's whoever takes the worker ID over.
	expired  atomic.Pointer[error]
	origin   time.Time    // monotonic origin of deadline
	deadline atomic.Int64 // local lease deadline, nanoseconds after origin

	mu      sync.Mutex // serialises validity changes
	lostErr error      // set once, when lost for good or released
	expiry  *time.Timer
	done    chan struct{}

	wake        chan struct{}
	ctx         context.Context // cancelled by Release
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	releaseOnce sync.Once
	releaseErr  error
}

// acknowledged is a reservation the store acknowledged at a moment
// (monotonic): durable once a renewal started W after it succeeds.
type acknowledged struct {
	second int64
	at     time.Time
}

func newLease(store LeaseStore, g Grant, cfg LeaseConfig, regressions *atomic.Uint64) *Lease {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Lease{
		store:       store,
		grant:       g,
		ttl:         cfg.TTL,
		chunk:       ceilSeconds(cfg.ReserveChunk),
		lossWindow:  max(cfg.LossWindow, 0),
		after:       g.PrevReserved,
		clock:       cfg.Clock,
		log:         cfg.Logger.With(event.AttrWorker, g.WorkerID, event.AttrOwner, ownerID(g.Token), "store", cfg.StoreName),
		regressions: regressions,
		origin:      time.Now(),
		done:        make(chan struct{}),
		ready:       make(chan struct{}),
		wake:        make(chan struct{}, 1),
		ctx:         ctx,
		cancel:      cancel,
	}
	l.verified.Store(g.PrevReserved)
	l.durable.Store(g.PrevReserved)
	return l
}

// start makes the first reservation and starts the heartbeat.
func (l *Lease) start(ctx context.Context) error {
	l.expiry = time.AfterFunc(time.Hour, l.checkExpiry)
	l.expiry.Stop()
	if err := l.renewOnce(ctx); err != nil {
		l.cancel()
		return err
	}
	l.wg.Add(1)
	go l.heartbeat()
	return nil
}

// WorkerID implements uidcore.Claim.
func (l *Lease) WorkerID() uint64 { return l.grant.WorkerID }

// After implements uidcore.Claim: the last second the previous owner of
// the worker ID reserved, as the store has it. Generators start strictly
// after it. No margin is needed for a store that forgets up to W: no
// owner issued a second of a reservation the store could still forget
// (Until).
func (l *Lease) After() int64 { return l.after }

// Until implements uidcore.Claim: the last second of the durable
// reservation, the one the store can no longer forget (with W = 0 every
// acknowledged reservation). It returns an error wrapping
// uidcore.ErrClaimLost once the lease is lost for good (ErrLeaseTaken,
// ErrLeaseRegression, ErrReleased). Until a fresh lease's first
// reservation is durable it is After: nothing may be issued (Ready).
//
// A lease not renewed in time (the store unreachable: a failover, a cut)
// keeps its reserved seconds: a later owner of the worker ID starts
// strictly after the last second this lease reserved, so issuing those
// seconds stays safe whether or not the store answers, and the generator
// stops by itself when they run out, since nothing can extend them. See
// Expired.
func (l *Lease) Until() (int64, error) {
	if p := l.invalid.Load(); p != nil {
		return 0, *p
	}
	return l.durable.Load(), nil
}

// Ready implements uidcore.Warming: it is closed once the lease's first
// reservation is durable, W and a renewal after the claim (at once after
// the claim with W = 0). It stays open on a lease lost before that (Done).
func (l *Lease) Ready() <-chan struct{} { return l.ready }

// DurableIn is how long a fresh lease waits at most, from its claim,
// until its first reservation is durable: W and a renewal's round trip
// (the renewal is scheduled W after the first reservation's write); 0
// with W = 0.
func (l *Lease) DurableIn() time.Duration { return l.lossWindow }

// Reserve implements uidcore.Reserver: a generator wants to issue IDs for
// second. The heartbeat extends the reservation at once when second comes
// near its end.
func (l *Lease) Reserve(second int64) {
	for {
		d := l.demanded.Load()
		if second <= d || l.demanded.CompareAndSwap(d, second) {
			break
		}
	}
	if l.needsExtension(l.reserved.Load(), second) {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// Done is closed when the lease is lost for good (another owner took the
// worker ID) or released; Err then says which. The dispenser watches it to
// claim a new worker ID and build a new generator.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err is nil until Done is closed, then an error wrapping
// uidcore.ErrClaimLost and ErrLeaseTaken or ErrReleased.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr
}

// RenewNow renews at once rather than at the next interval: the store
// may have forgotten acknowledged writes without a request failing (its
// epoch changed), and the renewal's regression check says whether this
// lease's were among them. Ignored while renewals fail (they retry).
func (l *Lease) RenewNow() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// TimeLeft is how long the lease stays valid without another renewal (0
// when expired or lost): for telemetry.
func (l *Lease) TimeLeft() time.Duration {
	if l.Err() != nil {
		return 0
	}
	return max(0, time.Duration(l.deadline.Load())-time.Since(l.origin))
}

// LeaseStatus is a snapshot of a lease for monitoring.
type LeaseStatus struct {
	WorkerID uint64
	After    int64         // the previous owner's last reserved second
	Reserved int64         // the last second reserved in the store
	Durable  int64         // the last second of the durable reservation (Until)
	TimeLeft time.Duration // until the local deadline
	Err      error         // nil while valid; wraps uidcore.ErrClaimLost once lost for good
	Expired  error         // not renewed in time: issuing only Reserved's seconds (see Lease.Expired)
}

// Status returns a snapshot of the lease.
func (l *Lease) Status() LeaseStatus {
	_, err := l.Until()
	return LeaseStatus{WorkerID: l.grant.WorkerID, After: l.after, Reserved: l.reserved.Load(), Durable: l.durable.Load(), TimeLeft: l.TimeLeft(), Err: err, Expired: l.Expired()}
}

// Release implements uidcore.Claim: it stops the heartbeat and frees the
// worker ID in the store at once, keeping the reserved second for the next
// owner. Close the generator built on the lease first. When the store
// cannot be reached the worker ID frees itself when the lease expires.
func (l *Lease) Release(ctx context.Context) error {
	l.releaseOnce.Do(func() {
		l.cancel()
		l.wg.Wait()
		l.mu.Lock()
		alreadyLost := l.lostErr != nil
		if !alreadyLost {
			l.setLost(ErrReleased)
		}
		l.expiry.Stop()
		l.mu.Unlock()
		if alreadyLost {
			return
		}
		usedUpTo := int64(math.MaxInt64)
		if r := l.retired.Load(); r > 0 {
			usedUpTo = max(r, l.after)
		}
		err := l.store.Release(ctx, l.grant.WorkerID, l.grant.Token, usedUpTo, l.verified.Load())
		switch {
		case errors.Is(err, ErrLeaseTaken):
			l.log.Warn("workerid: released a lease that another owner had taken already")
		case err != nil:
			l.releaseErr = fmt.Errorf("workerid: release worker ID %d (it frees itself when the lease expires in at most %s): %w", l.grant.WorkerID, l.ttl, err)
		default:
			// The store keeps the smaller of the reservation and what the
			// generator used: that is the next owner's start.
			l.log.Info("workerid: released worker ID", event.Key, event.LeaseReleased,
				secondAttr(event.AttrReserved, l.reserved.Load()), secondAttr(event.AttrKept, min(l.reserved.Load(), usedUpTo)))
		}
	})
	return l.releaseErr
}

// Retire implements uidcore.Retirer: the generator on this lease stopped
// and issued no ID for a second after lastSecond, so Release may hand the
// rest of the reservation back.
func (l *Lease) Retire(lastSecond int64) {
	for {
		r := l.retired.Load()
		if lastSecond <= r || l.retired.CompareAndSwap(r, lastSecond) {
			return
		}
	}
}

// Done returns the channel that is closed when claim is lost for good, or
// nil (never ready) for a claim that cannot be lost, such as a disposable
// worker ID.
func Done(claim uidcore.Claim) <-chan struct{} {
	if c, ok := claim.(interface{ Done() <-chan struct{} }); ok {
		return c.Done()
	}
	return nil
}

// needsExtension says whether a reservation up to reserved leaves less
// than half a chunk beyond second.
func (l *Lease) needsExtension(reserved, second int64) bool {
	return reserved-second < (l.chunk+1)/2
}

// target is the reserved second the next renewal asks for: unchanged while
// at least half a chunk remains beyond max(wall clock, demanded second),
// else a full chunk beyond it. Never before the previous owner's second.
// With a loss window every renewal moves it a full chunk ahead: what the
// generator may issue is the reservation of W and a renewal ago, so the
// chunk must cover that lag (Config.Validate).
func (l *Lease) target() int64 {
	base := max(l.clock.Now().Unix(), l.demanded.Load(), l.after+1)
	cur := l.reserved.Load()
	if l.lossWindow > 0 {
		return max(cur, base+l.chunk)
	}
	if !l.needsExtension(cur, base) {
		return cur
	}
	return base + l.chunk
}

// renewOnce renews the lease and, on success, moves the local deadline to
// TTL after the moment the request was sent: the store's expiry is later
// than that, so this process stops before anyone may take over.
func (l *Lease) renewOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, max(l.ttl/3, 100*time.Millisecond))
	defer cancel()
	sent := time.Now()
	target := l.target()
	if err := l.store.Renew(ctx, l.grant.WorkerID, l.grant.Token, l.ttl, target, l.verified.Load()); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostErr != nil {
		return nil
	}
	if target > l.reserved.Load() {
		l.reserved.Store(target)
		l.log.Debug("workerid: lease reservation extended", event.Key, event.LeaseReserved, secondAttr(event.AttrReserved, target))
	}
	if target > l.verified.Load() {
		l.verified.Store(target)
	}
	l.confirm(sent, target)
	deadline := sent.Add(l.ttl)
	l.deadline.Store(int64(deadline.Sub(l.origin)))
	l.expiry.Reset(time.Until(deadline))
	if l.expired.Load() != nil {
		l.expired.Store(nil)
		l.log.Warn("workerid: lease renewed after it had expired: reserving seconds again", event.Key, event.LeaseRecovered, secondAttr(event.AttrReserved, target))
	}
	return nil
}

// confirm moves the durable reservation on after a renewal sent at sent
// succeeded without a regression (the record still held every
// reservation acknowledged to this owner) and reserved up to target: the
// reservations acknowledged at least W before sent are durable, and
// target, acknowledged now, waits its turn. l.mu must be held.
func (l *Lease) confirm(sent time.Time, target int64) {
	if l.lossWindow == 0 {
		if r := l.reserved.Load(); r > l.durable.Load() {
			l.durable.Store(r)
			l.log.Debug("workerid: lease reservation durable", event.Key, event.LeaseDurable, secondAttr(event.AttrReserved, r))
		}
		l.markReady()
		return
	}
	n := 0
	for _, a := range l.unconfirmed {
		if sent.Sub(a.at) < l.lossWindow {
			break
		}
		l.durable.Store(max(l.durable.Load(), a.second))
		n++
	}
	l.unconfirmed = append(l.unconfirmed[:0], l.unconfirmed[n:]...)
	if last := len(l.unconfirmed) - 1; target > l.durable.Load() && (last < 0 || target > l.unconfirmed[last].second) {
		l.unconfirmed = append(l.unconfirmed, acknowledged{second: target, at: time.Now()})
	}
	if n > 0 {
		l.log.Debug("workerid: lease reservation durable", event.Key, event.LeaseDurable, secondAttr(event.AttrReserved, l.durable.Load()))
	}
	if l.durable.Load() > l.after {
		l.markReady()
	}
}

func (l *Lease) markReady() { l.readyOnce.Do(func() { close(l.ready) }) }

// untilConfirmable is how long until the oldest unconfirmed reservation
// can be confirmed by a renewal starting then; ok is false when none
// waits.
func (l *Lease) untilConfirmable() (wait time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.unconfirmed) == 0 {
		return 0, false
	}
	return max(time.Until(l.unconfirmed[0].at.Add(l.lossWindow)), 0), true
}

// checkExpiry runs when the local deadline may have passed.
func (l *Lease) checkExpiry() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostErr != nil || l.expired.Load() != nil {
		return
	}
	if left := time.Duration(l.deadline.Load()) - time.Since(l.origin); left > 0 {
		l.expiry.Reset(left)
		return
	}
	err := fmt.Errorf("%w: worker ID %d, no successful renewal within %s", ErrLeaseExpired, l.grant.WorkerID, l.ttl)
	l.expired.Store(&err)
	l.log.Warn("workerid: lease not renewed before its deadline: issuing only the seconds already reserved until a renewal gets through",
		event.Key, event.LeaseExpired, secondAttr(event.AttrReserved, l.reserved.Load()))
}

// Expired is the error of a lease not renewed before its deadline
// (wrapping ErrLeaseExpired), nil while renewals get through. The store
// may then let another instance take the worker ID over, which this
// lease learns at its next renewal (ErrLeaseTaken, lost for good);
// meanwhile it issues only the seconds it had reserved.
func (l *Lease) Expired() error {
	if p := l.expired.Load(); p != nil {
		return *p
	}
	return nil
}

// setLost marks the lease lost for good; l.mu must be held.
func (l *Lease) setLost(cause error) {
	l.lostErr = &LostError{WorkerID: l.grant.WorkerID, Cause: cause}
	l.invalid.Store(&l.lostErr)
	close(l.done)
}

// heartbeat renews the lease every TTL/3, and at once when a generator
// needs more seconds; after a failure it retries sooner (the retry
// policy, at most TTL/10 apart, so that renewals fit in the TTL),
// ignoring wake-ups so that an unreachable store is not hammered.
func (l *Lease) heartbeat() {
	defer l.wg.Done()
	interval := l.ttl / 3
	pauses := retry.Policy{Max: min(max(l.ttl/10, retry.DefaultMin), time.Second)}.Start()
	first := interval
	if wait, ok := l.untilConfirmable(); ok {
		first = min(first, wait+time.Millisecond)
	}
	timer := time.NewTimer(first)
	defer timer.Stop()
	failing := false
	for {
		wake := l.wake
		if failing {
			wake = nil
		}
		select {
		case <-l.ctx.Done():
			return
		case <-timer.C:
		case <-wake:
		}
		err := l.renewOnce(l.ctx)
		switch {
		case err == nil:
			if failing {
				l.log.Info("workerid: lease renewal works again")
			}
			failing = false
			pauses.Reset()
			next := interval
			if wait, ok := l.untilConfirmable(); ok {
				// The renewal that makes a reservation durable as soon as
				// it can be: a fresh lease's first ID waits for it.
				next = min(next, wait+time.Millisecond)
			}
			timer.Reset(next)
		case errors.Is(err, ErrLeaseRegression):
			l.regressed(err)
			return
		case errors.Is(err, ErrLeaseTaken):
			l.mu.Lock()
			if l.lostErr == nil {
				l.setLost(err)
				l.expiry.Stop()
			}
			l.mu.Unlock()
			l.log.Error("workerid: lease taken over by another owner: this worker ID is lost for good", event.Key, event.LeaseLost, secondAttr(event.AttrReserved, l.reserved.Load()))
			return
		case l.ctx.Err() != nil:
			return
		default:
			pause := pauses.Next()
			if !failing {
				l.log.Warn("workerid: lease renewal failed; retrying", "error", err, "time_left", l.TimeLeft(), "in", pause)
			} else {
				l.log.Debug("workerid: lease renewal failed again; retrying", "error", err, "in", pause)
			}
			failing = true
			timer.Reset(pause)
		}
	}
}

// leaseError is a condition of a lease; its Detail is its message
// without the package's name.
type leaseError string

func (e leaseError) Error() string  { return "workerid: " + string(e) }
func (e leaseError) Detail() string { return string(e) }

// LostError is uidcore.ErrClaimLost for a lease: lost for good because
// of Cause (ErrLeaseTaken, ErrLeaseRegression, ErrReleased).
type LostError struct {
	WorkerID uint64
	Cause    error
}

func (e *LostError) Error() string {
	return fmt.Sprintf("%s: %s: worker ID %d", uidcore.ErrClaimLost, e.Cause, e.WorkerID)
}

func (e *LostError) Unwrap() []error { return []error{uidcore.ErrClaimLost, e.Cause} }

// Detail is the cause's, with the worker ID.
func (e *LostError) Detail() string {
	d := uidcore.Detail(e.Cause)
	if d == "" {
		d = e.Cause.Error()
	}
	return fmt.Sprintf("%s: worker ID %d", d, e.WorkerID)
}

// regressed stops the lease at once on a regression (the store forgot
// writes it had acknowledged to this owner), counts and logs it, and
// gives the worker ID back with its reservation raised to what the store
// had acknowledged, so that the next owner starts after every second this
// one may have issued. The dispenser then claims again (Done); the new
// lease issues once its own first reservation is durable.
func (l *Lease) regressed(err error) {
	l.mu.Lock()
	if l.lostErr == nil {
		l.setLost(err)
		l.expiry.Stop()
	}
	l.mu.Unlock()
	l.regressions.Add(1)
	verified := l.verified.Load()
	l.log.Error("workerid: the store forgot lease writes it had acknowledged: no more IDs under this worker ID; claiming another",
		event.Key, event.LeaseRegression, event.AttrWorker, l.grant.WorkerID, event.AttrRemembered, verified, "error", err)
	l.log.Error("workerid: store regression", event.Key, event.StoreRegression, "record", "lease", event.AttrWorker, l.grant.WorkerID)
	ctx, cancel := context.WithTimeout(context.Background(), max(l.ttl/3, time.Second))
	defer cancel()
	if rerr := l.store.Release(ctx, l.grant.WorkerID, l.grant.Token, math.MaxInt64, verified); rerr != nil {
		l.log.Warn("workerid: could not raise the forgotten lease back to its acknowledged reservation (no ID of it was issued beyond its durable part)", "error", rerr)
	}
}

// newToken is a random owner token, unique per claim.
func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// ownerID names a lease's owner in the log (event.AttrOwner): stable for
// the lease, distinct between leases, and not the token itself, which
// renews the lease in the store.
func ownerID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:8])
}

// permanentError stops RetryStore.
type permanentError struct{ error }

func (p permanentError) Unwrap() error { return p.error }

// Permanent marks err as one RetryStore must return at once.
func Permanent(err error) error { return permanentError{err} }

// RetryStore runs op until it succeeds, returns a Permanent error, ctx is
// done, or within has passed; then the error wraps ErrStoreUnavailable
// and op's last error. Retries pause as the retry policy says (from 50ms
// to 2s, with jitter). what names the operation in the log (never a
// secret).
func RetryStore(ctx context.Context, within time.Duration, log *slog.Logger, what string, op func(context.Context) error) error {
	if log == nil {
		log = slog.Default()
	}
	within = max(within, 0) // negative: one attempt
	start := time.Now()
	deadline := start.Add(within)
	var pauses retry.Backoff
	for attempt := 1; ; attempt++ {
		// A hung attempt must not use up the whole deadline.
		opCtx, cancel := context.WithTimeout(ctx, max(min(time.Until(deadline), 10*time.Second), 2*time.Second))
		err := op(opCtx)
		cancel()
		if err == nil {
			if attempt > 1 {
				log.Info("workerid: store reachable again", "op", what, "attempts", attempt, "after", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		var p permanentError
		if errors.As(err, &p) {
			return p.error
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %s: %w (last error: %w)", ErrStoreUnavailable, what, ctx.Err(), err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w: %s: still failing after %s (%d attempts): %w", ErrStoreUnavailable, what, within, attempt, err)
		}
		if attempt == 1 {
			log.Warn("workerid: store not reachable; retrying", "op", what, "error", err, "for", left.Round(time.Millisecond))
		} else {
			log.Debug("workerid: store still not reachable; retrying", "op", what, "attempt", attempt, "error", err, "for", left.Round(time.Millisecond))
		}
		if retry.Sleep(ctx, min(pauses.Next(), left)) != nil {
			return fmt.Errorf("%w: %s: %w (last error: %w)", ErrStoreUnavailable, what, ctx.Err(), err)
		}
	}
}

// DisposableClaim checks a worker ID that a disposable assigner
// took from its store (UidGenerator's WORKER_NODE auto-increment, or the
// KV counter): beyond the layout's range it is a *DisposableRangeError,
// never wrapped, since a wrapped worker ID collides with the instance
// that had it first.
func (c Config) DisposableClaim(workerID uint64, layout uidcore.Layout, source string) (uidcore.Claim, error) {
	if workerID > layout.MaxWorkerID() {
		return nil, &DisposableRangeError{Source: source, WorkerID: workerID, Layout: layout, ModeVar: c.Name("Mode")}
	}
	return uidcore.StaticClaim{ID: workerID}, nil
}

// AwaitLossWindow is a disposable start's wait of W (LossWindow) between
// writing its record (a WORKER_NODE row, a KV node key) and reading it
// back, by when the store has made the record durable or lost it: it
// logs why the start is not serving yet, then waits through wait
// (retry.Sleep, or a test's clock). It returns W; with W = 0 it waits
// nothing and there is nothing to read back.
func (c Config) AwaitLossWindow(ctx context.Context, log *slog.Logger, wait func(context.Context, time.Duration) error, workerID uint64, record string) (time.Duration, error) {
	w := c.LossWindow()
	if w <= 0 {
		return 0, nil
	}
	log.Info("workerid: disposable worker ID claimed; waiting the store's loss window before issuing, then reading "+record+" back",
		event.AttrWorker, workerID, "loss_window", w, "setting", c.Name("StoreLossWindow"))
	return w, wait(ctx, w)
}

// RangeChecker is implemented by assigners that can tell before claiming
// (and before the fleet is recorded) that no claim of theirs can fit the
// layout: the MySQL store in disposable mode, whose WORKER_NODE rows only
// grow. The dispenser asks it first, so that a start bound to fail
// changes nothing in the store.
type RangeChecker interface {
	// CheckRange returns a *DisposableRangeError when a claim is bound to
	// be refused, and nil otherwise (also when it cannot tell).
	CheckRange(ctx context.Context, layout uidcore.Layout) error
}

// DisposableRangeError: a disposable store's next worker ID is beyond the
// layout's worker range. Disposable worker IDs only grow (every start
// takes a new one, as UidGenerator's WORKER_NODE does), so no later start
// can succeed either: it matches ErrWorkerIDsExhausted and
// uidcore.ErrWorkerRange. Assigners that can tell before taking one
// (Before) refuse without taking it.
type DisposableRangeError struct {
	Source   string // the store and table or key
	WorkerID uint64 // the ID it handed out, or the smallest it would hand out next
	Layout   uidcore.Layout
	ModeVar  string // the worker-mode variable, for the advice
	Before   bool   // refused before taking an ID: nothing was used up
}

func (e *DisposableRangeError) Error() string {
	what := "handed out worker ID %d"
	if e.Before {
		what = "would hand out worker ID %d or above (nothing taken)"
	}
	return fmt.Sprintf("workerid: %s "+what+", beyond the layout's largest %d (%d worker bits): disposable worker IDs only grow and are never reused. "+
		"Use a layout with UidGenerator's widths and a later epoch (28/22/13@<epoch>), or %s=%s on its own table (docs/operations.md, \"Migrating from UidGenerator\")",
		e.Source, e.WorkerID, e.Layout.MaxWorkerID(), e.Layout.WorkerBits, e.ModeVar, ModeLeased)
}

// Unwrap makes errors.Is match ErrWorkerIDsExhausted and
// uidcore.ErrWorkerRange.
func (e *DisposableRangeError) Unwrap() []error {
	return []error{ErrWorkerIDsExhausted, uidcore.ErrWorkerRange}
}

// secondAttr logs a unix second as the number (which tools such as the
// soak read) and, beside it as key_time, the RFC 3339 instant a person
// reads.
// Second 0 is a worker ID no instance has issued with: its time reads
// "new", not 1970-01-01T00:00:00Z, which looks like a bug.
func secondAttr(key string, second int64) slog.Attr {
	when := "new"
	if second != 0 {
		when = time.Unix(second, 0).UTC().Format(time.RFC3339)
	}
	return slog.Group("", slog.Int64(key, second), slog.String(key+"_time", when))
}
