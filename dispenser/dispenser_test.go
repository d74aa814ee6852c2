package dispenser

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// database/sql's connection opener of a DB closed by the MySQL
		// assigner exits asynchronously.
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
	)
}

func testLogger() *slog.Logger {
	if os.Getenv("UID_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testConfig is the default configuration for tests. Its lease and
// store deadline are long enough that a loaded machine neither loses a
// lease between two renewals nor gives up on a slow store at start-up
// (tests of lease loss and of the deadline set their own).
func testConfig(natsURL, dsn string) Config {
	cfg := DefaultConfig()
	cfg.NATSURL = natsURL
	cfg.MySQLDSN = dsn
	cfg.LeaseTTL = 15 * time.Second
	cfg.ReserveChunk = 10 * time.Second
	cfg.StoreStartupDeadline = 30 * time.Second
	cfg.ShutdownTimeout = 5 * time.Second
	// The test servers lose nothing they acknowledged (no power loss):
	// takeovers start right after the reservation, as the tests expect;
	// the loss window's margins have tests of their own.
	cfg.StoreLossWindow = 0
	return cfg
}

func start(t *testing.T, cfg Config) *Dispenser {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := Start(ctx, cfg, WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, d) })
	return d
}

func shutdown(t *testing.T, d *Dispenser) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		t.Errorf("shutdown of worker %d: %v", d.WorkerID(), err)
	}
}

// testConn connects to url; the connection closes when the test ends.
func testConn(t testing.TB, url string) *natsconn.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := natsconn.Connect(ctx, natsconn.Config{URL: url, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

func client(t *testing.T, url string) *uidclient.Client {
	t.Helper()
	return uidclient.New(testConn(t, url).Conn, uidclient.Config{AttemptTimeout: 500 * time.Millisecond})
}

// collect takes IDs with n concurrent callers until stop is closed or each
// has taken perCaller (0: until stop). Errors fail the test.
func collect(t *testing.T, c *uidclient.Client, n, perCaller int, stop <-chan struct{}) []uint64 {
	t.Helper()
	var mu sync.Mutex
	var all []uint64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for taken := 0; perCaller == 0 || taken < perCaller; {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				var ids []uint64
				var err error
				if i%2 == 0 {
					var id uint64
					id, err = c.Next(ctx)
					ids = []uint64{id}
				} else {
					ids, err = c.Batch(ctx, 200)
				}
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				taken += len(ids)
				mu.Lock()
				all = append(all, ids...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return all
}

func workers(t testing.TB, ids []uint64) map[uint64]int {
	t.Helper()
	m := map[uint64]int{}
	for _, id := range ids {
		p := uidcoretest.MustParse(t, uidcore.DefaultLayout().Parse, id)
		m[p.WorkerID]++
	}
	return m
}

func TestThreeDispensersOnMySQL(t *testing.T) {
	dsn := testenv.MySQL(t)
	url := testenv.NATS(t, nil).ClientURL()
	var ds []*Dispenser
	seen := map[uint64]bool{}
	for range 3 {
		d := start(t, testConfig(url, dsn))
		if seen[d.WorkerID()] {
			t.Fatalf("worker ID %d twice", d.WorkerID())
		}
		seen[d.WorkerID()] = true
		ds = append(ds, d)
	}
	ids := collect(t, client(t, url), 8, 2000, nil)
	testenv.CheckDistinct(t, ids)
	shares := workers(t, ids)
	for _, d := range ds {
		if shares[d.WorkerID()] == 0 {
			t.Errorf("worker %d served nothing: %v", d.WorkerID(), shares)
		}
	}
	// A released worker ID is free at once for the next instance.
	freed := ds[0].WorkerID()
	shutdown(t, ds[0])
	next := start(t, testConfig(url, dsn))
	if next.WorkerID() != freed {
		t.Fatalf("new instance got worker %d, want the released %d", next.WorkerID(), freed)
	}
}

func TestReclaimsAfterLeaseLostForGood(t *testing.T) {
	dsn := testenv.MySQL(t)
	url := testenv.NATS(t, nil).ClientURL()
	cfg := testConfig(url, dsn)
	cfg.LeaseTTL = time.Second // renewals every ~333ms
	d := start(t, cfg)
	lostWorker := d.WorkerID()
	load := startRawLoad(t, url, cfg.Layout(), 4)
	testenv.WaitFor(t, 10*time.Second, "IDs from the first worker ID", func() bool { return load.from(lostWorker) >= 1000 })
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Another owner takes the lease over: the renewal sees a foreign token.
	if _, err := db.Exec("UPDATE WORKER_LEASE SET OWNER_TOKEN = 'intruder' WHERE WORKER_ID = ?", lostWorker); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "a new worker ID after the lease was taken over", func() bool { return d.WorkerID() != lostWorker })
	testenv.WaitFor(t, 10*time.Second, "IDs from the new worker ID", func() bool { return load.from(d.WorkerID()) >= 1000 })
	ids, failures := load.finish()
	t.Logf("%d IDs, %d requests failed across the reclaim", len(ids), len(failures))
	testenv.CheckDistinct(t, ids)
	shares := workers(t, ids)
	if shares[lostWorker] == 0 || shares[d.WorkerID()] == 0 {
		t.Fatalf("IDs per worker %v: want some from %d and from %d", shares, lostWorker, d.WorkerID())
	}
	// The service's metadata follows the new worker ID.
	msg, err := testConn(t, url).Request("$SRV.INFO.uid-dispenser."+d.ServiceID(), nil, 2*time.Second)
	if err != nil || !strings.Contains(string(msg.Data), fmt.Sprintf(`"worker_id":"%d"`, d.WorkerID())) {
		t.Fatalf("INFO after reclaim: %v %s", err, msg.Data)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestZeroConfigStartsEmbeddedNATSAndClaimsThroughKV(t *testing.T) {
	cfg := testConfig("", "")
	cfg.EmbeddedAddr = freeAddr(t)
	cfg.EmbeddedDataDir = t.TempDir()
	first := start(t, cfg)
	if !first.Embedded() || first.NATSURL() != "nats://"+cfg.EmbeddedAddr {
		t.Fatalf("first instance: embedded %v, url %s", first.Embedded(), first.NATSURL())
	}
	second := start(t, cfg)
	if second.Embedded() {
		t.Fatal("second instance started its own server instead of using the one listening")
	}
	if first.WorkerID() == second.WorkerID() {
		t.Fatalf("both instances hold worker %d", first.WorkerID())
	}
	ids := collect(t, client(t, "nats://"+cfg.EmbeddedAddr), 4, 1000, nil)
	testenv.CheckDistinct(t, ids)
	if shares := workers(t, ids); shares[first.WorkerID()] == 0 || shares[second.WorkerID()] == 0 {
		t.Fatalf("shares %v", shares)
	}
	// The instance that uses the embedded server stops first (in the
	// other order it would lose its server and wait out its drain).
	shutdown(t, second)
	shutdown(t, first)
}

func TestStartFailsFastOnWrongNATS(t *testing.T) {
	cfg := testConfig("nats://"+freeAddr(t), "")
	cfg.NATSConnectTimeout = time.Second // waited for up to this long
	// Fast means on its own, at the connect timeout, before the context's
	// 30 s (a safety net, not a bound on speed).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err := Start(ctx, cfg, WithLogger(testLogger()))
	if err == nil || !strings.Contains(err.Error(), cfg.NATSURL) || !strings.Contains(err.Error(), "attempts in") || ctx.Err() != nil {
		t.Fatalf("wrong URL: %v after %v", err, time.Since(start))
	}

	url := testenv.NATS(t, &server.Options{Username: "svc", Password: "good"}).ClientURL()
	cfg = testConfig(url, "")
	cfg.NATSUser, cfg.NATSPassword = "svc", "b4d-secret"
	_, err = Start(context.Background(), cfg, WithLogger(testLogger()))
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") || strings.Contains(err.Error(), "b4d-secret") {
		t.Fatalf("wrong password: %v", err)
	}
}

func TestRunShutsDownOnCancel(t *testing.T) {
	dsn := testenv.MySQL(t)
	url := testenv.NATS(t, nil).ClientURL()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, testConfig(url, dsn), WithLogger(testLogger())) }()
	c := client(t, url)
	idctx, idcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer idcancel()
	if _, err := c.Next(idctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second): // a safety net, not a bound on speed
		t.Fatal("Run did not return after cancel")
	}
}

// Logs that looked like bugs: a fresh lease says after_time=new (not
// 1970-01-01T00:00:00Z); the instance owning the embedded server says it
// stopped it; an instance on that server logs the loss once per
// connection, each line naming its connection, and serves again once a
// server listens there again.
func TestLogsOfTheEmbeddedServerSayWhatHappened(t *testing.T) {
	cfg := testConfig("", "")
	cfg.EmbeddedAddr = freeAddr(t)
	cfg.EmbeddedDataDir = t.TempDir()
	startLogged := func(logs *testenv.LogBuffer) *Dispenser {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		d, err := Start(ctx, cfg, WithLogger(logs.Logger(slog.LevelInfo)))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	var ownerLog, otherLog, nextLog testenv.LogBuffer
	owner := startLogged(&ownerLog)
	other := startLogged(&otherLog)
	if !owner.Embedded() || other.Embedded() {
		t.Fatalf("embedded: owner %v, other %v", owner.Embedded(), other.Embedded())
	}
	if l := ownerLog.String(); !strings.Contains(l, "after=0 after_time=new") || strings.Contains(l, "1970-01-01") {
		t.Fatalf("a fresh lease's log:\n%s", l)
	}
	shutdown(t, owner)
	if !strings.Contains(ownerLog.String(), `msg="stopped the embedded nats-server;`) {
		t.Fatalf("the owner does not say it stopped the server:\n%s", ownerLog.String())
	}
	disconnects := func() []string {
		var lines []string
		for l := range strings.SplitSeq(otherLog.String(), "\n") {
			if strings.Contains(l, `msg="NATS disconnected"`) {
				_, after, _ := strings.Cut(l, " level=") // without the time
				lines = append(lines, after)
			}
		}
		return lines
	}
	testenv.WaitFor(t, 10*time.Second, "the other instance saw both connections drop", func() bool { return len(disconnects()) >= 2 })
	seen := map[string]bool{}
	for _, l := range disconnects() {
		if seen[l] {
			t.Errorf("logged twice alike: %s", l)
		}
		seen[l] = true
	}
	if d := disconnects(); !strings.Contains(strings.Join(d, "\n"), "conn=service") || !strings.Contains(strings.Join(d, "\n"), `conn="worker claim"`) {
		t.Errorf("disconnects do not name their connections: %q", d)
	}
	next := startLogged(&nextLog) // a new owner on the same address
	t.Cleanup(func() { shutdown(t, next) })
	if !next.Embedded() {
		t.Fatal("the next instance did not start the server")
	}
	testenv.WaitFor(t, 10*time.Second, "the other instance reconnected", func() bool {
		return strings.Count(otherLog.String(), `msg="NATS reconnected"`) >= 2
	})
	shutdown(t, other)
}
