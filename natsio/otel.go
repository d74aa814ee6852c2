package natsio

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/uid-dispenser/uid-dispenser/telemetry/uidattr"
)

// This file is the OpenTelemetry side of natsio: trace context carried in
// NATS headers, a server span and request metrics per request, a client
// span per call. It uses the global providers and propagator, which the
// telemetry package installs; without them everything here is a no-op
// that still passes a caller's trace context on.

// instrumentationName names natsio's tracer and meter.
const instrumentationName = "github.com/uid-dispenser/uid-dispenser/natsio"

// messagingSystem is the messaging.system attribute's value.
const messagingSystem = "nats"

// Outcomes of a request, the uid.outcome attribute.
const (
	OutcomeOK          = "ok"
	OutcomeBadRequest  = "bad_request"
	OutcomeUnavailable = "unavailable"
	OutcomeInternal    = "internal"
)

// outcomeOf names the outcome of a reply by its error code (0: success).
func outcomeOf(code int) string {
	switch code {
	case 0:
		return OutcomeOK
	case CodeBadRequest:
		return OutcomeBadRequest
	case CodeUnavailable:
		return OutcomeUnavailable
	}
	return OutcomeInternal
}

// HeaderCarrier lets an OpenTelemetry propagator read and write trace
// context in NATS headers (nats.Header and micro.Headers convert to it).
// Keys match case-insensitively: nats.Header is case-sensitive, the W3C
// propagator writes "traceparent" and other clients may send
// "Traceparent" or "TRACEPARENT". (propagation.HeaderCarrier would
// canonicalise the key to "Traceparent" and miss the lower-case one.)
type HeaderCarrier map[string][]string

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the first value of key, matched without regard to case.
func (c HeaderCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range c {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

// Set replaces every spelling of key with key itself holding value. The
// map must not be nil.
func (c HeaderCarrier) Set(key, value string) {
	for k := range c {
		if k != key && strings.EqualFold(k, key) {
			delete(c, k)
		}
	}
	c[key] = []string{value}
}

// Keys lists the header names as they are spelt.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// serverTelemetry holds a service's tracer and request instruments, taken
// from the global providers when the service is made.
type serverTelemetry struct {
	tracer     trace.Tracer
	queueGroup attribute.KeyValue

	requests metric.Int64Counter
	duration metric.Float64Histogram
	issued   metric.Int64Counter
	// attrSets caches the metric attribute set per endpoint and outcome,
	// so recording does not build and sort one per request.
	attrSets sync.Map // [2]string{endpoint, outcome} -> metric.MeasurementOption
	spans    spanTemplates
}

// spanTemplate is the name, kind and attributes of the spans on one
// subject, built once. The attributes are set only on recording spans:
// with sampling, most spans are not recorded, and for them the start must
// cost as little as it can.
type spanTemplate struct {
	name  string
	kind  trace.SpanStartOption
	attrs []attribute.KeyValue
}

// start starts a span from the template.
func (tmpl *spanTemplate) start(ctx context.Context, tracer trace.Tracer) (context.Context, trace.Span) {
	ctx, span := tracer.Start(ctx, tmpl.name, tmpl.kind)
	if span.IsRecording() {
		span.SetAttributes(tmpl.attrs...)
	}
	return ctx, span
}

// spanTemplates caches a spanTemplate per subject (a service or client
// has one subject per endpoint).
type spanTemplates struct {
	m sync.Map // subject -> *spanTemplate
}

func (c *spanTemplates) get(subject string, build func() *spanTemplate) *spanTemplate {
	if t, ok := c.m.Load(subject); ok {
		return t.(*spanTemplate)
	}
	t, _ := c.m.LoadOrStore(subject, build())
	return t.(*spanTemplate)
}

func newServerTelemetry(queueGroup string) *serverTelemetry {
	t := &serverTelemetry{
		tracer:     otel.GetTracerProvider().Tracer(instrumentationName, trace.WithInstrumentationVersion(ServiceVersion)),
		queueGroup: semconv.MessagingConsumerGroupNameKey.String(queueGroup),
	}
	m := otel.GetMeterProvider().Meter(instrumentationName, metric.WithInstrumentationVersion(ServiceVersion))
	var err error
	if t.requests, err = m.Int64Counter("uid.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Requests served, by endpoint and outcome.")); err != nil {
		otel.Handle(err)
		t.requests = metricnoop.Int64Counter{}
	}
	if t.duration, err = m.Float64Histogram("uid.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from receiving a request to handing its reply to the connection, by endpoint and outcome."),
		metric.WithExplicitBucketBoundaries(0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)); err != nil {
		otel.Handle(err)
		t.duration = metricnoop.Float64Histogram{}
	}
	if t.issued, err = m.Int64Counter("uid.ids.issued", metric.WithUnit("{id}"),
		metric.WithDescription("IDs sent to requesters, by endpoint.")); err != nil {
		otel.Handle(err)
		t.issued = metricnoop.Int64Counter{}
	}
	// Every series at 0 from the start: an alert on the rate of 503s, or a
	// dashboard, sees the series before the first one.
	ctx := context.Background()
	for _, endpoint := range []string{EndpointNext, EndpointBatch, EndpointParse} {
		for _, outcome := range []string{OutcomeOK, OutcomeBadRequest, OutcomeUnavailable, OutcomeInternal} {
			t.requests.Add(ctx, 0, t.attrs(endpoint, outcome))
		}
		if endpoint != EndpointParse {
			t.issued.Add(ctx, 0, t.attrs(endpoint, ""))
		}
	}
	return t
}

func (t *serverTelemetry) attrs(endpoint, outcome string) metric.MeasurementOption {
	key := [2]string{endpoint, outcome}
	if o, ok := t.attrSets.Load(key); ok {
		return o.(metric.MeasurementOption)
	}
	kvs := []attribute.KeyValue{uidattr.Endpoint.String(endpoint)}
	if outcome != "" {
		kvs = append(kvs, uidattr.Outcome.String(outcome))
	}
	o, _ := t.attrSets.LoadOrStore(key, metric.WithAttributeSet(attribute.NewSet(kvs...)))
	return o.(metric.MeasurementOption)
}

// serverRequest is the telemetry of one request being served.
type serverRequest struct {
	span     trace.Span
	endpoint string
	start    time.Time
}

// start starts the server span of a request to endpoint on subject, a
// child of the trace context in the request's headers when there is one.
// Pass the returned context down so that what happens while serving (a
// rejected take, say) lands on the span.
func (t *serverTelemetry) start(endpoint, subject string, headers map[string][]string) (context.Context, serverRequest) {
	r := serverRequest{endpoint: endpoint, start: time.Now()}
	ctx := context.Background()
	if len(headers) > 0 {
		ctx = otel.GetTextMapPropagator().Extract(ctx, HeaderCarrier(headers))
	}
	tmpl := t.spans.get(subject, func() *spanTemplate {
		return &spanTemplate{name: "process " + subject, kind: trace.WithSpanKind(trace.SpanKindServer), attrs: []attribute.KeyValue{
			semconv.MessagingSystemKey.String(messagingSystem),
			semconv.MessagingDestinationNameKey.String(subject),
			t.queueGroup,
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationNameKey.String("process"),
			uidattr.Endpoint.String(endpoint),
		}}
	})
	ctx, r.span = tmpl.start(ctx, t.tracer)
	return ctx, r
}

// end ends the request's span and records its metrics: ids is how many
// IDs the reply carries, code the error reply's code (0: success) and err
// the handler's error. It returns how long the request took.
func (t *serverTelemetry) end(ctx context.Context, r serverRequest, ids int, workerID uint64, code int, err error) time.Duration {
	outcome := outcomeOf(code)
	if r.span.IsRecording() {
		r.span.SetAttributes(
			uidattr.Count.Int(ids),
			uidattr.WorkerID.Int64(int64(workerID)),
			uidattr.Outcome.String(outcome),
		)
		if err != nil {
			r.span.SetAttributes(semconv.ErrorTypeKey.String(outcome))
			r.span.RecordError(err)
			r.span.SetStatus(codes.Error, err.Error())
		}
	}
	took := time.Since(r.start)
	attrs := t.attrs(r.endpoint, outcome)
	t.requests.Add(ctx, 1, attrs)
	t.duration.Record(ctx, took.Seconds(), attrs)
	if ids > 0 {
		t.issued.Add(ctx, int64(ids), t.attrs(r.endpoint, ""))
	}
	// Last, so that whoever sees the span ended sees the request counted.
	r.span.End()
	return took
}

// clientTelemetry holds a client's tracer, from ClientOptions or the
// global provider when the client is made.
type clientTelemetry struct {
	tracer trace.Tracer
	spans  *spanTemplates
}

func newClientTelemetry(tp trace.TracerProvider) clientTelemetry {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return clientTelemetry{
		tracer: tp.Tracer(instrumentationName, trace.WithInstrumentationVersion(ServiceVersion)),
		spans:  &spanTemplates{},
	}
}

// start starts the client span of a request (all its attempts) and
// injects the trace context into msg's headers.
func (t clientTelemetry) start(ctx context.Context, msg *nats.Msg) (context.Context, trace.Span) {
	tmpl := t.spans.get(msg.Subject, func() *spanTemplate {
		return &spanTemplate{name: "send " + msg.Subject, kind: trace.WithSpanKind(trace.SpanKindClient), attrs: []attribute.KeyValue{
			semconv.MessagingSystemKey.String(messagingSystem),
			semconv.MessagingDestinationNameKey.String(msg.Subject),
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationNameKey.String("send"),
		}}
	})
	ctx, span := tmpl.start(ctx, t.tracer)
	injectTraceContext(ctx, msg)
	return ctx, span
}

// end ends a client span, recording err.
func (clientTelemetry) end(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// injectTraceContext writes ctx's trace context into msg's headers,
// creating them only when there is something to carry.
func injectTraceContext(ctx context.Context, msg *nats.Msg) {
	if msg.Header != nil {
		otel.GetTextMapPropagator().Inject(ctx, HeaderCarrier(msg.Header))
		return
	}
	h := HeaderCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, h)
	if len(h) > 0 {
		msg.Header = nats.Header(h)
	}
}

// producerTelemetry makes the producer spans of JetStream block publishes.
type producerTelemetry struct {
	tracer trace.Tracer
}

func newProducerTelemetry() producerTelemetry {
	return producerTelemetry{tracer: otel.GetTracerProvider().Tracer(instrumentationName, trace.WithInstrumentationVersion(ServiceVersion))}
}

// start starts the producer span of publishing msg (a block of ids IDs)
// and injects its trace context into msg's headers, so that whoever takes
// the block can link to it. Blocks are few (thousands of IDs each): the
// span is built per call.
func (t producerTelemetry) start(ctx context.Context, msg *nats.Msg, ids int) trace.Span {
	ctx, span := t.tracer.Start(ctx, "send "+msg.Subject, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		semconv.MessagingSystemKey.String(messagingSystem),
		semconv.MessagingDestinationNameKey.String(msg.Subject),
		semconv.MessagingOperationTypeSend,
		semconv.MessagingOperationNameKey.String("publish"),
		uidattr.Count.Int(ids),
	))
	injectTraceContext(ctx, msg)
	return span
}

// end ends a producer span with how the publish ended (stored, refused
// or failed); err, when not nil, is recorded.
func (producerTelemetry) end(span trace.Span, outcome string, err error) {
	span.SetAttributes(uidattr.Outcome.String(outcome))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
