package kvstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/retry"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// Keys of the worker-ID bucket.
const (
	kvCounterKey  = "disposable.last"  // disposable: the last worker ID handed out
	kvNodePrefix  = "disposable.node." // disposable: who got each worker ID (like WORKER_NODE rows)
	kvLeasePrefix = "lease."           // leased: one key per worker ID
)

// Assigner hands out worker IDs from a JetStream key-value bucket, in
// the same two modes as mysqlstore.Assigner: disposable (a
// compare-and-set counter) or leased (one key per worker ID holding owner
// token, expiry and reserved second, written only with revision checks).
// It implements uidcore.Assigner; leased claims are *workerid.Lease.
//
// It needs only what nats-server 2.9 offers: no per-key TTL. Lease expiry
// is a unix-millisecond time in the key's value written from the owner's
// clock and compared with the claimer's clock, so the instances' clocks
// must agree to well within the lease TTL. If they do not, a worker ID may
// be taken over while its owner still renews it: the owner then learns it
// lost the worker ID (its next renewal fails the revision check) and the
// new owner starts after the old reservation, so IDs stay unique; only
// availability suffers.
type Assigner struct {
	js        jetstream.JetStream
	kv        jetstream.KeyValue
	nc        *nats.Conn // for reads at the stream leader and the stream's subjects
	cfg       Config
	host      workerid.Host
	log       *slog.Logger
	storeName string
	leases    *workerid.LeaseAssigner // leased mode
	watch     *streamWatch            // the bucket's loss epoch (kv_epoch.go)

	// disposable mode: refused worker IDs (a store regression), and the
	// wait of W before a node key is read back (a clock: tests replace it)
	refusedNodes atomic.Uint64
	waitLoss     func(ctx context.Context, w time.Duration) error
}

// NewAssigner opens (creating when missing) the bucket cfg.KVBucket()
// on nc (with regions, placed in the cluster named after the region), retrying up to cfg.StoreStartupDeadline while JetStream does not
// answer. A bucket made beforehand (for example with more replicas) is
// used as it is.
func NewAssigner(ctx context.Context, nc *nats.Conn, cfg Config) (*Assigner, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cmp.Or(cfg.Logger, slog.Default())
	host, err := cfg.InstanceHost()
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("kvstore: worker-ID bucket: %w", err)
	}
	bucket := cfg.KVBucket()
	a := &Assigner{js: js, nc: nc, cfg: cfg, host: host, log: logger, waitLoss: retry.Sleep,
		storeName: fmt.Sprintf("NATS KV bucket %s at %s", bucket, natsconn.RedactURL(nc.ConnectedUrlRedacted())),
		watch:     newStreamWatch(nc, bucket, logger)}
	err = workerid.RetryStore(ctx, cfg.StoreStartupDeadline, logger, "open "+a.storeName, func(ctx context.Context) error {
		kv, err := a.openBucket(ctx, bucket)
		var old *natsconn.OldServerError
		if errors.As(err, &old) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return workerid.Permanent(err)
		}
		if errors.Is(err, nats.ErrNoResponders) {
			// Retried: JetStream may still be starting or electing a leader.
			return fmt.Errorf("no JetStream on the server (nobody answers its API): %w", err)
		}
		a.kv = kv
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kvstore: %s: %w", a.storeName, err)
	}
	if cfg.Mode == workerid.ModeLeased {
		store := &kvLeaseStore{kv: a.kv, nc: nc, bucket: bucket, log: logger, watch: a.watch}
		a.leases, err = workerid.NewLeaseAssigner(store, workerid.LeaseConfigFrom(cfg.Config, host, a.storeName))
		if err != nil {
			return nil, err
		}
	}
	if err := a.checkSync(ctx); err != nil {
		return nil, err
	}
	placed := a.placement(ctx)
	logger.Info("kvstore: KV worker-ID store ready", "store", a.storeName, "mode", cfg.Mode, "bucket", bucket, "region", cfg.Region, "cluster", placed)
	if cfg.Region != "" && placed != "" && placed != cfg.Region {
		logger.Warn("kvstore: the region's worker-ID bucket is placed in another cluster: every claim and renewal crosses a gateway",
			"bucket", bucket, "region", cfg.Region, "cluster", placed)
	}
	return a, nil
}

// checkSync applies StoreDurability when the server acknowledges writes
// before it syncs them to disk, where the server tells (only to a
// connection with system-account rights): a power loss then forgets
// leases and counters already acknowledged, and uniqueness rests on the
// loss window covering it (docs/operations.md, "What the guarantees
// assume").
func (a *Assigner) checkSync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	p, ok := natsconn.ReadSyncPolicy(ctx, a.nc)
	if !ok {
		a.log.Info("kvstore: cannot read the server's JetStream sync setting (only a connection without credentials asks, and only the system account or an account importing its VARZ is answered): run the servers holding the bucket with jetstream { sync_interval: always }",
			"store", a.storeName)
		return nil
	}
	if p.Synced() {
		return nil
	}
	interval := "2m (the default)"
	if p.Interval > 0 {
		interval = p.Interval.String()
	}
	return a.cfg.CheckDurability(a.storeName, []string{fmt.Sprintf("nats-server %s syncs JetStream writes to disk every %s, after acknowledging them: set jetstream { sync_interval: always }", p.Server, interval)})
}

// placement is the cluster the bucket's stream lives in ("" on a server
// without clustering, or when the status does not say).
func (a *Assigner) placement(ctx context.Context) string {
	st, err := a.kv.Status(ctx)
	if err != nil {
		return ""
	}
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok && bs.StreamInfo() != nil && bs.StreamInfo().Cluster != nil {
		return bs.StreamInfo().Cluster.Name
	}
	return ""
}

// openBucket opens bucket, creating it when missing; with a region, it
// is created in the cluster of that name (a region is a cluster of the
// supercluster). A replicated bucket, new or found, is refused on a
// server whose compare-and-set it cannot trust
// (natsconn.CheckReplicated).
func (a *Assigner) openBucket(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	kv, err := a.js.KeyValue(ctx, bucket)
	if err == nil {
		return kv, a.checkFound(ctx, kv, bucket)
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, err
	}
	replicas := a.replicas()
	if err := natsconn.CheckReplicated(a.nc, replicas, "KV bucket "+bucket, a.cfg.Name("Replicas")); err != nil {
		return nil, err
	}
	var placement *jetstream.Placement
	if a.cfg.Region != "" {
		placement = &jetstream.Placement{Cluster: a.cfg.Region}
	}
	kv, err = a.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "uid-dispenser worker IDs",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Placement:   placement,
	})
	if errors.Is(err, jetstream.ErrBucketExists) { // created by another instance meanwhile
		if kv, err = a.js.KeyValue(ctx, bucket); err == nil {
			return kv, a.checkFound(ctx, kv, bucket)
		}
		return nil, err
	}
	if err == nil {
		a.log.Info("kvstore: created the worker-ID bucket", "bucket", bucket, "replicas", replicas, "cluster", a.nc.ConnectedClusterName())
	}
	return kv, err
}

// replicas is the replica count of a new bucket: the setting, else 3 in a
// clustered JetStream (as many servers as it has, when fewer), else 1.
func (a *Assigner) replicas() int {
	if a.cfg.Replicas > 0 {
		return a.cfg.Replicas
	}
	n := natsconn.ClusterSize(a.nc)
	if n == 0 {
		return 1
	}
	if n < 3 {
		a.log.Warn("kvstore: a cluster of fewer than 3 servers: the new worker-ID bucket gets fewer than 3 replicas, and one disk lost loses its leases and counters",
			"servers", n, "replicas", n, "setting", a.cfg.Name("Replicas"))
	}
	return min(n, 3)
}

// checkFound refuses a bucket found replicated on a server whose
// compare-and-set is not safe on it.
func (a *Assigner) checkFound(ctx context.Context, kv jetstream.KeyValue, bucket string) error {
	st, err := kv.Status(ctx)
	if err != nil {
		return err
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok || bs.StreamInfo() == nil {
		return nil
	}
	return natsconn.CheckReplicated(a.nc, bs.StreamInfo().Config.Replicas, "KV bucket "+bucket, a.cfg.Name("Replicas"))
}

// Regressions is how many times a lease found its record older than what
// the store had acknowledged to it (workerid.LeaseAssigner.Regressions),
// or in disposable mode how many worker IDs were refused (claimDisposable).
func (a *Assigner) Regressions() uint64 {
	if a.leases == nil {
		return a.refusedNodes.Load()
	}
	return a.leases.Regressions()
}

// StreamRegressions is how many times the bucket's stream was found with
// its last sequence below one it had acknowledged to this instance
// (uid_store_regressions_total{record="stream"}).
func (a *Assigner) StreamRegressions() uint64 { return a.watch.regressions.Load() }

// EpochChanges is how many times the bucket's stream may have forgotten
// acknowledged writes without a request failing, as far as this instance
// read it (uid_store_epoch_changes_total): a new stream leader, the
// stream's last sequence gone back, a reconnect, a lease regression.
func (a *Assigner) EpochChanges() uint64 { return a.watch.changes() }

// Claim implements uidcore.Assigner. Leased mode returns a
// *workerid.Lease; disposable mode takes the next value of the counter, or
// fails with workerid.ErrWorkerIDsExhausted beyond the layout's range
// (without consuming it).
func (a *Assigner) Claim(ctx context.Context, layout uidcore.Layout) (uidcore.Claim, error) {
	if a.leases != nil {
		l, err := a.leases.ClaimLease(ctx, layout)
		if err != nil {
			return nil, err
		}
		a.watch.watchLease(l)
		return l, nil
	}
	if err := layout.Validate(); err != nil {
		return nil, err
	}
	return a.claimDisposable(ctx, layout)
}

// kvNode is the value of a disposable.node.<id> key.
type kvNode struct {
	Host       string `json:"host"`
	Port       string `json:"port"`
	Type       int    `json:"type"`
	LaunchedMs int64  `json:"launched_ms"`
	// Token is the start's random token: what it must read back W later
	// (kv_disposable.go). Empty in keys written before it.
	Token string `json:"token,omitempty"`
}

// nextDisposable advances the counter with compare-and-set, retrying lost
// races. A worker ID beyond the layout is returned without being taken,
// for DisposableClaim to refuse.
func (a *Assigner) nextDisposable(ctx context.Context, layout uidcore.Layout) (uint64, error) {
	for {
		var next uint64
		e, err := a.kv.Get(ctx, kvCounterKey)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			_, err = a.kv.Create(ctx, kvCounterKey, []byte("0"))
		case err != nil:
			return 0, err
		default:
			last, perr := strconv.ParseUint(string(e.Value()), 10, 64)
			if perr != nil {
				return 0, workerid.Permanent(fmt.Errorf("kvstore: key %s of %s holds %q, not a worker ID: fix or remove it", kvCounterKey, a.storeName, kvExcerpt(e.Value())))
			}
			next = last + 1
			if next > layout.MaxWorkerID() {
				return next, nil
			}
			_, err = a.kv.Update(ctx, kvCounterKey, []byte(strconv.FormatUint(next, 10)), e.Revision())
		}
		if lostRace(err) {
			continue
		}
		return next, err
	}
}

// lostRace: a revision check failed because another writer came first.
func lostRace(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// kvExcerpt is the start of a bad value, for an error message.
func kvExcerpt(b []byte) string {
	if len(b) > 32 {
		return string(b[:32]) + "..."
	}
	return string(b)
}

// kvLease is the value of a lease.<id> key.
type kvLease struct {
	Owner     string `json:"owner"`      // token of the owning claim; "" when released
	ExpiresMs int64  `json:"expires_ms"` // unix ms, from the owner's clock; free after it
	Reserved  int64  `json:"reserved"`   // last unix second reserved for IDs; only grows
	Host      string `json:"host"`
	Port      string `json:"port"`
	Type      int    `json:"type"`
	UpdatedMs int64  `json:"updated_ms"`
}

// errBadLease: a lease key's value is not a lease this package wrote.
var errBadLease = errors.New("kvstore: malformed worker lease")

func decodeKVLease(b []byte) (kvLease, error) {
	var l kvLease
	if err := json.Unmarshal(b, &l); err != nil {
		return kvLease{}, fmt.Errorf("%w: %w", errBadLease, err)
	}
	// updated_ms is set on every write of this package: its absence means
	// someone else wrote the key, and its reserved second cannot be trusted.
	if l.Reserved < 0 || l.ExpiresMs < 0 || l.UpdatedMs <= 0 || len(l.Owner) > 64 {
		return kvLease{}, fmt.Errorf("%w: reserved %d, expires %d, updated %d, owner of %d bytes", errBadLease, l.Reserved, l.ExpiresMs, l.UpdatedMs, len(l.Owner))
	}
	return l, nil
}

func (l kvLease) encode() []byte {
	b, _ := json.Marshal(l) // strings and integers only: cannot fail
	return b
}

func leaseKey(id uint64) string { return kvLeasePrefix + strconv.FormatUint(id, 10) }

// kvLeaseStore is workerid.LeaseStore on the bucket.
type kvLeaseStore struct {
	kv     jetstream.KeyValue
	nc     *nats.Conn // for reads at the stream leader (kv_leader.go)
	bucket string
	log    *slog.Logger
	watch  *streamWatch

	// revs is the last revision each owner token wrote (its claim and
	// renewals): the leader answering with an older one forgot them.
	mu   sync.Mutex
	revs map[string]uint64
}

// Acquire implements workerid.LeaseStore: it reads all lease keys once,
// then tries the worker IDs of the request's range from its lowest up
// (keys outside it, another region's, are never written): a missing key with Create, a
// released or expired lease with Update at the revision it read. A failed
// revision check means another claimer won that worker ID: it moves on.
// A malformed or deleted lease is skipped, never overwritten (its reserved
// second is unknown).
func (s *kvLeaseStore) Acquire(ctx context.Context, req workerid.LeaseRequest) (workerid.Grant, error) {
	leases, err := s.snapshot(ctx)
	if err != nil {
		return workerid.Grant{}, err
	}
	// Two passes: worker IDs that serve at once (never used, or reserved
	// at most a second ahead) before those whose dead owner reserved
	// further into the future, which serve only from then on.
	for pass := range 2 {
		for id := req.MinWorkerID; id <= req.MaxWorkerID; id++ {
			g, ok, err := s.tryAcquire(ctx, req, leases, id, pass == 1)
			if err != nil || ok {
				return g, err
			}
		}
	}
	return workerid.Grant{}, fmt.Errorf("%w: every worker ID from %d to %d has a live lease", workerid.ErrWorkerIDsExhausted, req.MinWorkerID, req.MaxWorkerID)
}

// tryAcquire takes worker ID id if it is free; ok reports whether it did.
// Without futureToo it leaves a lease reserved beyond the clock alone.
func (s *kvLeaseStore) tryAcquire(ctx context.Context, req workerid.LeaseRequest, leases map[uint64]jetstream.KeyValueEntry, id uint64, futureToo bool) (workerid.Grant, bool, error) {
	now := time.Now()
	rec := kvLease{Owner: req.Token, ExpiresMs: now.Add(req.TTL).UnixMilli(), Host: req.Host.Name,
		Port: req.Host.Port, Type: int(req.Host.Type), UpdatedMs: now.UnixMilli()}
	var (
		err error
		rev uint64
	)
	e, found := leases[id]
	switch {
	case !found:
		rev, err = s.kv.Create(ctx, leaseKey(id), rec.encode())
	case e.Operation() != jetstream.KeyValuePut:
		// Deleted or purged by hand: the reserved second is gone, so the
		// worker ID is not safe to reuse.
		if !futureToo {
			s.log.Warn("kvstore: skipping a deleted worker lease: its reserved second is unknown", "key", e.Key())
		}
		return workerid.Grant{}, false, nil
	default:
		prev, derr := decodeKVLease(e.Value())
		if derr != nil {
			if !futureToo {
				s.log.Warn("kvstore: skipping a malformed worker lease", "key", e.Key(), "error", derr)
			}
			return workerid.Grant{}, false, nil
		}
		if prev.Owner != "" && prev.ExpiresMs > now.UnixMilli() {
			return workerid.Grant{}, false, nil
		}
		if !futureToo && prev.Reserved > now.Unix()+1 {
			return workerid.Grant{}, false, nil
		}
		rec.Reserved = prev.Reserved
		rev, err = s.kv.Update(ctx, leaseKey(id), rec.encode(), e.Revision())
	}
	if lostRace(err) {
		return workerid.Grant{}, false, nil
	}
	if err != nil {
		return workerid.Grant{}, false, err
	}
	s.wrote(req.Token, rev)
	s.watch.acknowledged(rev)
	return workerid.Grant{WorkerID: id, Token: req.Token, PrevReserved: rec.Reserved}, true, nil
}

// snapshot reads every lease key with its revision.
func (s *kvLeaseStore) snapshot(ctx context.Context) (map[uint64]jetstream.KeyValueEntry, error) {
	w, err := s.kv.Watch(ctx, kvLeasePrefix+"*")
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	out := map[uint64]jetstream.KeyValueEntry{}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("kvstore: lease watcher closed")
			}
			if e == nil { // the initial values are all in
				return out, nil
			}
			if id, err := strconv.ParseUint(strings.TrimPrefix(e.Key(), kvLeasePrefix), 10, 64); err == nil {
				out[id] = e
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Renew implements workerid.LeaseStore.
func (s *kvLeaseStore) Renew(ctx context.Context, workerID uint64, token string, ttl time.Duration, reserved, verified int64) error {
	return s.update(ctx, workerID, token, verified, false, func(l *kvLease, now time.Time) {
		l.ExpiresMs = now.Add(ttl).UnixMilli()
		l.Reserved = max(l.Reserved, reserved)
	})
}

// Release implements workerid.LeaseStore; the reserved second stays,
// raised to verified and lowered to usedUpTo when that is smaller.
func (s *kvLeaseStore) Release(ctx context.Context, workerID uint64, token string, usedUpTo, verified int64) error {
	defer s.forget(token)
	return s.update(ctx, workerID, token, verified, true, func(l *kvLease, _ time.Time) {
		l.Owner = ""
		l.ExpiresMs = 0
		l.Reserved = min(max(l.Reserved, verified), usedUpTo)
	})
}

// update changes token's lease with a revision check, re-reading when
// another write came in between; a lease with another owner (or none),
// as the stream leader has it, is ErrLeaseTaken; one older than what
// token wrote (below verified, a revision below its last write, or gone)
// is ErrLeaseRegression, unless repair is set (a release raising it back).
func (s *kvLeaseStore) update(ctx context.Context, workerID uint64, token string, verified int64, repair bool, change func(*kvLease, time.Time)) error {
	key := leaseKey(workerID)
	fresh := false
	for {
		l, rev, ours, found, err := s.readLease(ctx, key, token, fresh)
		if err != nil {
			return err
		}
		last := s.written(token)
		if !fresh && ours && (rev < last || l.Reserved < verified) {
			fresh = true // a replica may lag: only the leader's word counts
			continue
		}
		// readLease asked the leader for anything not token's.
		if !repair && (rev < last || !found && last > 0) {
			s.watch.changed("lease_regression", workerID)
			return fmt.Errorf("%w: worker ID %d (key %s) is at revision %d (found %v), this owner wrote revision %d", workerid.ErrLeaseRegression, workerID, key, rev, found, last)
		}
		if !ours {
			return fmt.Errorf("%w: worker ID %d (key %s)", workerid.ErrLeaseTaken, workerID, key)
		}
		if l.Reserved < verified && !repair {
			s.watch.changed("lease_regression", workerID)
			return fmt.Errorf("%w: worker ID %d (key %s) reserves up to second %d, the store had acknowledged %d to this owner", workerid.ErrLeaseRegression, workerID, key, l.Reserved, verified)
		}
		now := time.Now()
		change(&l, now)
		l.UpdatedMs = now.UnixMilli()
		rev, err = s.kv.Update(ctx, key, l.encode(), rev)
		if lostRace(err) {
			// Another write came in, or the copy read was behind: the
			// leader says which.
			fresh = true
			continue
		}
		if err == nil {
			s.wrote(token, rev)
			s.watch.acknowledged(rev)
		}
		return err
	}
}

// written is the last revision token wrote (0: none known).
func (s *kvLeaseStore) written(token string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revs[token]
}

// wrote records that token wrote revision rev.
func (s *kvLeaseStore) wrote(token string, rev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.revs == nil {
		s.revs = map[string]uint64{}
	}
	s.revs[token] = max(s.revs[token], rev)
}

// forget drops token's revision once it released its lease.
func (s *kvLeaseStore) forget(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.revs, token)
}
