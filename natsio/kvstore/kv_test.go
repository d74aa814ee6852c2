package kvstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
	"github.com/uid-dispenser/uid-dispenser/workerid/workeridtest"
)

func kvQuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func withQuietLogger(cfg kvstore.Config) kvstore.Config {
	cfg.Logger = kvQuietLogger()
	return cfg
}

// kvConfig is the suite's configuration of mode on the default bucket.
func kvConfig(mode workerid.Mode) kvstore.Config {
	cfg := kvstore.DefaultConfig()
	cfg.Config = workeridtest.Config(mode)
	return cfg
}

// kvConnect connects to addr, reconnecting quickly and for ever so that the
// outage tests see the store come back promptly.
func kvConnect(t testing.TB, addr string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect("nats://"+addr, nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1),
		nats.NoCallbacksAfterClientClose())
	if err != nil {
		t.Fatalf("connect %s: %v", addr, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func newKVAssigner(t testing.TB, cfg kvstore.Config, addr string) *kvstore.Assigner {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := kvstore.NewAssigner(ctx, kvConnect(t, addr), withQuietLogger(cfg))
	if err != nil {
		t.Fatalf("NewAssigner: %v", err)
	}
	return a
}

// kvStore is a fresh store: its own bucket on the server at addr.
func kvStore(addr, bucket string) workeridtest.Store {
	return workeridtest.Store{
		Addr: addr,
		New: func(t testing.TB, cfg workerid.Config, via string) uidcore.Assigner {
			return newKVAssigner(t, kvstore.Config{Config: cfg, Bucket: bucket}, via)
		},
		LeaseRecord: func(t testing.TB, workerID uint64) []byte {
			e, err := kvBucket(t, addr, bucket).Get(context.Background(), "lease."+strconv.FormatUint(workerID, 10))
			if err != nil {
				t.Fatalf("read lease %d: %v", workerID, err)
			}
			return e.Value()
		},
		PutLeaseRecord: func(t testing.TB, workerID uint64, record []byte) {
			if _, err := kvBucket(t, addr, bucket).Put(context.Background(), "lease."+strconv.FormatUint(workerID, 10), record); err != nil {
				t.Fatalf("write lease %d back: %v", workerID, err)
			}
		},
		SetLossWait: func(a uidcore.Assigner, wait func(context.Context, time.Duration) error) {
			kvstore.SetLossWait(a.(*kvstore.Assigner), wait)
		},
		Starts: func(t testing.TB) map[uint64]string { return kvNodes(t, addr, bucket) },
		// The counter's key and the start's node key purged together.
		ForgetStart: func(t testing.TB, workerID uint64) {
			kvPurge(t, addr, bucket, "disposable.last", "disposable.node."+strconv.FormatUint(workerID, 10))
		},
	}
}

func embeddedAddr(t testing.TB) string {
	srv := testenv.NATS(t, nil)
	return strings.TrimPrefix(srv.ClientURL(), "nats://")
}

// TestKVConformance runs the worker-ID suite on an embedded nats-server
// 2.15, each test with a server of its own.
func TestKVConformance(t *testing.T) {
	workeridtest.Run(t, func(t *testing.T) workeridtest.Store {
		return kvStore(embeddedAddr(t), "uid_workers")
	})
}

// TestKVConformanceNATS29 runs it on the machine's nats-server (2.9, no
// per-key TTL), each test in a bucket of its own, deleted afterwards.
// Skipped when no JetStream server listens on 127.0.0.1:4222.
func TestKVConformanceNATS29(t *testing.T) {
	addr := machineNATS(t)
	workeridtest.Run(t, func(t *testing.T) workeridtest.Store {
		return kvStore(addr, tempBucket(t, addr))
	})
}

// machineNATS is the address of the machine's nats-server (2.9) with
// JetStream; the test is skipped when none listens on 127.0.0.1:4222, or
// fails with UID_REQUIRE_NATS_SERVER=1 (CI: scripts/services.sh starts
// it), so that CI cannot skip the 2.9 tests in silence.
func machineNATS(t *testing.T) string {
	const addr = "127.0.0.1:4222"
	skip := t.Skipf
	if os.Getenv(testenv.RequireNATSServerEnv) == "1" {
		skip = t.Fatalf
	}
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		skip("no nats-server on %s (%s=1 requires it): %v", addr, testenv.RequireNATSServerEnv, err)
	}
	conn.Close()
	nc := kvConnect(t, addr)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		skip("nats-server on %s has no JetStream (%s=1 requires it): %v", addr, testenv.RequireNATSServerEnv, err)
	}
	t.Logf("nats-server %s on %s", nc.ConnectedServerVersion(), addr)
	return addr
}

// tempBucket names a bucket of the test's own on the server at addr,
// deleted when the test ends.
func tempBucket(t *testing.T, addr string) string {
	js, err := jetstream.New(kvConnect(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	bucket := "uid_test_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := js.DeleteKeyValue(ctx, bucket); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			t.Errorf("delete bucket %s: %v", bucket, err)
		}
	})
	return bucket
}

// kvBucket opens the bucket of the tests directly.
func kvBucket(t testing.TB, addr, bucket string) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(kvConnect(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// TestKVMalformedLeaseSkipped: a lease key holding something else, or
// deleted, is never taken over (its reserved second is unknown); the claim
// moves on.
// An owner whose key was overwritten has lost its worker ID for good.
func TestKVMalformedLeaseSkipped(t *testing.T) {
	addr := embeddedAddr(t)
	cfg := kvConfig(workerid.ModeLeased)
	a := newKVAssigner(t, cfg, addr)
	first, err := a.Claim(context.Background(), uidcore.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	kv := kvBucket(t, addr, cfg.Bucket)
	if _, err := kv.Put(context.Background(), "lease.0", []byte("not a lease")); err != nil {
		t.Fatal(err)
	}
	lease := first.(*workerid.Lease)
	select {
	case <-lease.Done():
	case <-time.After(30 * time.Second): // a safety net: the next renewal notices
		t.Fatal("owner of an overwritten lease did not notice within 30s")
	}
	if !errors.Is(lease.Err(), workerid.ErrLeaseTaken) {
		t.Errorf("Err = %v, want ErrLeaseTaken", lease.Err())
	}
	second, err := a.Claim(context.Background(), uidcore.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	if second.WorkerID() != 1 {
		t.Errorf("claim took worker ID %d, want 1 (0 is malformed)", second.WorkerID())
	}
	// A lease deleted by hand lost its reserved second: not reused either.
	if err := second.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(context.Background(), "lease.1"); err != nil {
		t.Fatal(err)
	}
	third, err := a.Claim(context.Background(), uidcore.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	if third.WorkerID() != 2 {
		t.Errorf("claim took worker ID %d, want 2 (0 is malformed, 1 deleted)", third.WorkerID())
	}
	for _, c := range []uidcore.Claim{first, second, third} {
		if err := c.Release(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

// TestKVDisposableCounter: the counter's host records are written, and a
// counter that holds garbage is a clear error, not a guess.
func TestKVDisposableCounter(t *testing.T) {
	addr := embeddedAddr(t)
	cfg := kvConfig(workerid.ModeDisposable)
	a := newKVAssigner(t, cfg, addr)
	c, err := a.Claim(context.Background(), uidcore.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	kv := kvBucket(t, addr, cfg.Bucket)
	node, err := kv.Get(context.Background(), "disposable.node.0")
	if err != nil || c.WorkerID() != 0 || !strings.Contains(string(node.Value()), `"host"`) {
		t.Fatalf("worker ID %d, node record %v", c.WorkerID(), err)
	}
	if _, err := kv.Put(context.Background(), "disposable.last", []byte("seven")); err != nil {
		t.Fatal(err)
	}
	_, err = a.Claim(context.Background(), uidcore.DefaultLayout())
	if err == nil || !strings.Contains(err.Error(), "disposable.last") {
		t.Fatalf("claim on a garbage counter: %v", err)
	}
}

func TestKVAssignerBadConfig(t *testing.T) {
	addr := embeddedAddr(t)
	cfg := kvstore.DefaultConfig()
	cfg.Bucket = "bad bucket"
	_, err := kvstore.NewAssigner(context.Background(), kvConnect(t, addr), withQuietLogger(cfg))
	var se *setting.Error
	if !errors.As(err, &se) || se.Field != "Bucket" {
		t.Fatalf("err = %v, want a *setting.Error for Bucket", err)
	}
}

// TestKVAssignerNoJetStream: a server without JetStream is retried up to
// the start-up deadline (JetStream may be starting), then named as the
// reason.
func TestKVAssignerNoJetStream(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	cfg := kvstore.DefaultConfig()
	cfg.StoreStartupDeadline = time.Second
	begin := time.Now()
	_, err = kvstore.NewAssigner(context.Background(), kvConnect(t, strings.TrimPrefix(srv.ClientURL(), "nats://")), withQuietLogger(cfg))
	if !errors.Is(err, workerid.ErrStoreUnavailable) || !strings.Contains(err.Error(), "no JetStream") {
		t.Fatalf("err = %v, want ErrStoreUnavailable saying there is no JetStream", err)
	}
	// Not before the deadline; the upper bound is a safety net (an
	// attempt may run 2 s past it), not a bound on speed.
	if took := time.Since(begin); took < cfg.StoreStartupDeadline || took > cfg.StoreStartupDeadline+30*time.Second || !strings.Contains(err.Error(), "attempts)") {
		t.Errorf("gave up after %s, deadline %s: %v", took, cfg.StoreStartupDeadline, err)
	}
	t.Log(err)
}
