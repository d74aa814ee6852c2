package telemetry

import (
	"cmp"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/telemetry/telemetrytest"
)

// otlpReceiver is a collector's OTLP/HTTP traces endpoint that keeps the
// requests it gets, decoded.
type otlpReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*coltracepb.ExportTraceServiceRequest
	errs     []error
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		msg := &coltracepb.ExportTraceServiceRequest{}
		if err == nil {
			err = proto.Unmarshal(body, msg)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.errs = append(r.errs, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.requests = append(r.requests, msg)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(r.Close)
	return r
}

// newGRPCOTLPReceiver is otlpReceiver as a collector's gRPC
// TraceService, decoding with gRPC's own codec; it returns the address.
func newGRPCOTLPReceiver(t *testing.T) (*otlpReceiver, string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{}
	s := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(s, grpcTraces{r: r})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return r, l.Addr().String()
}

type grpcTraces struct {
	coltracepb.UnimplementedTraceServiceServer
	r *otlpReceiver
}

func (g grpcTraces) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.r.mu.Lock()
	defer g.r.mu.Unlock()
	g.r.requests = append(g.r.requests, req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// received is every ResourceSpans received, each one's scopes sorted by
// name (OTLP gives their order no meaning; the SDK's exporter takes it
// from a map).
func (r *otlpReceiver) received(t *testing.T) []*tracepb.ResourceSpans {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) > 0 {
		t.Fatalf("the receiver could not decode a request: %v", r.errs[0])
	}
	var all []*tracepb.ResourceSpans
	for _, req := range r.requests {
		for _, rs := range req.ResourceSpans {
			slices.SortFunc(rs.ScopeSpans, func(a, b *tracepb.ScopeSpans) int {
				return cmp.Compare(a.GetScope().GetName(), b.GetScope().GetName())
			})
			all = append(all, rs)
		}
	}
	return all
}

// variedSpans ends spans of every shape the SDK makes: every attribute
// type, events, links (local and remote), each status, a remote parent
// with trace state, dropped attributes, events and links, three scopes
// (one with a version, a schema URL and attributes, one without a name),
// and returns them as an exporter gets them.
func variedSpans(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.name", "uid-dispenser"), attribute.Int("pid", 42))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res),
		sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{AttributeCountLimit: 24, EventCountLimit: 3, LinkCountLimit: 2,
			AttributeValueLengthLimit: -1, AttributePerEventCountLimit: 2, AttributePerLinkCountLimit: 2}))
	defer tp.Shutdown(context.Background())
	scoped := tp.Tracer("natsio", trace.WithInstrumentationVersion("1.2.3"),
		trace.WithSchemaURL("https://opentelemetry.io/schemas/1.26.0"),
		trace.WithInstrumentationAttributes(attribute.String("scope.attr", "x")))
	plain := tp.Tracer("telemetry")
	unnamed := tp.Tracer("")

	ts, err := trace.ParseTraceState("vendor=value,other=1")
	if err != nil {
		t.Fatal(err)
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true,
	})
	every := []attribute.KeyValue{
		attribute.String("s", "text"), attribute.String("empty", ""), attribute.Bool("t", true), attribute.Bool("f", false),
		attribute.Int64("i", -42), attribute.Int64("zero", 0), attribute.Int64("max", math.MaxInt64),
		attribute.Float64("d", 3.25), attribute.Float64("nan", math.NaN()), attribute.Float64("negzero", math.Copysign(0, -1)),
		attribute.StringSlice("ss", []string{"a", "", "c"}), attribute.BoolSlice("bs", []bool{true, false}),
		attribute.Int64Slice("is", []int64{1, -2, 3}), attribute.Float64Slice("fs", []float64{0.5, -1}),
		attribute.StringSlice("empty slice", nil),
		attribute.String("long", string(make([]byte, 300))), // a length of two bytes
	}
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
	_, server := scoped.Start(ctx, "process uid.next", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(every...),
		trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("a", "1"), attribute.String("b", "2"), attribute.String("dropped", "3")}}))
	server.AddEvent("uid.take.rejected", trace.WithAttributes(attribute.String("reason", "empty"), attribute.Int("wanted", 1), attribute.Int("dropped", 1)),
		trace.WithTimestamp(time.Unix(1_700_000_000, 5)))
	server.SetStatus(codes.Error, "503: no ID right now")
	server.End()

	parentCtx, parent := plain.Start(context.Background(), "uid.padding", trace.WithSpanKind(trace.SpanKindInternal))
	_, child := plain.Start(parentCtx, "send uid.blocks", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithLinks(trace.Link{SpanContext: parent.SpanContext()}, trace.Link{SpanContext: remote}, trace.Link{SpanContext: remote}))
	for i := range 5 { // past the event limit
		child.AddEvent("ev", trace.WithAttributes(attribute.Int("i", i)))
	}
	child.SetStatus(codes.Ok, "")
	child.End()
	parent.End()

	_, client := unnamed.Start(context.Background(), "send uid.batch", trace.WithSpanKind(trace.SpanKindClient))
	for i := range 30 { // past the attribute limit
		client.SetAttributes(attribute.Int(string(rune('a'+i%26))+string(rune('a'+i/26)), i))
	}
	client.End()
	_, consumer := unnamed.Start(context.Background(), "", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithTimestamp(time.Unix(0, 0).Add(-time.Second))) // before the epoch
	consumer.End(trace.WithTimestamp(time.Unix(0, 0).Add(-time.Second)))
	return rec.Ended()
}

// otlpClients make the SDK's OTLP client of each protocol for a
// receiver's endpoint (an HTTP URL or a gRPC address).
var otlpClients = map[string]func(endpoint string) otlptrace.Client{
	"http/protobuf": func(url string) otlptrace.Client {
		return otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(url + "/v1/traces"))
	},
	"grpc": func(addr string) otlptrace.Client {
		return otlptracegrpc.NewClient(otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure())
	},
}

// newReceiver starts a receiver of the protocol and returns it with the
// endpoint its client is given.
func newReceiver(t *testing.T, protocol string) (*otlpReceiver, string) {
	if protocol == "grpc" {
		return newGRPCOTLPReceiver(t)
	}
	r := newOTLPReceiver(t)
	return r, r.URL
}

// TestOTLPSpansMatchTheSDKExporter: what a collector receives from
// otlpSpanExporter decodes to exactly what it receives from the SDK's
// OTLP exporter for the same spans, over HTTP and over gRPC (each side
// the SDK's client of the protocol; the gRPC receiver decodes with
// gRPC's own codec).
func TestOTLPSpansMatchTheSDKExporter(t *testing.T) {
	spans := variedSpans(t)
	if len(spans) != 5 {
		t.Fatalf("%d spans, want 5", len(spans))
	}
	for protocol := range otlpClients {
		t.Run(protocol, func(t *testing.T) {
			got := matchSDKExporter(t, protocol, spans)
			if n := len(got[0].GetScopeSpans()); n != 3 {
				t.Errorf("%d scopes, want 3", n)
			}
		})
	}
}

// matchSDKExporter exports spans with otlpSpanExporter and with the SDK's
// OTLP exporter, each over the SDK's client of protocol to a receiver of
// its own, in two exports of the same spans (so that an encoding one
// export leaves behind meets the next), fails the test unless the
// receivers decode the same messages, and returns ours.
func matchSDKExporter(t *testing.T, protocol string, spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	t.Helper()
	ctx := context.Background()
	newClient := otlpClients[protocol]
	export := func(exp sdktrace.SpanExporter) {
		t.Helper()
		for range 2 {
			if err := exp.ExportSpans(ctx, spans); err != nil {
				t.Fatal(err)
			}
		}
		if err := exp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sdkReceiver, sdkEndpoint := newReceiver(t, protocol)
	ourReceiver, ourEndpoint := newReceiver(t, protocol)
	sdkExporter, err := otlptrace.New(ctx, newClient(sdkEndpoint))
	if err != nil {
		t.Fatal(err)
	}
	export(sdkExporter)
	ours, err := newOTLPSpanExporter(ctx, newClient(ourEndpoint))
	if err != nil {
		t.Fatal(err)
	}
	export(ours)

	want, got := sdkReceiver.received(t), ourReceiver.received(t)
	if len(want) != 2 {
		t.Fatalf("the SDK exporter sent %d ResourceSpans in two exports, want 2", len(want))
	}
	if !proto.Equal(&tracepb.TracesData{ResourceSpans: want}, &tracepb.TracesData{ResourceSpans: got}) {
		t.Errorf("received from otlpSpanExporter:\n%v\nfrom the SDK exporter:\n%v", got, want)
	}
	return got
}

// TestOTLPSpansWithRepeatedAttributes: spans one after the other whose
// attributes repeat (the server spans of an endpoint), differ in one
// value, in a value's type or in their number, hold a slice or none, are
// received as the SDK's exporter sends them (otlpSpanExporter reuses the
// encoding of attributes equal to the last span's).
func TestOTLPSpansWithRepeatedAttributes(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tracer := tp.Tracer("natsio")
	base := []attribute.KeyValue{attribute.String("messaging.system", "nats"), attribute.String("messaging.destination.name", "uid.next")}
	for _, attrs := range [][]attribute.KeyValue{
		append(slices.Clip(base), attribute.Int("uid.worker_id", 7)),
		append(slices.Clip(base), attribute.Int("uid.worker_id", 7)),
		append(slices.Clip(base), attribute.Int("uid.worker_id", 8)),
		append(slices.Clip(base), attribute.String("uid.worker_id", "8")),
		append(slices.Clip(base), attribute.Float64("uid.worker_id", math.NaN())),
		append(slices.Clip(base), attribute.Float64("uid.worker_id", math.NaN())),
		base,
		nil,
		nil,
		append(slices.Clip(base), attribute.Int64Slice("uid.worker_id", []int64{7})),
		append(slices.Clip(base), attribute.Int64Slice("uid.worker_id", []int64{8})),
		append(slices.Clip(base), attribute.Int("uid.worker_id", 7)),
	} {
		_, s := tracer.Start(context.Background(), "process uid.next", trace.WithAttributes(attrs...))
		s.End()
	}
	matchSDKExporter(t, "http/protobuf", rec.Ended())
}

// TestOTLPSpanExporterFromEnv: the environment picks otlpSpanExporter
// where autoexport would pick OTLP, leaves the other exporters to it, and
// refuses a protocol that is neither grpc nor http/protobuf.
func TestOTLPSpanExporterFromEnv(t *testing.T) {
	for _, c := range []struct {
		name, exporter, protocol, endpoint string
		ours                               bool
		err                                string
	}{
		{name: "otlp", exporter: "otlp", ours: true},
		{name: "otlp over grpc", exporter: "otlp", protocol: "grpc", ours: true},
		{name: "an endpoint alone", endpoint: "http://127.0.0.1:4318", ours: true},
		{name: "nothing set"},
		{name: "console", exporter: "console"},
		{name: "none", exporter: "none"},
		{name: "http/json", exporter: "otlp", protocol: "http/json", err: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			telemetrytest.ClearEnv(t)
			t.Setenv("OTEL_TRACES_EXPORTER", c.exporter)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", c.protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.endpoint)
			exp, err := otlpSpanExporterFromEnv(context.Background())
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one naming %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, isOurs := exp.(*otlpSpanExporter); isOurs != c.ours {
				t.Errorf("exporter %T, want otlpSpanExporter: %v", exp, c.ours)
			}
			if exp != nil {
				if err := exp.Shutdown(context.Background()); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestOTLPSpanExporterAfterShutdown: an export after Shutdown fails
// without reaching the collector, and a second Shutdown is harmless.
func TestOTLPSpanExporterAfterShutdown(t *testing.T) {
	receiver := newOTLPReceiver(t)
	ctx := context.Background()
	exp, err := newOTLPSpanExporter(ctx, otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(receiver.URL+"/v1/traces")))
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(ctx, variedSpans(t)); !errors.Is(err, errExporterStopped) {
		t.Errorf("export after shutdown: %v, want errExporterStopped", err)
	}
	if err := exp.Shutdown(ctx); err != nil {
		t.Errorf("second shutdown: %v", err)
	}
	if got := receiver.received(t); len(got) != 0 {
		t.Errorf("the collector got %d ResourceSpans after shutdown", len(got))
	}
}

// BenchmarkOTLPSpanExporter is the export of recorded request spans as a
// dispenser's are (a server span of five attributes, the ones of
// uid.next), in batches of the batch processor's default 512, side by
// side: the SDK's OTLP exporter and otlpSpanExporter over the SDK's
// client, both over OTLP/HTTP to a local receiver that discards. One op
// is one span exported; cpu-ns/op is the whole process's CPU, the
// receiver's included.
func BenchmarkOTLPSpanExporter(b *testing.B) {
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer receiver.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tracer := tp.Tracer("github.com/uid-dispenser/uid-dispenser/natsio", trace.WithInstrumentationVersion("1.0.0"))
	const batch = 512
	for range batch {
		_, span := tracer.Start(context.Background(), "process uid.next", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("messaging.system", "nats"), attribute.String("messaging.operation.name", "process"),
			attribute.String("messaging.destination.name", "uid.next"), attribute.String("messaging.consumer.group.name", "uid-dispenser"),
			attribute.Int64("uid.worker_id", 7)))
		span.End()
	}
	spans := rec.Ended()
	ctx := context.Background()
	for _, exporter := range []string{"sdk", "direct"} {
		b.Run("exporter="+exporter, func(b *testing.B) {
			url := otlptracehttp.WithEndpointURL(receiver.URL + "/v1/traces")
			var exp sdktrace.SpanExporter
			var err error
			if exporter == "sdk" {
				exp, err = otlptracehttp.New(ctx, url)
			} else {
				exp, err = newOTLPSpanExporter(ctx, otlptracehttp.NewClient(url))
			}
			if err != nil {
				b.Fatal(err)
			}
			defer exp.Shutdown(ctx)
			b.ReportAllocs()
			cpu := testenv.ProcessCPU(b)
			n := 0
			for b.Loop() {
				if n%batch == 0 {
					if err := exp.ExportSpans(ctx, spans); err != nil {
						b.Fatal(err)
					}
				}
				n++
			}
			b.ReportMetric(float64(testenv.ProcessCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
