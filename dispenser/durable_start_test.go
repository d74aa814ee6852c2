package dispenser

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
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
	type started struct {
		d   *Dispenser
		err error
	}
	done := make(chan started, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		d, err := Start(ctx, cfg, WithLogger(logs.Logger(slog.LevelInfo)), withTelemetry(tel))
		done <- started{d, err}
	}()
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
