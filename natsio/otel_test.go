package natsio

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/sequence/sequencetest"
	"github.com/uid-dispenser/uid-dispenser/telemetry"
	"github.com/uid-dispenser/uid-dispenser/telemetry/telemetrytest"
	"github.com/uid-dispenser/uid-dispenser/telemetry/uidattr"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// otelCapture is what installOTel records: spans in memory, metrics on
// demand.
type otelCapture struct{ *telemetrytest.Providers }

// installOTel makes SDK providers that keep everything in memory the
// global ones, with the W3C propagator, for services and clients made
// afterwards; the test's cleanup puts no-ops back before the providers
// shut down.
func installOTel(t *testing.T) *otelCapture {
	t.Helper()
	c := &otelCapture{telemetrytest.NewProviders(t)}
	otel.SetTracerProvider(c.Tracer)
	otel.SetMeterProvider(c.Meter)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	})
	return c
}

// span waits for the n-th (from 1) ended span named name: a server span
// ends just after its reply is sent, so the client may be quicker.
func (c *otelCapture) span(t *testing.T, name string, n int) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	testenv.WaitFor(t, 5*time.Second, fmt.Sprintf("%d spans %q ended", n, name), func() bool {
		seen := 0
		for _, s := range c.Spans.Ended() {
			if s.Name() == name {
				if seen++; seen == n {
					found = s
					return true
				}
			}
		}
		return false
	})
	return found
}

// spanWhere waits for an ended span named name that satisfies match.
func (c *otelCapture) spanWhere(t *testing.T, name string, match func(sdktrace.ReadOnlySpan) bool) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	testenv.WaitFor(t, 5*time.Second, fmt.Sprintf("a span %q as wanted ended", name), func() bool {
		for _, s := range c.Spans.Ended() {
			if s.Name() == name && match(s) {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

// metric sums the points of the named metric carrying all of match.
func (c *otelCapture) metric(t *testing.T, name string, match ...attribute.KeyValue) float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := c.Reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sum, _ := telemetrytest.MetricSum(rm, name, match...)
	return sum
}

// TestTraceAcrossNATS: the client's span and the dispenser's server span
// share the caller's trace, with messaging attributes, and the request
// metrics count them.
func TestTraceAcrossNATS(t *testing.T) {
	capture := installOTel(t)
	url := startNATS(t, nil)
	startInstance(t, url, 7, instanceOpts{})
	client := uidclient.New(connect(t, url).Conn, uidclient.Config{})

	ctx, caller := otel.Tracer("test").Start(context.Background(), "caller")
	id, err := client.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := client.Batch(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	caller.End()
	testenv.CheckDistinct(t, append(ids, id))

	callerSC := caller.SpanContext()
	for _, c := range []struct {
		endpoint string
		count    int64
	}{{protocol.EndpointNext, 1}, {protocol.EndpointBatch, 5}} {
		subject := protocol.Subject(protocol.DefaultSubjectPrefix, c.endpoint)
		send := capture.span(t, "send "+subject, 1)
		process := capture.span(t, "process "+subject, 1)
		if send.SpanKind() != trace.SpanKindClient || send.Parent().SpanID() != callerSC.SpanID() {
			t.Errorf("%s: client span kind %v parent %v, want a client span under the caller %v", subject, send.SpanKind(), send.Parent().SpanID(), callerSC.SpanID())
		}
		if process.SpanKind() != trace.SpanKindServer || process.SpanContext().TraceID() != callerSC.TraceID() ||
			process.Parent().SpanID() != send.SpanContext().SpanID() || !process.Parent().IsRemote() {
			t.Errorf("%s: server span kind %v trace %v parent %v, want a server span in trace %v under the client span %v",
				subject, process.SpanKind(), process.SpanContext().TraceID(), process.Parent().SpanID(), callerSC.TraceID(), send.SpanContext().SpanID())
		}
		want := map[attribute.Key]attribute.Value{
			"messaging.system":              attribute.StringValue("nats"),
			"messaging.operation.name":      attribute.StringValue("process"),
			"messaging.destination.name":    attribute.StringValue(subject),
			"messaging.consumer.group.name": attribute.StringValue(protocol.DefaultQueueGroup),
			uidattr.WorkerID:                attribute.Int64Value(7),
		}
		if c.endpoint == protocol.EndpointBatch {
			want[uidattr.Count] = attribute.Int64Value(c.count)
		}
		// Exactly these: every attribute of a recorded span costs each
		// request CPU (see endpointTelemetry), and a success needs no
		// outcome.
		got := map[attribute.Key]attribute.Value{}
		for _, kv := range process.Attributes() {
			got[kv.Key] = kv.Value
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: server span attributes %v, want %v", subject, got, want)
		}
		if process.Status().Code == codes.Error {
			t.Errorf("%s: server span status %v", subject, process.Status())
		}
	}
	if got := capture.metric(t, "uid.requests", uidattr.Endpoint.String(protocol.EndpointNext), uidattr.Outcome.String(outcomeOK)); got != 1 {
		t.Errorf("uid.requests{next,ok} = %v, want 1", got)
	}
	if got := capture.metric(t, "uid.request.duration", uidattr.Endpoint.String(protocol.EndpointBatch)); got != 1 {
		t.Errorf("uid.request.duration{batch} count = %v, want 1", got)
	}
	if got := capture.metric(t, "uid.ids.issued"); got != 6 {
		t.Errorf("uid.ids.issued = %v, want 6", got)
	}
}

// TestLowerCaseTraceparentFromRawRequest: a raw request from another
// client, with the header in lower case, gets a server span in its trace.
func TestLowerCaseTraceparentFromRawRequest(t *testing.T) {
	capture := installOTel(t)
	url := startNATS(t, nil)
	startInstance(t, url, 4, instanceOpts{})
	nc := connect(t, url)
	for i, key := range []string{"traceparent", "Traceparent"} {
		traceID := [...]string{"4bf92f3577b34da6a3ce929d0e0e4736", "5bf92f3577b34da6a3ce929d0e0e4736"}[i]
		msg := &nats.Msg{Subject: "uid.next", Header: nats.Header{key: {"00-" + traceID + "-00f067aa0ba902b7-01"}}}
		if _, err := nc.RequestMsg(msg, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		s := capture.span(t, "process uid.next", i+1)
		if s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != "00f067aa0ba902b7" {
			t.Errorf("header %q: server span trace %v parent %v, want trace %s parent 00f067aa0ba902b7",
				key, s.SpanContext().TraceID(), s.Parent().SpanID(), traceID)
		}
	}
}

// TestServerSpanRecordsErrors: a bad request ends its span with an error
// status and counts as bad_request.
func TestServerSpanRecordsErrors(t *testing.T) {
	capture := installOTel(t)
	url := startNATS(t, nil)
	startInstance(t, url, 4, instanceOpts{})
	client := uidclient.New(connect(t, url).Conn, uidclient.Config{})
	// Above the ranges limit (one lane-second: 2^22), which the client asks.
	_, err := client.Batch(context.Background(), 1<<22+1)
	if !errors.Is(err, protocol.ErrBadRequest) {
		t.Fatalf("oversized batch: %v, want a bad request", err)
	}
	s := capture.span(t, "process uid.batch", 1)
	if s.Status().Code != codes.Error || telemetrytest.Attr(s.Attributes(), uidattr.Outcome).AsString() != outcomeBadRequest || len(s.Events()) == 0 {
		t.Errorf("server span status %v outcome %q events %v, want an error, bad_request, the error recorded",
			s.Status(), telemetrytest.Attr(s.Attributes(), uidattr.Outcome).AsString(), s.Events())
	}
	if c := capture.span(t, "send uid.batch", 1); c.Status().Code != codes.Error {
		t.Errorf("client span status %v, want an error", c.Status())
	}
	if got := capture.metric(t, "uid.requests", uidattr.Outcome.String(outcomeBadRequest)); got != 1 {
		t.Errorf("uid.requests{bad_request} = %v, want 1", got)
	}
}

// TestRejectedTakeIsAnEventOnTheServerSpan: the request's context reaches
// the generator, so the telemetry observer puts the rejected take on the
// request's server span.
func TestRejectedTakeIsAnEventOnTheServerSpan(t *testing.T) {
	capture := installOTel(t)
	url := startNATS(t, nil)
	layout := uidcore.Layout{TimeBits: 43, WorkerBits: 10, SeqBits: 10, Epoch: uidcore.DefaultEpoch}
	obs, err := telemetry.NewObserver(telemetry.ObserverConfig{Layout: layout, WorkerID: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	// A ring of 1,024 IDs at most 1 s ahead of the clock and no waiting:
	// batches of 1,000 drain it within a few requests.
	startInstance(t, url, 2, instanceOpts{cached: uidcore.CachedOptions{
		Layout: layout, RingSeconds: 1, MaxAhead: time.Second, TakeWait: time.Nanosecond, Observer: obs,
	}})
	nc := connect(t, url)
	var code string
	for range 20 {
		if code, _ = errorReply(t, nc, &nats.Msg{Subject: "uid.batch", Data: []byte("1000")}); code != "" {
			break
		}
	}
	if code != "503" {
		t.Fatalf("drained ring answered %q, want 503", code)
	}
	rejected := capture.spanWhere(t, "process uid.batch", func(s sdktrace.ReadOnlySpan) bool {
		return telemetrytest.Attr(s.Attributes(), uidattr.Outcome).AsString() == outcomeUnavailable
	})
	var event bool
	for _, e := range rejected.Events() {
		event = event || e.Name == telemetry.TakeRejectedEventName
	}
	if !event || rejected.Status().Code != codes.Error {
		t.Errorf("503 server span: events %v status %v, want %s and an error status", rejected.Events(), rejected.Status(), telemetry.TakeRejectedEventName)
	}
	if got := capture.metric(t, "uid.take.rejections"); got < 1 {
		t.Errorf("uid.take.rejections = %v, want >= 1", got)
	}
}

// TestBlockPublishesAreProducerSpans: each JetStream block publish is a
// producer span, and the stored block carries its trace context.
func TestBlockPublishesAreProducerSpans(t *testing.T) {
	capture := installOTel(t)
	inst := startInstance(t, startNATS(t, nil), 9, instanceOpts{})
	nc := inst.conn.Conn
	const depth, size = 3, 100
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := NewBlockPublisher(ctx, nc, inst.gen, BlocksConfig{BlockSize: size, TargetDepth: depth, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	testenv.WaitFor(t, 5*time.Second, "the stream filled", func() bool { return p.Stats().Published == depth })

	name := "send " + protocol.DefaultBlocksSubject
	spanIDs := map[string]bool{}
	for i := 1; i <= depth; i++ {
		s := capture.span(t, name, i)
		if s.SpanKind() != trace.SpanKindProducer || telemetrytest.Attr(s.Attributes(), uidattr.Count).AsInt64() != size ||
			telemetrytest.Attr(s.Attributes(), uidattr.Outcome).AsString() != "stored" || telemetrytest.Attr(s.Attributes(), "messaging.system").AsString() != "nats" {
			t.Errorf("block span %d: kind %v attributes %v, want a producer span of a stored block of %d", i, s.SpanKind(), s.Attributes(), size)
		}
		spanIDs[s.SpanContext().SpanID().String()] = true
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, protocol.DefaultBlocksStream)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := stream.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), protocol.HeaderCarrier(stored.Header)))
	if !sc.IsValid() || !spanIDs[sc.SpanID().String()] {
		t.Errorf("stored block carries trace context %v, want one of the producer spans %v", sc, spanIDs)
	}
}

// BenchmarkRequestTelemetry is what telemetry adds to one request, without
// NATS: the server span and request metrics (side=server: the caller does
// not trace), plus the client span with the trace context injected and
// extracted (side=both); with tracing off (no-op provider), on with the
// request not sampled, on and recorded (batch processor, an exporter that
// drops the spans), and recorded and exported (OTLP/HTTP to a local
// receiver that discards). The metrics are on in all. cpu-ns/op is the
// process's CPU per request, so the batch processor's export in the
// background is counted.
func BenchmarkRequestTelemetry(b *testing.B) {
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer receiver.Close()
	for _, side := range []string{"server", "both"} {
		for _, mode := range []string{"off", "unsampled", "recorded", "exported"} {
			b.Run("side="+side+"/tracing="+mode, func(b *testing.B) {
				tp := trace.TracerProvider(tracenoop.NewTracerProvider())
				if mode != "off" {
					sampler := sdktrace.AlwaysSample()
					if mode == "unsampled" {
						sampler = sdktrace.NeverSample()
					}
					var exporter sdktrace.SpanExporter = tracetest.NewNoopExporter()
					if mode == "exported" {
						var err error
						if exporter, err = otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(receiver.URL+"/v1/traces")); err != nil {
							b.Fatal(err)
						}
					}
					sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(exporter))
					defer sdk.Shutdown(context.Background())
					tp = sdk
				}
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				defer mp.Shutdown(context.Background())
				otel.SetTracerProvider(tp)
				otel.SetMeterProvider(mp)
				otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
				defer func() {
					otel.SetTracerProvider(tracenoop.NewTracerProvider())
					otel.SetMeterProvider(metricnoop.NewMeterProvider())
					otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
				}()
				server := newServerTelemetry(protocol.DefaultQueueGroup, nil, nil).endpoint(protocol.EndpointNext, "uid.next")
				workerID := func() uint64 { return 7 }
				clientTP := otel.GetTracerProvider()
				if side == "server" {
					clientTP = tracenoop.NewTracerProvider()
				}
				client := clientStandIn{tracer: clientTP.Tracer("bench")}
				b.ReportAllocs()
				cpu := testenv.ProcessCPU(b)
				b.ResetTimer()
				for range b.N {
					msg := &nats.Msg{Subject: "uid.next"}
					span := client.start(msg)
					ctx, r := server.start(msg.Header, workerID)
					server.end(ctx, r, 1, 0, nil)
					span.End()
				}
				if sdk, ok := tp.(*sdktrace.TracerProvider); ok {
					if err := sdk.ForceFlush(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(testenv.ProcessCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// clientStandIn does per request what uidclient's telemetry does (its own
// cost is measured by uidclient's BenchmarkClientTelemetry): a client span
// with the messaging attributes and its trace context injected into the
// headers.
type clientStandIn struct{ tracer trace.Tracer }

func (c clientStandIn) start(msg *nats.Msg) trace.Span {
	ctx, span := c.tracer.Start(context.Background(), "send "+msg.Subject, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(semconv.MessagingSystemKey.String("nats"), semconv.MessagingDestinationNameKey.String(msg.Subject),
			semconv.MessagingOperationTypeSend, semconv.MessagingOperationNameKey.String("send"))
	}
	h := protocol.HeaderCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, h)
	if len(h) > 0 {
		msg.Header = nats.Header(h)
	}
	return span
}

// TestServiceTakesInjectedProviders: providers in ServiceConfig make the
// server spans and metrics, with the global ones left as they are (no-op).
func TestServiceTakesInjectedProviders(t *testing.T) {
	p := telemetrytest.NewProviders(t)
	url := startNATS(t, nil)
	startInstance(t, url, 4, instanceOpts{service: ServiceConfig{TracerProvider: p.Tracer, MeterProvider: p.Meter}})
	client := uidclient.New(connect(t, url).Conn, uidclient.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := client.Next(ctx); err != nil {
		t.Fatal(err)
	}
	capture := otelCapture{p}
	if s := capture.span(t, "process uid.next", 1); s.SpanKind() != trace.SpanKindServer {
		t.Errorf("span kind %v, want server", s.SpanKind())
	}
	if got := capture.metric(t, "uid.requests", uidattr.Endpoint.String(protocol.EndpointNext)); got != 1 {
		t.Errorf("uid.requests = %v, want 1", got)
	}
}

// TestSequenceSpansNameTheSequence: the spans of sequence requests, the
// server's and the client's, are named after the wildcard subject and
// carry the sequence's name, for a
// next, a batch (one that waits for a segment, the name's first request
// here, and one answered from memory) and a batch whose body does not
// parse.
func TestSequenceSpansNameTheSequence(t *testing.T) {
	capture := installOTel(t)
	url := startNATS(t, nil)
	seqInstance(t, url, sequencetest.NewMemStore(),
		sequence.Declaration{Name: "orders", First: 1}, sequence.Declaration{Name: "invoices", First: 1})
	nc := connect(t, url)
	client := uidclient.New(nc.Conn, uidclient.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.SeqBatch(ctx, "invoices", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := client.SeqNext(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.SeqBatch(ctx, "invoices", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Request(protocol.SeqSubject("uid", "orders", "batch"), []byte("many"), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	nameOf := func(s sdktrace.ReadOnlySpan) string {
		return telemetrytest.Attr(s.Attributes(), uidattr.Sequence).AsString()
	}
	next := capture.span(t, "process uid.seq.*.next", 1)
	if nameOf(next) != "orders" || telemetrytest.Attr(next.Attributes(), semconv.MessagingDestinationNameKey).AsString() != "uid.seq.*.next" {
		t.Errorf("next span: sequence %q, attributes %v; want orders on the wildcard subject", nameOf(next), next.Attributes())
	}
	if send := capture.span(t, "send uid.seq.*.next", 1); nameOf(send) != "orders" {
		t.Errorf("client span of seq next: sequence %q, want orders", nameOf(send))
	}
	// Spans end just after their replies go out: in any order.
	capture.span(t, "process uid.seq.*.batch", 3)
	got := map[string]int{}
	for _, s := range capture.Spans.Ended() {
		if s.Name() == "process uid.seq.*.batch" {
			got[nameOf(s)+" "+cmp.Or(telemetrytest.Attr(s.Attributes(), uidattr.Outcome).AsString(), s.Status().Code.String())]++
			if s.Status().Code != codes.Error && telemetrytest.Attr(s.Attributes(), uidattr.Count).AsInt64() < 1 {
				t.Errorf("sequence batch span without uid.count: %v", s.Attributes())
			}
		}
	}
	if want := map[string]int{"invoices Unset": 2, "orders " + outcomeBadRequest: 1}; !maps.Equal(got, want) {
		t.Errorf("batch spans by sequence and outcome %v, want %v", got, want)
	}
}

// TestRequestTelemetryWithTheNoopTracer: given OpenTelemetry's no-op
// tracer (a dispenser's when nothing exports its spans), a request starts
// no span and allocates nothing for its telemetry, its metrics are still
// recorded, and the context passed down still carries the caller's trace.
func TestRequestTelemetryWithTheNoopTracer(t *testing.T) {
	p := &otelCapture{telemetrytest.NewProviders(t)}
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) })
	e := newServerTelemetry(protocol.DefaultQueueGroup, tracenoop.NewTracerProvider(), p.Meter).endpoint(protocol.EndpointNext, "uid.next")
	workerID := func() uint64 { return 7 }
	const runs = 100
	allocs := testing.AllocsPerRun(runs, func() {
		ctx, r := e.start(nil, workerID)
		e.end(ctx, r, 1, 0, nil)
	})
	if allocs != 0 {
		t.Errorf("%v allocations a request, want 0", allocs)
	}
	// AllocsPerRun runs the function once more than it is asked to.
	if got := p.metric(t, "uid.requests", uidattr.Endpoint.String(protocol.EndpointNext), uidattr.Outcome.String(outcomeOK)); got != runs+1 {
		t.Errorf("uid.requests %v, want %d", got, runs+1)
	}
	if got := p.metric(t, "uid.ids.issued", uidattr.Endpoint.String(protocol.EndpointNext)); got != runs+1 {
		t.Errorf("uid.ids.issued %v, want %d", got, runs+1)
	}

	caller := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled})
	headers := protocol.HeaderCarrier{}
	otel.GetTextMapPropagator().Inject(trace.ContextWithSpanContext(context.Background(), caller), headers)
	ctx, r := e.start(headers, workerID)
	if got := trace.SpanContextFromContext(ctx); got.TraceID() != caller.TraceID() || got.SpanID() != caller.SpanID() || !got.IsRemote() {
		t.Errorf("context passed down carries %v, want the caller's %v, remote", got, caller)
	}
	if r.span.IsRecording() {
		t.Error("a span is recording with the no-op tracer")
	}
	e.end(ctx, r, 1, 0, nil)
}
