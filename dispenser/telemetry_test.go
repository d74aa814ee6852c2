package dispenser

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/telemetry"
	"github.com/uid-dispenser/uid-dispenser/telemetry/telemetrytest"
	"github.com/uid-dispenser/uid-dispenser/telemetry/uidattr"
)

func endedSpan(t *testing.T, rec *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var span sdktrace.ReadOnlySpan
	testenv.WaitFor(t, 5*time.Second, "span "+name+" ended", func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == name {
				span = s
				return true
			}
		}
		return false
	})
	return span
}

// TestTelemetryAcrossNATS runs a dispenser with telemetry given by the
// test (an in-memory span recorder and the metrics server): a client's
// span and the dispenser's server span share one trace across NATS, the
// start-up padding round is a span, /metrics counts the requests, and
// /readyz follows the instance from serving to shut down.
func TestTelemetryAcrossNATS(t *testing.T) {
	telemetrytest.ClearEnv(t)
	rec := tracetest.NewSpanRecorder()
	// The caller in this test records all its traces (as if its own SDK
	// sampled everything); the dispenser follows its decisions.
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{MetricsAddr: "127.0.0.1:0",
		SpanProcessors: []sdktrace.SpanProcessor{rec}, Sampler: sdktrace.ParentBased(sdktrace.AlwaysSample())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	url := testenv.NATS(t, nil).ClientURL()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := Start(ctx, testConfig(url, ""), WithLogger(testLogger()), withTelemetry(tel))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + tel.MetricsAddr()
	if code, body, err := telemetrytest.HTTPGet(base + "/readyz"); err != nil || code != http.StatusOK {
		t.Errorf("/readyz while serving: %d %q %v, want 200", code, body, err)
	}

	c := client(t, url)
	callCtx, caller := otel.Tracer("test").Start(ctx, "caller")
	id, err := c.Next(callCtx)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := c.Batch(callCtx, 10)
	if err != nil {
		t.Fatal(err)
	}
	caller.End()
	testenv.CheckDistinct(t, append(ids, id))

	send := endedSpan(t, rec, "send uid.next")
	process := endedSpan(t, rec, "process uid.next")
	if process.SpanContext().TraceID() != caller.SpanContext().TraceID() || process.Parent().SpanID() != send.SpanContext().SpanID() {
		t.Errorf("server span in trace %v under %v; want trace %v under the client span %v",
			process.SpanContext().TraceID(), process.Parent().SpanID(), caller.SpanContext().TraceID(), send.SpanContext().SpanID())
	}
	if process.SpanKind() != trace.SpanKindServer || send.SpanKind() != trace.SpanKindClient {
		t.Errorf("span kinds %v and %v, want server and client", process.SpanKind(), send.SpanKind())
	}
	worker := int64(d.WorkerID())
	for _, kv := range process.Attributes() {
		if kv.Key == uidattr.WorkerID && kv.Value.AsInt64() != worker {
			t.Errorf("server span worker %d, want %d", kv.Value.AsInt64(), worker)
		}
	}
	padding := endedSpan(t, rec, telemetry.PaddingSpanName)
	for _, kv := range padding.Attributes() {
		if kv.Key == telemetry.TriggerKey && kv.Value.AsString() != "startup" {
			t.Errorf("first padding span trigger %q, want startup", kv.Value.AsString())
		}
		if kv.Key == uidattr.WorkerID && kv.Value.AsInt64() != worker {
			t.Errorf("padding span worker %d, want %d", kv.Value.AsInt64(), worker)
		}
	}

	endedSpan(t, rec, "process uid.batch") // ended after its metrics are recorded
	_, metrics, err := telemetrytest.HTTPGet(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := telemetrytest.PromSum(metrics, "uid_requests_total", `uid_endpoint="next"`, `uid_outcome="ok"`); n != 1 {
		t.Errorf("uid_requests_total{next,ok} = %v, want 1", n)
	}
	if n, _ := telemetrytest.PromSum(metrics, "uid_ids_issued_total"); n != 11 {
		t.Errorf("uid_ids_issued_total = %v, want 11", n)
	}
	if n, _ := telemetrytest.PromSum(metrics, "uid_request_duration_seconds_count", `uid_endpoint="batch"`); n != 1 {
		t.Errorf("uid_request_duration_seconds_count{batch} = %v, want 1", n)
	}
	if left, found := telemetrytest.PromSum(metrics, "uid_lease_remaining_seconds"); !found || left <= 0 || left > testConfig(url, "").LeaseTTL.Seconds() {
		t.Errorf("uid_lease_remaining_seconds = %v (found %v), want within the lease TTL", left, found)
	}
	if n, _ := telemetrytest.PromSum(metrics, "uid_generator_issued_total", `uid_worker_id="`+strconv.FormatInt(worker, 10)+`"`); n != 11 {
		t.Errorf("uid_generator_issued_total{worker} = %v, want 11", n)
	}

	shutdown(t, d)
	if code, body, err := telemetrytest.HTTPGet(base + "/readyz"); err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, errNotServing.Error()) {
		t.Errorf("/readyz after shutdown: %d %q %v, want 503 not serving", code, body, err)
	}
}

// TestMetricsServerFromConfig: DISPENSER_METRICS_ADDR makes the instance
// serve /metrics, /healthz and /readyz itself, and its shutdown stops them.
func TestMetricsServerFromConfig(t *testing.T) {
	telemetrytest.ClearEnv(t)
	url := testenv.NATS(t, nil).ClientURL()
	cfg := testConfig(url, "")
	cfg.MetricsAddr = "127.0.0.1:0"
	d := start(t, cfg)
	base := "http://" + d.MetricsAddr()
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, body, err := telemetrytest.HTTPGet(base + path); err != nil || code != http.StatusOK {
			t.Errorf("%s: %d %v\n%s", path, code, err, body)
		}
	}
	// Before any request or rejection, the counters that may stay at zero
	// are there at zero, every reason and outcome.
	_, body, _ := telemetrytest.HTTPGet(base + "/metrics")
	for _, series := range []string{
		`uid_take_rejections_total\{[^}]*reason="empty"[^}]*\} 0`,
		`uid_take_rejections_total\{[^}]*reason="claim_lost"[^}]*\} 0`,
		`uid_put_rejections_total\{[^}]*reason="time_exhausted"[^}]*\} 0`,
		`uid_put_rejections_total\{[^}]*reason="ahead_of_clock_bound"[^}]*\} 0`,
		`uid_requests_total\{[^}]*outcome="unavailable"[^}]*\} 0`,
		`uid_requests_total\{[^}]*outcome="internal"[^}]*\} 0`,
	} {
		if !regexp.MustCompile(`(?m)^` + series + `$`).MatchString(body) {
			t.Errorf("/metrics lacks %s before the first event", series)
		}
	}
	shutdown(t, d)
	if _, _, err := telemetrytest.HTTPGet(base + "/healthz"); err == nil {
		t.Error("/healthz still answers after shutdown")
	}
}

// A metrics address that is busy stops start-up with an error naming
// DISPENSER_METRICS_ADDR (telemetry names the field, the dispenser its
// variable).
func TestBusyMetricsAddrNamesTheVariable(t *testing.T) {
	telemetrytest.ClearEnv(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := testConfig(testenv.NATS(t, nil).ClientURL(), "")
	cfg.MetricsAddr = busy.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := Start(ctx, cfg, WithLogger(testLogger()))
	if err == nil {
		shutdown(t, d)
		t.Fatal("started on a busy metrics address")
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("the busy address's error does not wrap the listen error (EADDRINUSE): %v", err)
	}
	if !strings.Contains(err.Error(), "DISPENSER_METRICS_ADDR: ") || !strings.Contains(err.Error(), busy.Addr().String()) {
		t.Fatalf("err = %v, want it to name DISPENSER_METRICS_ADDR and the address", err)
	}
}

func TestTelemetryConfig(t *testing.T) {
	t.Setenv("DISPENSER_METRICS_ADDR", ":9464")
	t.Setenv("DISPENSER_RUNWAY_WARNING", "90d")
	cfg, err := LoadConfig()
	if err != nil || cfg.MetricsAddr != ":9464" || cfg.RunwayWarning != "90d" {
		t.Fatalf("LoadConfig: %+v %v", cfg, err)
	}
	t.Setenv("DISPENSER_RUNWAY_WARNING", "soon")
	_, err = LoadConfig()
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Var != "DISPENSER_RUNWAY_WARNING" {
		t.Fatalf("bad runway warning: %v, want a ConfigError naming DISPENSER_RUNWAY_WARNING", err)
	}
}

// Readiness needs time left on the layout: the same instance that can
// issue IDs now could not at its runway's end.
func TestReadinessNeedsTimeLeft(t *testing.T) {
	d := start(t, testConfig(testenv.NATS(t, nil).ClientURL(), ""))
	if err := d.ready(); err != nil {
		t.Fatalf("not ready while serving: %v", err)
	}
	end := d.cfg.Layout().RunwayEnd()
	if err := d.canIssue(end.Add(-time.Second)); err != nil {
		t.Fatalf("not issuable in the last second of the runway: %v", err)
	}
	if err := d.canIssue(end); err == nil || !strings.Contains(err.Error(), "ran out") {
		t.Fatalf("at the runway's end: %v, want ran out", err)
	}
}

// TestBlockAndSequenceMetrics runs an instance with ID blocks and a named
// sequence, takes blocks and sequence numbers from several callers at
// once, and finds the block publisher's and the sequence's metrics in
// /metrics with the values that traffic leaves.
func TestBlockAndSequenceMetrics(t *testing.T) {
	telemetrytest.ClearEnv(t)
	url := testenv.NATS(t, nil).ClientURL()
	cfg := blocksConfig(url)
	cfg.Sequences = "orders"
	cfg.MetricsAddr = "127.0.0.1:0"
	d := start(t, cfg)
	t.Cleanup(func() { shutdown(t, d) })
	c := client(t, url)

	// Sequence numbers from 4 callers while 2 consumers drain blocks.
	const callers, perCaller, batch = 4, 25, 3
	var mu sync.Mutex
	var nums []uint64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for range perCaller {
				got, err := c.SeqBatch(ctx, "orders", batch)
				if err != nil {
					t.Errorf("uid.seq.orders.batch: %v", err)
					return
				}
				mu.Lock()
				nums = append(nums, got...)
				mu.Unlock()
			}
		})
	}
	ids := takeBlocks(t, 4*cfg.BlockSize, blockSource(t, url), blockSource(t, url))
	wg.Wait()
	testenv.CheckDistinct(t, ids)
	testenv.CheckDistinct(t, nums)
	if len(nums) != callers*perCaller*batch {
		t.Fatalf("%d sequence numbers, want %d", len(nums), callers*perCaller*batch)
	}
	// The consumers took 8 blocks; the publisher filled the stream to its
	// depth (8) at start and tops it up again.
	minPublished := float64(cfg.BlocksTargetDepth + 8)
	var metrics string
	testenv.WaitFor(t, 10*time.Second, "the publisher topped the stream up after the takes", func() bool {
		_, metrics, _ = telemetrytest.HTTPGet("http://" + d.MetricsAddr() + "/metrics")
		n, _ := telemetrytest.PromSum(metrics, "uid_blocks_published_total")
		return n >= minPublished
	})
	if depth, found := telemetrytest.PromSum(metrics, "uid_blocks_depth"); !found || depth < 0 || depth > float64(cfg.BlocksTargetDepth) {
		t.Errorf("uid_blocks_depth = %v (found %v), want 0..%d", depth, found, cfg.BlocksTargetDepth)
	}
	for _, name := range []string{"uid_blocks_pressure_total", "uid_blocks_failed_total"} {
		if n, found := telemetrytest.PromSum(metrics, name); !found || n != 0 {
			t.Errorf("%s = %v (found %v), want 0 on a stream with room", name, n, found)
		}
	}
	if _, found := telemetrytest.PromSum(metrics, "uid_blocks_refused_total"); !found {
		t.Error("no uid_blocks_refused_total")
	}

	orders := `uid_sequence="orders"`
	stats := d.Sequences().Stats()
	if len(stats) != 1 {
		t.Fatalf("sequence stats %+v", stats)
	}
	left, foundLeft := telemetrytest.PromSum(metrics, "uid_sequence_left", orders)
	held, _ := telemetrytest.PromSum(metrics, "uid_sequence_held", orders)
	if !foundLeft || left <= 0 || left > held || held > float64(stats[0].Held+stats[0].Step) {
		t.Errorf("uid_sequence_left %v, uid_sequence_held %v (stats %+v): want 0 < left <= held", left, held, stats[0])
	}
	if n, _ := telemetrytest.PromSum(metrics, "uid_sequence_segments_total", orders); n < 1 || n > float64(stats[0].Segments) {
		t.Errorf("uid_sequence_segments_total = %v, want 1..%d", n, stats[0].Segments)
	}
	// The first requests found no numbers at hand and waited for the
	// first segment; later ones were served from memory.
	if n, _ := telemetrytest.PromSum(metrics, "uid_sequence_waits_total", orders); n < 1 || n >= callers*perCaller {
		t.Errorf("uid_sequence_waits_total = %v, want at least 1 and fewer than the %d requests", n, callers*perCaller)
	}
	if s, found := telemetrytest.PromSum(metrics, "uid_sequence_wait_time_seconds_total", orders); !found || s <= 0 {
		t.Errorf("uid_sequence_wait_time_seconds_total = %v (found %v), want the first requests' wait, above 0", s, found)
	}

	// docs/observability.md lists every uid_ metric an instance with
	// blocks and sequences exports, by its Prometheus name.
	doc, err := os.ReadFile("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	families := regexp.MustCompile(`(?m)^# TYPE (uid_\w+) `).FindAllStringSubmatch(metrics, -1)
	if len(families) < 20 {
		t.Fatalf("only %d uid_ metric families in /metrics", len(families))
	}
	for _, f := range families {
		if !strings.Contains(string(doc), "`"+f[1]+"`") {
			t.Errorf("docs/observability.md does not list %s", f[1])
		}
	}
}
