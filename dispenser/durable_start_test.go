package dispenser

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/telemetry"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
	"github.com/uid-dispenser/uid-dispenser/telemetry/telemetrytest"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// With a loss window a starting instance stays out of its queue group
// until its lease's first reservation is durable and its sequences have
// settled (6 s, longer than W here): it says so in the log
// (event=lease.awaiting_durable), /readyz says not ready, and a request
// meanwhile finds no responder rather than a 503; once it serves, it
// issues IDs and numbers at once, from a durable reservation.
func TestStartJoinsOnlyOnceTheReservationIsDurable(t *testing.T) {
	telemetrytest.ClearEnv(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{MetricsAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	url := testenv.NATS(t, nil).ClientURL()
	cfg := testConfig(url, "")
	// W = 5 s (the test server loses nothing; the wait is what is
	// tested); the chunk exceeds W + TTL/3 + the ahead bound.
	cfg.StoreLossWindow = 5 * time.Second
	cfg.ReserveChunk = 20 * time.Second
	cfg.Sequences = "orders" // settles 6 s (sequence.SettleFor), longer than W
	var logs testenv.LogBuffer
	done := startInBackground(cfg, WithLogger(logs.Logger(slog.LevelInfo)), withTelemetry(tel))
	testwait.WaitFor(t, 20*time.Second, "the start-up's wait for a durable reservation", func() bool {
		return strings.Contains(logs.String(), "event="+event.LeaseAwaitingDurable)
	})
	if l := logs.String(); !strings.Contains(l, "loss_window=5s") || !strings.Contains(l, "DISPENSER_STORE_LOSS_WINDOW=0 only for stores meeting every obligation") {
		t.Errorf("the wait's log line does not say why and what to set:\n%s", l)
	}

	code, body, herr := telemetrytest.HTTPGet("http://" + tel.MetricsAddr() + "/readyz")
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_, rerr := nc.Request(cfg.SubjectPrefix+".next", nil, 5*time.Second)
	select {
	case s := <-done:
		if s.err == nil {
			shutdown(t, s.d)
		}
		t.Skipf("the start finished (err %v) before the checks of its wait ran: a loaded machine", s.err)
	default:
	}
	// Both answers came while Start still waited.
	if herr != nil || code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while waiting: %d %q %v, want 503", code, body, herr)
	}
	if !errors.Is(rerr, nats.ErrNoResponders) {
		t.Errorf("a request while waiting: %v, want no responders (not in the queue group yet)", rerr)
	}

	s := testwait.Receive(t, 60*time.Second, "the start to finish", done)
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(func() { shutdown(t, s.d) })
	st := s.d.claim.(*workerid.Lease).Status()
	if st.Durable <= st.After {
		t.Fatalf("serving on a lease whose reservation is not durable: %+v", st)
	}
	if settled := s.d.seq.SettledAt(); time.Now().Before(settled) {
		t.Fatalf("serving before the sequences settled (at %s)", settled.Format(time.RFC3339Nano))
	}
	if code, body, err := telemetrytest.HTTPGet("http://" + tel.MetricsAddr() + "/readyz"); err != nil || code != http.StatusOK {
		t.Errorf("/readyz once serving: %d %q %v, want 200", code, body, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := client(t, url)
	if _, err := c.Next(ctx); err != nil {
		t.Fatalf("the first request once serving: %v", err)
	}
	if _, err := c.SeqNext(ctx, "orders"); err != nil {
		t.Fatalf("the first sequence request once serving: %v", err)
	}
}

// started is what a Start in the background returned.
type started struct {
	d   *Dispenser
	err error
}

// startInBackground starts an instance of cfg in a goroutine (within a
// minute, a safety net) and sends what Start returned.
func startInBackground(cfg Config, opts ...Option) <-chan started {
	done := make(chan started, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		d, err := Start(ctx, cfg, opts...)
		done <- started{d, err}
	}()
	return done
}

// With a loss window the reserve chunk must exceed W + TTL/3 + the ahead
// bound: a shorter one is refused, naming the variables.
func TestReserveChunkCoversTheLossWindow(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the defaults (W 2m, chunk unset): %v", err)
	}
	cfg.ReserveChunk = time.Minute // the default before the loss window: 60s < 2m + 10s + 2s
	err := cfg.Validate()
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Var != "DISPENSER_RESERVE_CHUNK" {
		t.Fatalf("chunk 1m with W 2m: %v, want a ConfigError on DISPENSER_RESERVE_CHUNK", err)
	}
	for _, name := range []string{"DISPENSER_STORE_LOSS_WINDOW", "DISPENSER_LEASE_TTL", "DISPENSER_MAX_AHEAD"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%q does not name %s", err, name)
		}
	}
	cfg.StoreLossWindow = 0 // W = 0: as before, any chunk of at least 1s
	if err := cfg.Validate(); err != nil {
		t.Errorf("chunk 1m with W 0: %v", err)
	}
}

// A MySQL failover takes back a starting instance's first lease write
// (the promoted replica never had the lease row) before that claim's
// first reservation is durable: the renewal that would have confirmed
// it finds no row, a regression (the fault harness's 30-minute run: the
// instance exited 1 and was restarted). Nothing was issued under that
// claim: the instance was out of its queue group and had built no
// generator, and the lease's Until stays at After until then. So the
// instance claims a worker ID afresh and serves under the new claim,
// rather than failing its start. Every ID taken across the event, from
// it and from an instance serving throughout, is distinct.
func TestStartClaimsAgainWhenAFailoverTakesBackTheFirstLease(t *testing.T) {
	dsn := testenv.MySQL(t)
	url := testenv.NATS(t, nil).ClientURL()
	cfg := testConfig(url, dsn)
	// W = 2 s: the test's failover comes inside it; the chunk exceeds
	// W + TTL/3 + the ahead bound.
	cfg.StoreLossWindow = 2 * time.Second
	cfg.ReserveChunk = 20 * time.Second
	// The instance serving throughout waits no W: the test's failover
	// forgets only the other's row.
	otherCfg := cfg
	otherCfg.StoreLossWindow = 0
	other := start(t, otherCfg)
	load := startRequests(t, url, cfg.Layout(), 2, rawRequest{"uid.next", ""}, rawRequest{"uid.batch", "50"})
	testwait.WaitFor(t, 20*time.Second, "IDs from the instance serving throughout", func() bool { return load.from(other.WorkerID()) >= 1000 })

	var logs testenv.LogBuffer
	done := startInBackground(cfg, WithLogger(logs.JSONLogger(slog.LevelDebug)))
	var firstWorker float64
	var firstOwner string
	testwait.WaitFor(t, 20*time.Second, "the start-up's wait for a durable reservation", func() bool {
		for _, r := range logs.Records(t) {
			if r[event.Key] == event.LeaseAcquired {
				firstWorker, _ = r[event.AttrWorker].(float64)
				firstOwner, _ = r[event.AttrOwner].(string)
			}
			if r[event.Key] == event.LeaseAwaitingDurable {
				return true
			}
		}
		return false
	})
	// The failover: the promoted replica lacks the claim's transaction.
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DELETE FROM WORKER_LEASE WHERE WORKER_ID = ?", int64(firstWorker)); err != nil {
		t.Fatal(err)
	}

	s := testwait.Receive(t, 60*time.Second, "the start to finish", done)
	if s.err != nil {
		t.Fatalf("the start failed after the failover took back its first lease write: %v", s.err)
	}
	d := s.d
	t.Cleanup(func() { shutdown(t, d) })
	var order []string
	var owners []string
	for _, r := range logs.Records(t) {
		switch r[event.Key] {
		case event.LeaseRegression, event.ClaimLostAtStart, event.Serving:
			order = append(order, r[event.Key].(string))
		case event.LeaseAcquired:
			order = append(order, event.LeaseAcquired)
			owners = append(owners, r[event.AttrOwner].(string))
		}
	}
	want := []string{event.LeaseAcquired, event.LeaseRegression, event.ClaimLostAtStart, event.LeaseAcquired, event.Serving}
	if slices.Index(order, event.Serving) < slices.Index(order, event.LeaseRegression) {
		load.finish()
		t.Skipf("the failover came after the first reservation was durable (a loaded machine): %v", order)
	}
	if !slices.Equal(order, want) {
		t.Fatalf("events %v, want %v", order, want)
	}
	if owners[0] != firstOwner || owners[1] == firstOwner {
		t.Fatalf("owners of the claims %v: want a new claim after %s's", owners, firstOwner)
	}
	if n := d.storeRegressions()[telemetry.RecordLease]; n != 1 {
		t.Errorf("%d lease regressions counted, want 1", n)
	}
	st := d.claim.(*workerid.Lease).Status()
	if st.Err != nil || st.Durable <= st.After {
		t.Fatalf("serving on a claim that is lost or not durable: %+v", st)
	}
	testwait.WaitFor(t, 30*time.Second, "IDs from the instance under its new claim", func() bool { return load.from(d.WorkerID()) >= 1000 })
	ids, failures := load.finish()
	t.Logf("%d IDs, %d requests failed", len(ids), len(failures))
	testenv.CheckDistinct(t, ids)
}
