package promcheck

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/dispenser"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/telemetry/telemetrytest"
)

// LiveSequence is the named sequence the live instance declares, so that
// the sequence endpoints' series exist in its scrape.
const LiveSequence = "orders"

// Scrape starts a dispenser the way an operator runs one (configured from
// DISPENSER_* variables, with /metrics, a named sequence, blocks and a
// region) against a nats-server of the test, sends it one request of every kind
// (and a bad one), and returns what its /metrics then exports. The
// instance stops when the test ends.
func Scrape(t testing.TB) Exported {
	t.Helper()
	telemetrytest.ClearEnv(t)
	url := testenv.NATS(t, nil).ClientURL()
	for k, v := range map[string]string{
		"NATS_URL":         url,
		"METRICS_ADDR":     "127.0.0.1:0",
		"SEQUENCES":        LiveSequence + "@east",
		"BLOCKS_ENABLED":   "true",
		"BLOCKS_STORAGE":   "memory",
		"LEASE_TTL":        "3s",
		"LOG_LEVEL":        "warn",
		"SHUTDOWN_TIMEOUT": "5s",
		// The test's server is temporary and dies with it: no later
		// instance can repeat IDs against a store that forgot, and the
		// default window would keep the instance out for 2 minutes.
		"STORE_LOSS_WINDOW": "0",
		// A region, so that the series carry uid_region as a fleet's
		// across regions do (a standalone server ignores the placement);
		// one region, which homes the sequence.
		"REGION":  "east",
		"REGIONS": "east=0-1023",
	} {
		t.Setenv(dispenser.EnvPrefix+"_"+k, v)
	}
	cfg, err := dispenser.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := dispenser.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Errorf("dispenser shutdown: %v", err)
		}
	})
	exercise(ctx, t, url)
	base := "http://" + d.MetricsAddr()
	var body string
	// The request metrics are recorded as the reply goes out, so the
	// client can see its reply a moment before /metrics counts it.
	testenv.WaitFor(t, 5*time.Second, "/metrics counts the sequence batch", func() bool {
		var code int
		code, body, err = telemetrytest.HTTPGet(base + "/metrics")
		return err == nil && code == http.StatusOK && strings.Contains(body, `uid_request_duration_seconds_count{otel_scope_name`) &&
			strings.Contains(body, `uid_endpoint="seq_batch",uid_outcome="ok"`)
	})
	e, err := ParseScrape(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// exercise sends the instance at url one request of every endpoint and one
// bad request, so that the latency histogram and the sequence endpoints
// have series.
func exercise(ctx context.Context, t testing.TB, url string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := uidclient.New(nc, uidclient.Config{})
	id, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := c.Batch(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{id: true}
	for _, v := range ids {
		if seen[v] {
			t.Fatalf("ID %d issued twice", v)
		}
		seen[v] = true
	}
	if _, err := c.SeqNext(ctx, LiveSequence); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SeqBatch(ctx, LiveSequence, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.RequestWithContext(ctx, protocol.Subject("uid", protocol.EndpointParse), []byte("not-a-number")); err != nil {
		t.Fatal(err)
	}
}
