package dispenser

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/retry"
	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/telemetry"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
	"github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore"
)

// Option adjusts how Start builds an instance.
type Option func(*options)

type options struct {
	log       *slog.Logger
	telemetry *telemetry.Telemetry
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// Dispenser is one running instance: a worker claim, the cached generator
// on it and the NATS service that hands its IDs out.
type Dispenser struct {
	cfg      Config
	log      *slog.Logger
	url      string           // resolved NATS URL, redacted
	embedded *natsio.Embedded // nil when another server is used
	claimNC  *natsconn.Conn   // the KV assigner's connection (nil with MySQL)
	svcNC    *natsconn.Conn   // the service's connection
	assigner uidcore.Assigner
	svc      *natsio.Service
	blocks   *natsio.BlockPublisher // nil unless DISPENSER_BLOCKS_ENABLED
	seq      *sequence.Allocator    // nil when the store's sequences are off

	telemetry instanceTelemetry

	mu     sync.Mutex
	claim  uidcore.Claim
	joined workerid.Fleet   // the fleet record joinFleet read
	source *generatorSource // the generator on claim, swapped by reclaim; nil before Start made it
	// notIssuing: the ID endpoints are out of the queue group until swap
	// has them join it again (leaveQueueGroup). The claim watcher's
	// goroutine sets it; /readyz reads it.
	notIssuing atomic.Bool
	// seqOut: the sequences' next and batch are out of the queue group
	// while their store is out of reach (watchSequences).
	seqOut atomic.Bool

	stopWatch    context.CancelFunc
	watchDone    chan struct{}
	seqWatchDone chan struct{} // closed when watchSequences ends (at once without sequences)
	done         chan struct{} // closed when the instance can no longer serve, or by Shutdown
	doneOnce     sync.Once
	doneErr      error
	shutdown     sync.Once
	shutErr      error
}

// Start brings an instance up: NATS (the configured server, or the local
// one, started embedded when none listens), a worker claim, the ring
// buffer, and the service in its queue group. It fails fast, naming what
// failed, when NATS or the worker-ID store is unreachable or refuses the
// credentials.
func Start(ctx context.Context, cfg Config, opts ...Option) (_ *Dispenser, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := options{log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	d := &Dispenser{cfg: cfg, log: o.log, done: make(chan struct{}), watchDone: make(chan struct{}), seqWatchDone: make(chan struct{})}
	var cleanup []func()
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				cleanup[i]()
			}
		}
	}()

	url, closeNATS, err := d.connectNATS(ctx)
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, closeNATS)

	// ctx, not the NATS connect timeout: the store is waited for up to its own
	// DISPENSER_STORE_STARTUP_DEADLINE.
	closeAssigner, err := d.openAssigner(ctx, url)
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, closeAssigner)

	if err := d.joinFleet(ctx); err != nil {
		return nil, err
	}
	if err := d.openSequences(ctx); err != nil {
		return nil, err
	}
	if d.seq != nil {
		// Nothing is held before the service starts: a failed start loses
		// no numbers, and a later one gives them back.
		cleanup = append(cleanup, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = d.closeSequences(ctx)
		})
	}
	claim, err := d.claimAtStart(ctx)
	if err != nil {
		return nil, err
	}
	d.claim = claim // before telemetry, whose readiness check and lease gauge read it
	// The claim awaitIssuing ends on, which may be a new one.
	cleanup = append(cleanup, func() { releaseQuietly(d.currentClaim(), d.log) })
	if err := d.startTelemetry(ctx, o.telemetry, claim.WorkerID()); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { _ = d.stopTelemetry(context.Background()) })
	if claim, err = d.awaitIssuing(ctx, claim); err != nil {
		return nil, err
	}
	gen, err := d.newGenerator(claim)
	if err != nil {
		return nil, fmt.Errorf("dispenser: ring buffer: %w", err)
	}
	source := newGeneratorSource(gen, cfg.TakeWait)
	cleanup = append(cleanup, func() { source.Close() })
	d.mu.Lock() // the metrics server may read the claim already
	d.claim, d.source = claim, source
	d.mu.Unlock()

	tel := d.telemetry.tel
	svcCfg := cfg.serviceConfig()
	svcCfg.Version = Build().Version
	svcCfg.Logger = d.log
	svcCfg.ClaimStatus = d.claimStatus
	svcCfg.Sequences = d.sequenceSource()
	svcCfg.SequenceHomes = cfg.sequenceHomes()
	svcCfg.RegionOf = cfg.regionOf()
	svcCfg.TracerProvider, svcCfg.MeterProvider = tel.TracerProvider(), tel.MeterProvider()
	d.svc, err = natsio.NewService(d.svcNC.Conn, source, svcCfg)
	if err != nil {
		return nil, fmt.Errorf("dispenser: %w", err)
	}

	if cfg.BlocksEnabled {
		blocks := cfg.blocksConfig(d.log)
		blocks.TracerProvider = tel.TracerProvider()
		d.blocks, err = natsio.NewBlockPublisher(ctx, d.svcNC.Conn, source, blocks)
		if err != nil {
			d.svc.Stop()
			return nil, fmt.Errorf("dispenser: %w", err)
		}
		d.log.Info("publishing ID blocks", "stream", cfg.BlocksStream, "subject", cfg.BlocksSubject,
			"block_size", cfg.BlockSize, "target_depth", cfg.BlocksTargetDepth)
	}
	if err := d.observeComponents(); err != nil {
		if d.blocks != nil {
			_ = d.blocks.Stop(context.Background())
		}
		d.svc.Stop()
		return nil, err
	}

	watchCtx, stopWatch := context.WithCancel(context.Background())
	d.stopWatch = stopWatch
	go d.watchClaim(watchCtx)
	if d.seq != nil {
		go d.watchSequences(watchCtx)
	} else {
		close(d.seqWatchDone)
	}
	go d.watchConn()
	d.telemetry.serving.Store(true)

	layout := cfg.Layout()
	d.log.Info("serving",
		event.Key, event.Serving,
		event.AttrWorker, claim.WorkerID(),
		"subjects", cfg.SubjectPrefix+".{next,batch,parse}",
		"sequences", d.sequenceNames(),
		"queue_group", cfg.QueueGroup,
		"layout", layout.String(),
		"epoch", layout.EpochText(),
		"runway_end", layout.TimeText(layout.RunwayEnd()),
		"ids", idsNote(layout),
		"nats", d.url,
		"service_id", d.svc.ID())
	return d, nil
}

// claimAtStart claims a worker ID for a starting instance, checked
// against the generation it joined.
func (d *Dispenser) claimAtStart(ctx context.Context) (uidcore.Claim, error) {
	claim, err := d.assigner.Claim(ctx, d.cfg.Layout())
	if err != nil {
		return nil, fmt.Errorf("dispenser: claim a worker ID: %w", err)
	}
	if err := d.checkGeneration(ctx); err != nil {
		releaseQuietly(claim, d.log)
		return nil, err
	}
	return claim, nil
}

// awaitIssuing waits, before the instance joins the queue group, until
// it can answer at once: its worker claim's first reservation durable
// (with a loss window W, W and a renewal after the claim: workerid.Lease
// Until) and its sequences settled (sequence.SettleFor). Until then the
// queue group's other members serve, and /readyz says not ready; a lone
// instance's clients get no responders rather than 503s after waiting.
// It returns the claim to serve on: claim, or the one that replaced it
// (awaitFirstDurable).
func (d *Dispenser) awaitIssuing(ctx context.Context, claim uidcore.Claim) (uidcore.Claim, error) {
	wait := time.Duration(0)
	if l, ok := claim.(interface{ DurableIn() time.Duration }); ok {
		wait = l.DurableIn()
	}
	if d.seq != nil {
		wait = max(wait, time.Until(d.seq.SettledAt()))
	}
	if wait <= 0 {
		return claim, nil
	}
	d.log.Info("not joining the queue group yet: with a loss window, IDs come only from a reservation the store can no longer forget, and sequences settle first",
		event.Key, event.LeaseAwaitingDurable, event.AttrWorker, claim.WorkerID(), "wait", wait.Round(time.Millisecond), "loss_window", d.cfg.StoreLossWindow,
		"note", EnvPrefix+"_STORE_LOSS_WINDOW=0 only for stores meeting every obligation of docs/operations.md, What the guarantees assume")
	claim, err := d.awaitFirstDurable(ctx, claim)
	if err != nil {
		return nil, err
	}
	if d.seq != nil {
		if err := retry.Sleep(ctx, time.Until(d.seq.SettledAt())); err != nil {
			return nil, fmt.Errorf("dispenser: waiting for the sequences to settle: %w", err)
		}
	}
	return claim, nil
}

// awaitFirstDurable waits until claim can issue and returns it; when
// claim is lost for good first, it claims a worker ID afresh and waits
// for that one, as often as it takes. Safe because nothing was issued
// under a claim lost before its first reservation was durable: no
// generator is built on it before then, and its Until stays at After
// (the previous owner's reservation) until then. Such a loss is a
// failover that took the claim back (a regression: the lease gave the
// worker ID back raised to what the store had acknowledged to it) or
// another owner taking the forgotten worker ID over; the new claim is
// the one a restart would make (verify/lease.pml: a lost lease's next
// step is a new Acquire). The pause before it is the retry policy's,
// jittered: instances that one failover cost their claims do not claim
// again in lockstep.
func (d *Dispenser) awaitFirstDurable(ctx context.Context, claim uidcore.Claim) (uidcore.Claim, error) {
	var pauses retry.Backoff
	for {
		err := awaitReady(ctx, claim)
		if !errors.Is(err, uidcore.ErrClaimLost) {
			return claim, err
		}
		releaseQuietly(claim, d.log) // stops what is left of its lease; writes nothing
		pause := pauses.Next()
		d.log.Warn("worker claim lost before its first reservation was durable, so nothing was issued under it; claiming a worker ID afresh",
			event.Key, event.ClaimLostAtStart, event.AttrPrevious, claim.WorkerID(), "err", err, "in", pause)
		if err := retry.Sleep(ctx, pause); err != nil {
			return nil, fmt.Errorf("dispenser: claiming a worker ID again: %w", err)
		}
		if claim, err = d.claimAtStart(ctx); err != nil {
			return nil, err
		}
		d.mu.Lock() // /readyz and the lease gauge read it
		d.claim = claim
		d.mu.Unlock()
	}
}

// awaitReady waits until claim can issue (uidcore.Ready), failing when it
// is lost meanwhile (an error wrapping uidcore.ErrClaimLost) or ctx ends.
func awaitReady(ctx context.Context, claim uidcore.Claim) error {
	select {
	case <-uidcore.Ready(claim):
		return nil
	case <-workerid.Done(claim):
		_, err := claim.Until()
		return fmt.Errorf("dispenser: worker ID %d lost before its first reservation was durable: %w", claim.WorkerID(), err)
	case <-ctx.Done():
		return fmt.Errorf("dispenser: waiting for worker ID %d's first durable reservation: %w", claim.WorkerID(), ctx.Err())
	}
}

// connectNATS reaches NATS (the configured server, or the local one,
// started embedded when none listens), connects the service's connection
// and returns the URL and how to close what it opened.
func (d *Dispenser) connectNATS(ctx context.Context) (url string, _ func(), err error) {
	var cleanup []func()
	closeAll := func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	url = d.cfg.NATSURL
	if url == "" {
		var emb *natsio.Embedded
		url, emb, err = natsio.LocalServer(ctx, natsio.EmbeddedConfig{Addr: d.cfg.EmbeddedAddr, StoreDir: d.cfg.EmbeddedDataDir, Logger: d.log})
		if err != nil {
			return "", nil, fmt.Errorf("dispenser: no DISPENSER_NATS_URL and no local NATS server: %w", err)
		}
		if emb != nil {
			d.embedded = emb
			cleanup = append(cleanup, emb.Shutdown)
			d.log.Info("started embedded nats-server with JetStream", "url", url, "data_dir", dataDirOrDefault(d.cfg.EmbeddedDataDir))
		} else {
			d.log.Info("using the NATS server already listening", "url", url)
		}
	}
	d.url = natsconn.RedactURL(url)

	connectCtx, cancel := context.WithTimeout(ctx, d.cfg.NATSConnectTimeout)
	defer cancel()
	// Waited for like the store: NATS may come up after the dispenser.
	// Each connection's events name it: the two drop together when the
	// server goes, and two identical lines would read as one logged twice.
	d.svcNC, err = natsconn.ConnectWaiting(connectCtx, d.cfg.connConfig(url, "uid-dispenser", d.log.With("conn", "service")))
	if err != nil {
		return "", nil, fmt.Errorf("dispenser: %w", err)
	}
	cleanup = append(cleanup, func() { d.svcNC.Close() })
	d.embeddedLossWindow()
	return url, closeAll, nil
}

// embeddedLossWindow sets W to 0 for a zero-config run on the embedded
// nats-server (this instance's or another's on 127.0.0.1:4222), unless
// the loss window was chosen (in the environment, or a Config other than
// the default): that server meets every obligation of
// docs/operations.md "What the guarantees assume" for the KV store (it
// syncs every write, one node, a recent release), and with the default
// W a first start would wait 2 minutes before serving.
func (d *Dispenser) embeddedLossWindow() {
	_, chosen := os.LookupEnv(EnvPrefix + "_STORE_LOSS_WINDOW")
	if d.cfg.NATSURL != "" || d.cfg.MySQLDSN != "" || chosen ||
		d.cfg.StoreLossWindow != DefaultConfig().StoreLossWindow || d.svcNC.Conn.ConnectedServerName() != natsio.EmbeddedServerName {
		return
	}
	d.cfg.StoreLossWindow = 0
	d.log.Info("the embedded nats-server syncs every write: no loss window (set "+EnvPrefix+"_STORE_LOSS_WINDOW to choose one)", "loss_window", 0)
}

// openAssigner sets up the configured worker-ID store and returns how to
// close it.
func (d *Dispenser) openAssigner(ctx context.Context, url string) (func(), error) {
	cfg := d.cfg.workerIDConfig(d.log)
	var err error
	// UidGenerator's container variables (JPAAS_*) and Kubernetes' name
	// the instance in the store.
	if cfg.Host, err = workerid.DetectHost(os.Getenv); err != nil {
		return nil, fmt.Errorf("dispenser: %w", err)
	}
	if d.cfg.MySQLDSN != "" {
		a, err := mysqlstore.NewAssigner(ctx, d.cfg.mysqlConfig(cfg))
		if err != nil {
			return nil, fmt.Errorf("dispenser: %w", err) // the store says it is MySQL, where and what to set
		}
		d.assigner = a
		return func() { a.Close() }, nil
	}
	// The KV assigner has a connection of its own, so lease renewals never
	// queue behind service traffic and the service's connection can be
	// drained at shutdown while the lease is still released over NATS.
	connectCtx, cancel := context.WithTimeout(ctx, d.cfg.NATSConnectTimeout)
	defer cancel()
	conn, err := natsconn.ConnectWaiting(connectCtx, d.cfg.connConfig(url, "uid-dispenser worker claim", d.log.With("conn", "worker claim")))
	if err != nil {
		return nil, fmt.Errorf("dispenser: %w", err)
	}
	kv := d.cfg.kvConfig(cfg)
	a, err := kvstore.NewAssigner(ctx, conn.Conn, kv)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("dispenser: worker-ID store (JetStream KV bucket %s): %w", kv.KVBucket(), err)
	}
	d.claimNC, d.assigner = conn, a
	return func() { conn.Close() }, nil
}

// openSequences sets up the named sequences on the worker-ID store and
// declares DISPENSER_SEQUENCES there. Like the worker-ID store's, its
// calls to the store retry what may pass (JetStream without quorum: 503)
// up to DISPENSER_STORE_STARTUP_DEADLINE, and fail at once on what
// cannot (workerid.Permanent: a refusal, a missing table; the names were
// validated with the configuration).
func (d *Dispenser) openSequences(ctx context.Context) error {
	keeper, ok := d.assigner.(sequence.Keeper)
	if !ok {
		if d.cfg.Sequences != "" {
			return fmt.Errorf("dispenser: DISPENSER_SEQUENCES is set, but the worker-ID store (%T) keeps no sequences", d.assigner)
		}
		return nil
	}
	var store sequence.SegmentStore
	var err error
	if d.cfg.Sequences == "" {
		// An instance that declares none may run where the sequence table
		// does not exist and may not be created (DISPENSER_CREATE_TABLES=false
		// on a store set up before sequences): it serves IDs without them,
		// at once.
		if store, err = keeper.Sequences(ctx); err != nil {
			d.log.Warn("named sequences off: their store is not usable", "err", err)
			return nil
		}
	} else {
		err = workerid.RetryStore(ctx, d.cfg.StoreStartupDeadline, d.log, "open the sequence store", func(ctx context.Context) (err error) {
			store, err = keeper.Sequences(ctx)
			return err
		})
		if err != nil {
			return fmt.Errorf("dispenser: sequence store: %w", err)
		}
	}
	decls, err := d.cfg.declaredHere()
	if err != nil {
		return err
	}
	alloc, err := sequence.NewAllocator(store, d.cfg.sequenceConfig(d.log))
	if err != nil {
		return fmt.Errorf("dispenser: %w", err)
	}
	err = workerid.RetryStore(ctx, d.cfg.StoreStartupDeadline, d.log, "declare the sequences", func(ctx context.Context) error {
		return alloc.Declare(ctx, decls)
	})
	if err != nil {
		alloc.Abandon()
		return fmt.Errorf("dispenser: DISPENSER_SEQUENCES: %w", err)
	}
	d.seq = alloc
	d.warnUnservedSequences()
	return nil
}

// sequenceSource is the allocator for the service, nil (no sequence
// endpoints) without one: a nil *Allocator in the interface would not be.
func (d *Dispenser) sequenceSource() natsio.SequenceSource {
	if d.seq == nil {
		return nil
	}
	return d.seq
}

func (d *Dispenser) sequenceNames() []string {
	if d.seq == nil {
		return nil
	}
	homes := d.cfg.sequenceHomes()
	var names []string
	for _, s := range d.seq.Stats() {
		if homes == nil || homes[s.Name] == d.cfg.Region {
			names = append(names, s.Name) // with regions, those served here
		}
	}
	return names
}

// closeSequences gives the unused rest of the sequences' segments back
// (compare-and-set: only where no instance took a later one since).
func (d *Dispenser) closeSequences(ctx context.Context) error {
	if d.seq == nil {
		return nil
	}
	if err := d.seq.Close(ctx); err != nil {
		return fmt.Errorf("dispenser: give back sequence segments: %w", err)
	}
	return nil
}

// Sequences is the allocator of the named sequences (nil when the store
// keeps none), for its stats.
func (d *Dispenser) Sequences() *sequence.Allocator { return d.seq }

// watchClaim replaces a claim that is lost for good (its lease taken over
// by another instance): it claims a new worker ID, builds a new generator
// and swaps it into the source the service and the block publisher take
// from. Meanwhile the requests already delivered wait for it, up to
// DISPENSER_TAKE_WAIT, then get 503s; when the new claim cannot issue at
// once (a loss window W above 0: it waits W and a renewal) or none can
// be made, the ID endpoints leave the queue group until the swap
// (leaveQueueGroup), so that new requests go to the other members.
func (d *Dispenser) watchClaim(ctx context.Context) {
	defer close(d.watchDone)
	for {
		d.mu.Lock()
		lost := workerid.Done(d.claim)
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-lost:
		}
		if err := d.reclaim(ctx); err != nil {
			return // ctx ended, or the fleet moved to a new generation (the instance finished)
		}
	}
}

func (d *Dispenser) reclaim(ctx context.Context) error {
	d.mu.Lock()
	oldClaim := d.claim
	d.mu.Unlock()
	_, lostErr := oldClaim.Until()
	d.log.Error("worker claim lost for good; claiming a new worker ID", "worker_id", oldClaim.WorkerID(), "err", lostErr)
	if d.cfg.StoreLossWindow > 0 {
		// A new claim issues only once its first reservation is
		// durable, W and a renewal from now.
		d.leaveQueueGroup(oldClaim, "a new worker claim issues only once its first reservation is durable")
	}
	var pauses retry.Backoff
	for {
		claim, err := d.assigner.Claim(ctx, d.cfg.Layout())
		if err == nil {
			// The loss may be a new generation's revocation: an instance
			// of the old one must not serve on.
			err = d.checkGeneration(ctx)
			if errors.Is(err, workerid.ErrGenerationChanged) {
				releaseQuietly(claim, d.log)
				d.log.Error("not serving under a new worker ID: the fleet moved to a new generation", event.Key, event.FleetGeneration, "err", err)
				d.finish(err)
				return err
			}
			var gen *uidcore.CachedGenerator
			if err == nil {
				// Meanwhile the lost claim's generator answers 503s and
				// /readyz says not ready (claimStatus).
				err = awaitReady(ctx, claim)
			}
			if err == nil {
				if gen, err = d.newGenerator(claim); err == nil {
					d.swap(ctx, oldClaim, claim, gen)
					return nil
				}
			}
			releaseQuietly(claim, d.log)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d.leaveQueueGroup(oldClaim, "no new worker ID yet")
		pause := pauses.Next()
		d.log.Error("claiming a new worker ID failed; retrying", "err", err, "in", pause)
		if err := retry.Sleep(ctx, pause); err != nil {
			return err
		}
	}
}

// leaveQueueGroup takes the ID endpoints out of the queue group while
// the instance cannot issue (lost is the claim lost for good, why what
// it waits for), so that the group's other members answer instead of
// this one's 503s; swap brings them back. Requests already delivered wait for the new
// generator as before (generatorSource), up to the take wait.
func (d *Dispenser) leaveQueueGroup(lost uidcore.Claim, why string) {
	if d.notIssuing.Swap(true) {
		return
	}
	if err := d.svc.SetIssuing(false); err != nil {
		d.log.Warn("leaving the queue group of the ID endpoints was not confirmed", "err", err)
	}
	d.log.Warn("not issuing IDs: the ID endpoints left the queue group until a new worker ID can issue",
		event.Key, event.NotIssuing, event.AttrPrevious, lost.WorkerID(), "why", why, "loss_window", d.cfg.StoreLossWindow)
}

// swap puts the generator on the new claim in place of the old one's,
// closes the old generator and releases its claim.
func (d *Dispenser) swap(ctx context.Context, oldClaim, claim uidcore.Claim, gen *uidcore.CachedGenerator) {
	d.mu.Lock()
	d.claim = claim
	d.mu.Unlock()
	old := d.source.Replace(gen)
	// Takes waiting on the old generator move to the new one when it
	// closes.
	old.Close()
	releaseQuietly(oldClaim, d.log)
	d.joinQueueGroup(ctx)
	d.log.Info("serving under a new worker ID", event.Key, event.WorkerChanged, event.AttrWorker, claim.WorkerID(), event.AttrPrevious, oldClaim.WorkerID(), "service_id", d.svc.ID())
}

// joinQueueGroup advertises the service on the new claim and, after
// leaveQueueGroup, subscribes the ID endpoints to the queue group again.
// Out of the group, the instance serves no IDs until that succeeds, so a
// failure (the server refused the subscriptions, say in a reconnect) is
// retried, with /readyz false meanwhile; in the group all along, a
// failure only leaves the metadata showing the previous worker ID.
func (d *Dispenser) joinQueueGroup(ctx context.Context) {
	var pauses retry.Backoff
	for {
		err := d.svc.SetIssuing(true)
		if err == nil {
			d.notIssuing.Store(false)
			return
		}
		if !d.notIssuing.Load() {
			d.log.Warn("the service's metadata still shows the previous worker ID", "err", err)
			return
		}
		pause := pauses.Next()
		d.log.Warn("joining the queue group of the ID endpoints again failed; retrying", "err", err, "in", pause)
		if retry.Sleep(ctx, pause) != nil {
			return
		}
	}
}

// watchConn ends the instance when the service's connection closes for
// good without a shutdown (it reconnects for ever otherwise, so this means
// the server refused it, say its credentials were revoked).
func (d *Dispenser) watchConn() {
	<-d.svcNC.Closed()
	d.finish(errors.New("dispenser: the NATS connection closed"))
}

// finish closes Done, with the reason when it is a failure.
func (d *Dispenser) finish(err error) {
	d.doneOnce.Do(func() {
		d.doneErr = err
		close(d.done)
	})
}

// currentClaim is the claim the instance holds (reclaim and a start's
// awaitFirstDurable replace it).
func (d *Dispenser) currentClaim() uidcore.Claim {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.claim
}

func (d *Dispenser) claimStatus() error {
	d.mu.Lock()
	claim := d.claim
	d.mu.Unlock()
	_, err := claim.Until()
	return err
}

// WorkerID is the worker ID the instance currently holds.
func (d *Dispenser) WorkerID() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.claim.WorkerID()
}

// ServiceID is the micro service instance ID (`nats micro ls`).
func (d *Dispenser) ServiceID() string { return d.svc.ID() }

// NATSURL is the NATS URL in use, secrets redacted.
func (d *Dispenser) NATSURL() string { return d.url }

// Embedded reports whether the instance runs the embedded nats-server.
func (d *Dispenser) Embedded() bool { return d.embedded != nil }

// Done is closed when the instance can no longer serve (see Err).
func (d *Dispenser) Done() <-chan struct{} { return d.done }

// Err says why Done was closed; nil before and after a Shutdown.
func (d *Dispenser) Err() error {
	select {
	case <-d.done:
		return d.doneErr
	default:
		return nil
	}
}

// Shutdown stops gracefully: it leaves the queue group so peers take the
// traffic, answers the requests already delivered, closes the generator,
// gives the unused rest of the sequences' segments back, releases the
// worker claim, closes the connections and the embedded
// server. It gives up waiting when ctx ends and then closes what is left at
// once; the claim is released in every case.
func (d *Dispenser) Shutdown(ctx context.Context) error {
	d.shutdown.Do(func() { d.shutErr = d.doShutdown(ctx) })
	return d.shutErr
}

func (d *Dispenser) doShutdown(ctx context.Context) error {
	d.finish(nil)
	d.stopWatch()
	<-d.watchDone
	<-d.seqWatchDone
	var errs []error
	if d.blocks != nil {
		// Before the connection drains and the generator closes; the
		// blocks already published stay valid.
		if err := d.blocks.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := d.svc.Stop(); err != nil {
		errs = append(errs, err)
	}
	if err := d.svcNC.DrainAndWait(ctx); err != nil {
		errs = append(errs, fmt.Errorf("dispenser: finishing in-flight requests: %w", err))
	}
	d.mu.Lock()
	claim := d.claim
	d.mu.Unlock()
	d.source.Close()
	releaseCtx := ctx
	if ctx.Err() != nil {
		// Out of time, but a released claim frees the worker ID at once:
		// give it a moment of its own.
		var cancel context.CancelFunc
		releaseCtx, cancel = context.WithTimeout(context.Background(), time.Second)
		defer cancel()
	}
	// After the service stopped and its requests were answered (no number
	// is handed out any more), before the store closes.
	if err := d.closeSequences(releaseCtx); err != nil {
		errs = append(errs, err)
	}
	if err := claim.Release(releaseCtx); err != nil {
		errs = append(errs, fmt.Errorf("dispenser: release worker ID %d: %w", claim.WorkerID(), err))
	}
	if c, ok := d.assigner.(io.Closer); ok {
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if d.claimNC != nil {
		if err := d.claimNC.DrainAndWait(releaseCtx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := d.stopTelemetry(releaseCtx); err != nil {
		errs = append(errs, err)
	}
	if d.embedded != nil {
		d.embedded.Shutdown()
		// The other instances on it see their connections drop: this
		// line says why.
		d.log.Info("stopped the embedded nats-server; instances using it reconnect when a server listens there again", "url", d.url)
	}
	d.log.Info("stopped", "worker_id", claim.WorkerID())
	return errors.Join(errs...)
}

// Run starts an instance, serves until ctx is done (SIGINT/SIGTERM in
// cmd/dispenser) or the instance can no longer serve, then shuts down
// within cfg.ShutdownTimeout. A shutdown after ctx ended returns nil even
// when it ran out of time (it is logged), so that the process exits 0.
func Run(ctx context.Context, cfg Config, opts ...Option) error {
	d, err := Start(ctx, cfg, opts...)
	if err != nil {
		return err
	}
	var failure error
	select {
	case <-ctx.Done():
		d.log.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	case <-d.Done():
		failure = d.Err()
		d.log.Error("cannot serve any more; shutting down", "err", failure)
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := d.Shutdown(sctx); err != nil {
		d.log.Warn("shutdown was not clean", "err", err)
	}
	return failure
}

func releaseQuietly(claim uidcore.Claim, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := claim.Release(ctx); err != nil {
		log.Warn("releasing a worker claim failed", "worker_id", claim.WorkerID(), "err", err)
	}
}

func dataDirOrDefault(dir string) string {
	if dir == "" {
		return natsio.DefaultStoreDir()
	}
	return dir
}

// idsNote says in the start-up log what range the layout's IDs stay in,
// for the whole runway: JavaScript clients need to know whether a Number
// holds them.
func idsNote(l uidcore.Layout) string {
	if l.JSSafe() {
		return fmt.Sprintf("JS-safe: every ID is at most %d (2^%d-1 <= 2^53-1), exact as a JavaScript Number", l.MaxID(), l.Bits())
	}
	return fmt.Sprintf("up to %d (2^%d-1): above 2^53, keep them as strings or BigInt in JavaScript", l.MaxID(), l.Bits())
}
