package dispenser

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/uid-dispenser/uid-dispenser/internal/faultproxy"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// fleetStores runs test on the KV bucket and on MySQL.
func fleetStores(t *testing.T, test func(t *testing.T, url, dsn string)) {
	t.Run("KV", func(t *testing.T) { test(t, testenv.NATS(t, nil).ClientURL(), "") })
	t.Run("MySQL", func(t *testing.T) { test(t, testenv.NATS(t, nil).ClientURL(), testenv.MySQL(t)) })
}

func startErr(cfg Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := Start(ctx, cfg, WithLogger(testLogger()))
	if err == nil {
		_ = d.Shutdown(ctx)
	}
	return err
}

// Once an instance has recorded the fleet, one with another layout,
// epoch, worker mode or subject prefix on the same store refuses to
// start, naming the variables and both values, before it claims a
// worker ID.
func TestFleetRefusesAnotherLayoutModeOrPrefix(t *testing.T) {
	fleetStores(t, func(t *testing.T, url, dsn string) {
		first := start(t, testConfig(url, dsn))
		testenv.CheckDistinct(t, collect(t, client(t, url), 2, 100, nil))
		for _, tc := range []struct {
			name   string
			change func(*Config)
			want   []string
		}{
			{"epoch", func(c *Config) { c.Epoch = Instant{time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }, []string{"DISPENSER_EPOCH", "31/10/22@2025-01-01T00:00:00Z", "31/10/22@2026-01-01T00:00:00Z"}},
			{"bits", func(c *Config) { c.WorkerBits, c.SeqBits = 14, 18 }, []string{"DISPENSER_WORKER_BITS, DISPENSER_SEQ_BITS", "31/14/18@", "31/10/22@"}},
			{"mode", func(c *Config) { c.WorkerMode = workerid.ModeDisposable }, []string{"DISPENSER_WORKER_MODE", "worker mode disposable, the fleet's is leased"}},
			{"prefix", func(c *Config) { c.SubjectPrefix = "ids" }, []string{"DISPENSER_SUBJECT_PREFIX", "subject prefix ids, the fleet's is uid"}},
		} {
			cfg := testConfig(url, dsn)
			tc.change(&cfg)
			err := startErr(cfg)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("%s: Start = %v, want a *ConfigError", tc.name, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %q does not say %q", tc.name, err, w)
				}
			}
		}
		// None of the refused instances took a worker ID.
		if got := workers(t, collect(t, client(t, url), 2, 100, nil)); len(got) != 1 || got[first.WorkerID()] == 0 {
			t.Fatalf("IDs per worker %v: want only the first instance's", got)
		}
	})
}

// The documented way to change a fleet's layout: stop every instance,
// record the new generation, start the new layout. Every new ID is
// larger than every old one (so none repeats), the old layout is
// refused from then on, and a new generation is refused while an
// instance of the old one still holds a lease.
func TestNewGenerationChangesTheLayoutSafely(t *testing.T) {
	fleetStores(t, func(t *testing.T, url, dsn string) {
		// A small ring borrows one second ahead, not eight: the new
		// generation starts after the seconds the old ring was filled for.
		small := testConfig(url, dsn)
		small.BoostPower = 0
		old := start(t, small)
		oldIDs := collect(t, client(t, url), 4, 2000, nil)

		next := small
		next.WorkerBits, next.SeqBits = 14, 18 // the same time shift: starts right after the old reservation
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := NewGeneration(ctx, next, testLogger()); err == nil || !strings.Contains(err.Error(), "leases of generation 1 are live") {
			t.Fatalf("new generation while an instance serves: %v", err)
		}
		shutdown(t, old)

		later := testConfig(url, dsn)
		later.Epoch = Instant{uidcore.DefaultEpoch.Add(24 * time.Hour)} // same widths, later epoch: smaller IDs for a day
		var ce *ConfigError
		if _, err := NewGeneration(ctx, later, testLogger()); !errors.As(err, &ce) || !strings.Contains(err.Error(), "exceeds every ID of generation 1") {
			t.Fatalf("a later epoch with the same widths: %v, want refused", err)
		}

		f, err := NewGeneration(ctx, next, testLogger())
		if err != nil {
			t.Fatal(err)
		}
		maxOld := slices.Max(oldIDs)
		p := uidcoretest.MustParse(t, uidcore.DefaultLayout().Parse, maxOld)
		if f.Generation != 2 || f.Layout != next.Layout().String() || f.StartsAfter < p.Time.Unix() {
			t.Fatalf("recorded %+v; the old generation's last ID is of %s", f, p.Time)
		}
		if err := startErr(testConfig(url, dsn)); !errors.As(err, &ce) {
			t.Fatalf("the old layout after the new generation: %v, want refused", err)
		}
		d := start(t, next)
		newIDs := collect(t, client(t, url), 4, 2000, nil)
		if low := slices.Min(newIDs); low <= maxOld {
			t.Fatalf("new generation issued %d, not above the old generation's %d", low, maxOld)
		}
		testenv.CheckDistinct(t, append(oldIDs, newIDs...))
		if nl := next.Layout(); d.WorkerID() > nl.MaxWorkerID() {
			t.Fatalf("worker ID %d outside the new layout", d.WorkerID())
		}
		// Running it again changes nothing.
		if again, err := NewGeneration(ctx, next, testLogger()); err != nil || again != f {
			t.Fatalf("again: %+v, %v; want %+v", again, err, f)
		}
	})
}

// throughProxy is cfg with its worker-ID store (MySQL, or for the KV
// bucket the NATS server) reached through a proxy: cutting it pauses
// the instance as far as the store can tell.
func throughProxy(t *testing.T, cfg Config) (Config, *faultproxy.Proxy) {
	t.Helper()
	if cfg.MySQLDSN != "" {
		parsed, err := mysql.ParseDSN(cfg.MySQLDSN)
		if err != nil {
			t.Fatal(err)
		}
		proxy := faultproxy.NewProxy(t, parsed.Addr)
		parsed.Addr = proxy.Addr()
		cfg.MySQLDSN = parsed.FormatDSN()
		return cfg, proxy
	}
	proxy := faultproxy.NewProxy(t, strings.TrimPrefix(cfg.NATSURL, "nats://"))
	cfg.NATSURL = "nats://" + proxy.Addr()
	return cfg, proxy
}

// openStore opens cfg's worker-ID store as an instance would, without
// starting one; it is closed when the test ends.
func openStore(ctx context.Context, t *testing.T, cfg Config) *Dispenser {
	t.Helper()
	d := &Dispenser{cfg: cfg, log: testLogger()}
	url, closeNATS, err := d.connectNATS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeNATS)
	closeAssigner, err := d.openAssigner(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeAssigner)
	return d
}

// waitExpired waits until no lease of the store is live and lease (when
// given) knows it expired.
func waitExpired(t *testing.T, fs workerid.FleetStore, lease *workerid.Lease) {
	t.Helper()
	testwait.WaitFor(t, 10*time.Second, "the paused lease expired in the store", func() bool {
		_, live, err := fs.LeaseHorizon(context.Background())
		return err == nil && live == 0 && (lease == nil || lease.Expired() != nil)
	})
}

// The counterexample of verify/fleet.pml -DPAUSED_OLD, on the real
// stores: an old-generation instance cut off from the store (or paused)
// past its lease TTL does not count as live, so a new generation is
// recorded; when the instance comes back it must not reserve, and so
// not issue, any second after the new generation's StartsAfter: its
// lease was revoked, its renewal fails and the claim is lost.
func TestNewGenerationRevokesAPausedOldLease(t *testing.T) {
	fleetStores(t, func(t *testing.T, url, dsn string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		oldCfg := testConfig(url, dsn)
		oldCfg.LeaseTTL, oldCfg.ReserveChunk = time.Second, 2*time.Second
		oldCfg, proxy := throughProxy(t, oldCfg)
		old := openStore(ctx, t, oldCfg)
		if err := old.joinFleet(ctx); err != nil {
			t.Fatal(err)
		}
		claim, err := old.assigner.Claim(ctx, oldCfg.Layout())
		if err != nil {
			t.Fatal(err)
		}
		lease := claim.(*workerid.Lease)
		defer func() { _ = lease.Release(context.Background()) }()

		// The pause: no renewal gets through until the lease expired, in
		// the store as in the instance.
		proxy.Cut()
		admin := testConfig(url, dsn)
		fs := openStore(ctx, t, admin).assigner.(workerid.FleetStore)
		waitExpired(t, fs, lease)

		next := admin
		next.WorkerBits, next.SeqBits = 14, 18
		f, err := NewGeneration(ctx, next, testLogger())
		if err != nil {
			t.Fatal(err)
		}

		// The instance wakes, and its generator wants seconds after the
		// new generation's start.
		proxy.Restore()
		lease.Reserve(f.StartsAfter + 5)
		testwait.WaitFor(t, 15*time.Second, "the woken lease renewed or lost", func() bool {
			select {
			case <-lease.Done():
				return true
			default:
				return lease.Expired() == nil // renewed: the bug
			}
		})
		if st := lease.Status(); st.Reserved > f.StartsAfter {
			t.Fatalf("the old instance reserved up to second %d, after generation %d's StartsAfter %d: its old-layout IDs may repeat new ones", st.Reserved, f.Generation, f.StartsAfter)
		}
		if _, err := lease.Until(); !errors.Is(err, uidcore.ErrClaimLost) || !errors.Is(err, workerid.ErrLeaseTaken) {
			t.Fatalf("the woken old lease: Until = %v, want the claim lost (ErrLeaseTaken)", err)
		}
		if last, _, err := fs.LeaseHorizon(ctx); err != nil || last > f.StartsAfter {
			t.Fatalf("the store's horizon %d (%v) is after StartsAfter %d", last, err, f.StartsAfter)
		}
	})
}

// A dispenser -new-generation that stopped midway leaves the record
// sealed: no instance of the old generation starts on it, and running
// the command again finishes the change.
func TestSealedFleetRefusesOldInstancesUntilTheGenerationIsRecorded(t *testing.T) {
	fleetStores(t, func(t *testing.T, url, dsn string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cfg := testConfig(url, dsn)
		fs := openStore(ctx, t, cfg).assigner.(workerid.FleetStore)
		first, err := fs.RecordFleet(ctx, cfg.fleet())
		if err != nil {
			t.Fatal(err)
		}
		sealed := first
		sealed.Sealed = true
		if err := fs.ReplaceFleet(ctx, first, sealed); err != nil {
			t.Fatal(err)
		}
		if err := startErr(cfg); err == nil || !strings.Contains(err.Error(), "sealed") {
			t.Fatalf("an old instance on a sealed record: %v, want refused", err)
		}
		next := cfg
		next.WorkerBits, next.SeqBits = 14, 18
		f, err := NewGeneration(ctx, next, testLogger())
		if err != nil || f.Generation != 2 || f.Sealed || f.StartsAfter < first.StartsAfter {
			t.Fatalf("finishing the sealed change: %+v, %v", f, err)
		}
		if stored, err := fs.RecordFleet(ctx, cfg.fleet()); err != nil || stored != f {
			t.Fatalf("the store holds %+v (%v), want %+v", stored, err, f)
		}
		start(t, next)
		testenv.CheckDistinct(t, collect(t, client(t, url), 2, 100, nil))
	})
}

// A whole old instance paused past its TTL across a new generation: when
// it comes back, its renewal is refused, and its reclaim sees the new
// record and ends the instance (workerid.ErrGenerationChanged) instead of serving
// old-layout IDs under another worker ID.
func TestOldInstanceBackFromAPauseEndsAfterNewGeneration(t *testing.T) {
	fleetStores(t, func(t *testing.T, url, dsn string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		oldCfg := testConfig(url, dsn)
		oldCfg.LeaseTTL, oldCfg.ReserveChunk = time.Second, 2*time.Second
		oldCfg, proxy := throughProxy(t, oldCfg)
		old, err := Start(ctx, oldCfg, WithLogger(testLogger()))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = old.Shutdown(context.Background()) }()

		proxy.Cut()
		admin := testConfig(url, dsn)
		waitExpired(t, openStore(ctx, t, admin).assigner.(workerid.FleetStore), nil)
		next := admin
		next.WorkerBits, next.SeqBits = 14, 18
		if _, err := NewGeneration(ctx, next, testLogger()); err != nil {
			t.Fatal(err)
		}
		proxy.Restore()
		select {
		case <-old.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("the old instance still runs 20 s after it came back to a new generation")
		}
		if err := old.Err(); !errors.Is(err, workerid.ErrGenerationChanged) {
			t.Fatalf("the old instance ended with %v, want workerid.ErrGenerationChanged", err)
		}
	})
}

// TestLaneClaimsCheckTheGeneration: once the fleet record is sealed for a
// new generation, a lane claim of an old instance is given up (and its
// worker ID released at once), as the instance's own claim would be: an
// old instance paused past the change must not claim a fresh lane,
// reserved past the new generation's start, and pad old-layout IDs on it.
// Before, lanes were claimed from the store with no check.
func TestLaneClaimsCheckTheGeneration(t *testing.T) {
	fleetStores(t, func(t *testing.T, url, dsn string) {
		d := start(t, testConfig(url, dsn))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		lane, err := d.lanes().Claim(ctx, d.cfg.Layout())
		if err != nil {
			t.Fatalf("a lane claim before the change: %v", err)
		}
		releaseQuietly(lane, d.log)
		fs := d.assigner.(workerid.FleetStore)
		sealed := d.joined
		sealed.Sealed = true
		if err := fs.ReplaceFleet(ctx, d.joined, sealed); err != nil {
			t.Fatal(err)
		}
		if _, err := d.lanes().Claim(ctx, d.cfg.Layout()); !errors.Is(err, workerid.ErrGenerationChanged) {
			t.Fatalf("a lane claim on a sealed record: %v, want ErrGenerationChanged", err)
		}
		if _, live, err := fs.LeaseHorizon(ctx); err != nil || live != 1 {
			t.Fatalf("%d leases live after the refused lane claim (%v), want 1: the instance's own", live, err)
		}
	})
}
