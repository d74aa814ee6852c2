package telemetry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/telemetry/telemetrytest"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

func setup(t *testing.T, cfg Config) *Telemetry {
	t.Helper()
	tel, err := Setup(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() {
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return tel
}

// httpGet fetches url with a client of its own, closed afterwards so that
// no keep-alive goroutine outlives the test.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	code, body, err := telemetrytest.HTTPGet(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return code, body
}

// TestMetricsEndpoint scrapes /metrics over HTTP while a generator hands
// out IDs and checks the counters move and the resource is labelled.
func TestMetricsEndpoint(t *testing.T) {
	telemetrytest.ClearEnv(t)
	worker := uint64(5)
	tel := setup(t, Config{MetricsAddr: "127.0.0.1:0", InstanceID: "test-instance", ServiceVersion: "v9.9.9", WorkerID: &worker})
	obs, err := tel.NewObserver(ObserverConfig{Layout: tinyLayout(), WorkerID: worker})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	gen, err := uidcore.NewCached(uidcore.CachedOptions{Layout: tinyLayout(), Claim: uidcore.StaticClaim{ID: worker}, RingSeconds: 1, Observer: obs, TakeWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Close()
	obs.Watch(gen)
	url := "http://" + tel.MetricsAddr() + "/metrics"

	code, before := httpGet(t, url)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d\n%s", code, before)
	}
	issued0, found := telemetrytest.PromSum(before, "uid_generator_issued_total", `uid_worker_id="5"`)
	if !found {
		t.Fatalf("no uid_generator_issued_total in /metrics:\n%s", before)
	}
	rounds0, _ := telemetrytest.PromSum(before, "uid_padding_rounds_total")
	if startup, _ := telemetrytest.PromSum(before, "uid_padding_rounds_total", `uid_padding_trigger="startup"`); startup != 1 {
		t.Errorf("uid_padding_rounds_total{trigger=startup} = %v, want 1", startup)
	}
	for _, want := range []string{`service_name="uid-dispenser"`, `service_instance_id="test-instance"`, `service_version="v9.9.9"`, `uid_worker_id="5"`} {
		if !strings.Contains(before, want) {
			t.Errorf("/metrics lacks %s in target_info", want)
		}
	}

	// 200 IDs from a 64-slot ring: padding must run several times more.
	seen := make(map[uint64]bool)
	for range 200 {
		id, err := gen.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("duplicate ID %d", id)
		}
		seen[id] = true
	}
	_, after := httpGet(t, url)
	if issued, _ := telemetrytest.PromSum(after, "uid_generator_issued_total"); issued-issued0 != 200 {
		t.Errorf("uid_generator_issued_total moved by %v, want 200", issued-issued0)
	}
	if rounds, _ := telemetrytest.PromSum(after, "uid_padding_rounds_total"); rounds <= rounds0 {
		t.Errorf("uid_padding_rounds_total %v -> %v, want it to grow\n%s", rounds0, rounds, after)
	}
	for _, name := range []string{"uid_padding_duration_seconds_count", "uid_ring_available", "uid_ring_fill_ratio", "uid_clock_ahead_seconds", "uid_runway_remaining_seconds", "uid_runway_warning", "uid_padding_ids_total", "go_goroutines"} {
		if _, found := telemetrytest.PromSum(after, name); !found {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// TestReadyz: /readyz follows the Ready func (here: the claim's state),
// /healthz stays up.
func TestReadyz(t *testing.T) {
	telemetrytest.ClearEnv(t)
	claim := &losableClaim{}
	gen, err := uidcore.NewCached(uidcore.CachedOptions{Layout: tinyLayout(), Claim: claim})
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Close()
	ready := func() error {
		_, err := claim.Until()
		return err
	}
	tel := setup(t, Config{MetricsAddr: "127.0.0.1:0", Ready: ready})
	base := "http://" + tel.MetricsAddr()

	if code, body := httpGet(t, base+"/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Errorf("/readyz with the claim held: %d %q, want 200 ready", code, body)
	}
	if _, err := gen.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	claim.lost.Store(true)
	if _, err := gen.Next(context.Background()); !errors.Is(err, uidcore.ErrClaimLost) {
		t.Fatalf("Next after the claim was lost: %v", err)
	}
	if code, body := httpGet(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "claim lost") {
		t.Errorf("/readyz with the claim lost: %d %q, want 503 naming the lost claim", code, body)
	}
	if code, body := httpGet(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q, want 200 ok", code, body)
	}
	claim.lost.Store(false)
	if code, _ := httpGet(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the claim came back: %d, want 200", code)
	}
}

// TestReadyzWithoutCheck: not ready until SetReady installs a check.
func TestReadyzWithoutCheck(t *testing.T) {
	telemetrytest.ClearEnv(t)
	tel := setup(t, Config{MetricsAddr: "127.0.0.1:0"})
	url := "http://" + tel.MetricsAddr() + "/readyz"
	if code, body := httpGet(t, url); code != http.StatusServiceUnavailable || !strings.Contains(body, errNoReadyCheck.Error()) {
		t.Errorf("/readyz without a check: %d %q, want 503", code, body)
	}
	tel.SetReady(func() error { return nil })
	if code, body := httpGet(t, url); code != http.StatusOK {
		t.Errorf("/readyz after SetReady: %d %q, want 200", code, body)
	}
}

func TestServiceNameFromEnv(t *testing.T) {
	telemetrytest.ClearEnv(t)
	t.Setenv("OTEL_SERVICE_NAME", "ids-eu")
	tel := setup(t, Config{MetricsAddr: "127.0.0.1:0"})
	_, body := httpGet(t, "http://"+tel.MetricsAddr()+"/metrics")
	if !strings.Contains(body, `service_name="ids-eu"`) {
		t.Errorf("OTEL_SERVICE_NAME not on the resource:\n%s", body)
	}
}

// TestNothingConfiguredExportsNothing: without OTEL_* variables the
// providers are no-ops, so nothing is exported (and no collector is
// dialled), yet a caller's trace context still passes through.
func TestNothingConfiguredExportsNothing(t *testing.T) {
	telemetrytest.ClearEnv(t)
	tel := setup(t, Config{})
	_, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "probe")
	if span.IsRecording() {
		t.Error("span recorded with no exporter configured")
	}
	span.End()
	if tel.MetricsAddr() != "" {
		t.Errorf("metrics server at %s without DISPENSER_METRICS_ADDR", tel.MetricsAddr())
	}
	// And in a process of its own: nothing printed at all.
	stdout, stderr := runChild(t)
	if strings.TrimSpace(stdout) != "PASS" || stderr != "" {
		t.Errorf("child printed:\nstdout: %s\nstderr: %s", stdout, stderr)
	}
}

// TestConsoleExporter: OTEL_TRACES_EXPORTER=console and
// OTEL_METRICS_EXPORTER=console print spans and metrics to stdout, flushed
// by Shutdown (the batch processor would otherwise wait 5 s).
func TestConsoleExporter(t *testing.T) {
	stdout, stderr := runChild(t, "OTEL_TRACES_EXPORTER=console", "OTEL_METRICS_EXPORTER=console", "OTEL_TRACES_SAMPLER=always_on")
	for _, want := range []string{`"Name":"console-probe"`, `"uid-dispenser"`, `"probe.attr"`, `"Name":"uid.probe"`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("console output lacks %s\nstdout: %s\nstderr: %s", want, stdout, stderr)
		}
	}
}

// TestChildProbe is the process runChild starts: it sets up telemetry
// from the environment it was given and emits the probe.
func TestChildProbe(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by runChild")
	}
	setupEmitShutdown(t)
}

// setupEmitShutdown sets up telemetry from the environment, emits the probe
// and shuts down, which flushes what was emitted.
func setupEmitShutdown(t *testing.T) {
	t.Helper()
	tel, err := Setup(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	emitProbe(t)
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// emitProbe makes a span and a metric through the global providers.
func emitProbe(t *testing.T) {
	_, span := otel.Tracer("probe").Start(context.Background(), "console-probe")
	span.SetAttributes(attributeProbe)
	span.End()
	c, err := otel.Meter("probe").Int64Counter("uid.probe")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 3, metric.WithAttributes(attributeProbe))
}

// TestOTLPEndpointAloneTurnsOTLPOn: OTEL_EXPORTER_OTLP_ENDPOINT without an
// exporter selects OTLP (over HTTP by default), and Shutdown flushes the
// buffered span and metrics to it.
func TestOTLPEndpointAloneTurnsOTLPOn(t *testing.T) {
	telemetrytest.ClearEnv(t)
	var mu sync.Mutex
	paths := map[string]int{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		paths[r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on") // the probe is a root span
	setupEmitShutdown(t)
	mu.Lock()
	defer mu.Unlock()
	if paths["/v1/traces"] == 0 || paths["/v1/metrics"] == 0 {
		t.Errorf("collector got %v, want /v1/traces and /v1/metrics", paths)
	}
}

func TestSetupErrors(t *testing.T) {
	telemetrytest.ClearEnv(t)
	t.Run("unknown exporter", func(t *testing.T) {
		t.Setenv("OTEL_TRACES_EXPORTER", "carrier-pigeon")
		if _, err := Setup(context.Background(), Config{}); err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
			t.Errorf("Setup with an unknown exporter: %v, want an error naming OTEL_TRACES_EXPORTER", err)
		}
	})
	for _, c := range []struct{ sampler, arg, want string }{
		{"always-on", "", "OTEL_TRACES_SAMPLER"},
		{"parentbased_traceidratio", "1.5", "OTEL_TRACES_SAMPLER_ARG"},
		{"traceidratio", "half", "OTEL_TRACES_SAMPLER_ARG"},
	} {
		t.Run("sampler "+c.sampler+" "+c.arg, func(t *testing.T) {
			t.Setenv("OTEL_TRACES_SAMPLER", c.sampler)
			t.Setenv("OTEL_TRACES_SAMPLER_ARG", c.arg)
			if _, err := Setup(context.Background(), Config{}); err == nil || !strings.Contains(err.Error(), c.want+":") {
				t.Errorf("Setup: %v, want an error naming %s", err, c.want)
			}
		})
	}
	t.Run("valid sampler", func(t *testing.T) {
		t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
		t.Setenv("OTEL_TRACES_SAMPLER_ARG", "0.25")
		tel, err := Setup(context.Background(), Config{})
		if err != nil {
			t.Fatalf("Setup with a valid sampler: %v", err)
		}
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	t.Run("metrics address in use", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		_, err = Setup(context.Background(), Config{MetricsAddr: ln.Addr().String()})
		var se *setting.Error
		if !errors.As(err, &se) || se.Field != "MetricsAddr" || !strings.Contains(err.Error(), ln.Addr().String()) {
			t.Errorf("Setup on a busy address: %v, want a *setting.Error naming MetricsAddr", err)
		}
	})
}

const childEnv = "TELEMETRY_TEST_CHILD"

// runChild runs TestChildProbe in a process of its own, with the OTEL_*
// variables cleared and env added, and returns what it printed.
func runChild(t *testing.T, env ...string) (stdout, stderr string) {
	t.Helper()
	const test = "TestChildProbe"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, childEnv+"=1")
	cmd.Env = append(cmd.Env, env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("child %s: %v\nstdout: %s\nstderr: %s", test, err, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

var attributeProbe = attribute.String("probe.attr", "x")

// TestDefaultSampler: without OTEL_TRACES_SAMPLER, padding rounds are
// always recorded, spans with a parent follow it, and other roots (requests
// from callers that do not trace) are recorded at 1%.
func TestDefaultSampler(t *testing.T) {
	telemetrytest.ClearEnv(t)
	rec := tracetest.NewSpanRecorder()
	tel := setup(t, Config{SpanProcessors: []sdktrace.SpanProcessor{rec}})
	tracer := tel.TracerProvider().Tracer("test")
	// 1% of 20,000 is 200 (a standard deviation of 14): a sampler that
	// records nothing, or everything, or 2% falls outside 100..300; 1% of
	// random trace IDs falls outside once in far more runs than this
	// test will ever see.
	const roots = 20000
	recorded, withSpan := 0, 0
	for range roots {
		ctx, s := tracer.Start(context.Background(), "process uid.next")
		if s.IsRecording() {
			recorded++
		} else if trace.SpanContextFromContext(ctx).IsValid() {
			withSpan++
		}
		s.End()
	}
	if recorded < roots/200 || recorded > roots*3/200 {
		t.Errorf("%d of %d root request spans recorded, want about 1%% (%d..%d)", recorded, roots, roots/200, roots*3/200)
	}
	// A root not recorded starts no span: the context handed back is
	// the caller's, without new trace and span IDs.
	if withSpan != 0 {
		t.Errorf("%d root request spans not recorded put a span context in the context", withSpan)
	}
	_, padding := tracer.Start(context.Background(), PaddingSpanName)
	if !padding.IsRecording() {
		t.Error("padding round not recorded")
	}
	padding.End()
	for _, sampled := range []bool{true, false} {
		flags := trace.TraceFlags(0)
		if sampled {
			flags = trace.FlagsSampled
		}
		parent := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: flags, Remote: true})
		_, s := tracer.Start(trace.ContextWithRemoteSpanContext(context.Background(), parent), "process uid.next")
		if s.IsRecording() != sampled {
			t.Errorf("child of a parent sampled=%v recorded=%v", sampled, s.IsRecording())
		}
		s.End()
	}
	// The environment and Config.Sampler override the default.
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	tel2 := setup(t, Config{SpanProcessors: []sdktrace.SpanProcessor{tracetest.NewSpanRecorder()}})
	if _, s := tel2.TracerProvider().Tracer("test").Start(context.Background(), "process uid.next"); !s.IsRecording() {
		t.Error("OTEL_TRACES_SAMPLER=always_on did not record a root span")
	}
	t.Setenv("OTEL_TRACES_SAMPLER", "")
	tel3 := setup(t, Config{SpanProcessors: []sdktrace.SpanProcessor{tracetest.NewSpanRecorder()}, Sampler: sdktrace.NeverSample()})
	if _, s := tel3.TracerProvider().Tracer("test").Start(context.Background(), PaddingSpanName); s.IsRecording() {
		t.Error("Config.Sampler did not override the default")
	}
}
