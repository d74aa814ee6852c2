package natsio

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/telemetry/uidattr"
)

// This file is the OpenTelemetry side of the service: a server span and
// request metrics per request, a producer span per block published (the
// trace context in NATS headers is the client's HeaderCarrier). It uses
// the tracer and meter providers of ServiceConfig and BlocksConfig (the
// dispenser passes the ones telemetry.Setup built), falling back to the
// global ones only where they are nil, and the global propagator; with
// no-op providers everything here is a no-op that still passes a caller's
// trace context on.

// instrumentationName names natsio's tracer and meter.
const instrumentationName = "github.com/uid-dispenser/uid-dispenser/natsio"

// messagingSystem is the messaging.system attribute's value.
const messagingSystem = "nats"

// Outcomes of a request, the uid.outcome attribute.
const (
	outcomeOK          = "ok"
	outcomeBadRequest  = "bad_request"
	outcomeNotFound    = "not_found"
	outcomeUnavailable = "unavailable"
	outcomeInternal    = "internal"
)

// serverTelemetry holds a service's tracer and request instruments, taken
// from ServiceConfig's providers (or the global ones) when the service is
// made.
type serverTelemetry struct {
	tracer trace.Tracer
	// noSpans: the tracer is OpenTelemetry's no-op one (what a dispenser
	// is given when nothing exports its spans). A request then starts no
	// span: the context carrying a no-op span is an allocation a request
	// for nothing (three through the global provider's delegate).
	noSpans    bool
	queueGroup attribute.KeyValue

	requests metric.Int64Counter
	duration metric.Float64Histogram
	issued   metric.Int64Counter
	// Throttling: episodes of demand above capacity, and the bulk
	// requests that waited for capacity in them.
	episodes metric.Int64Counter
	waits    metric.Int64Counter
}

// endpointTelemetry is what the telemetry of one endpoint's requests
// needs, built once when its handler is made, so that the request path
// builds, sorts and looks up nothing: the span's name, kind and
// attributes, and the metric attribute sets by outcome.
type endpointTelemetry struct {
	t        *serverTelemetry
	endpoint string
	span     *spanTemplate
	batch    bool // its replies may carry more than one ID: spans get uid.count
	// The attribute sets as the option slices the instruments take, made
	// once: a slice passed as variadic options is otherwise made on
	// every call, three a request.
	counted  [len(outcomes)][]metric.AddOption    // requests, by outcomeIndex
	recorded [len(outcomes)][]metric.RecordOption // durations, by outcomeIndex
	issued   []metric.AddOption
}

// outcomes are the values of uid.outcome, by outcomeIndex.
var outcomes = [...]string{outcomeOK, outcomeBadRequest, outcomeNotFound, outcomeUnavailable, outcomeInternal}

// spanTemplate is the name, kind and attributes of the spans on one
// subject, built once. The attributes are set only on recording spans:
// with sampling, most spans are not recorded, and for them the start must
// cost as little as it can.
type spanTemplate struct {
	name  string
	kind  []trace.SpanStartOption // made once, as the variadic options would be on every start
	attrs []attribute.KeyValue
	// withWorker is attrs and uid.worker_id, made again only when the
	// worker ID changes: a recorded span gets all of them in one
	// SetAttributes, which the SDK copies. Each call costs a lock, a
	// check of the limits and a copy of what the span has (a second call
	// for the worker ID was 0.4 µs a span as deployed, as much as the
	// first with four attributes).
	withWorker atomic.Pointer[workerAttrs]
}

// workerAttrs is a template's attributes for one worker ID.
type workerAttrs struct {
	workerID uint64
	attrs    []attribute.KeyValue
}

// start starts a span from the template; workerID is called only for a
// recorded span.
func (tmpl *spanTemplate) start(ctx context.Context, tracer trace.Tracer, workerID func() uint64) (context.Context, trace.Span) {
	ctx, span := tracer.Start(ctx, tmpl.name, tmpl.kind...)
	if span.IsRecording() {
		span.SetAttributes(tmpl.attrsFor(workerID())...)
	}
	return ctx, span
}

// attrsFor is the template's attributes with uid.worker_id = id.
func (tmpl *spanTemplate) attrsFor(id uint64) []attribute.KeyValue {
	if w := tmpl.withWorker.Load(); w != nil && w.workerID == id {
		return w.attrs
	}
	w := &workerAttrs{workerID: id, attrs: append(slices.Clip(tmpl.attrs), uidattr.WorkerID.Int64(int64(id)))}
	tmpl.withWorker.Store(w)
	return w.attrs
}

// newServerTelemetry takes the tracer and meter from tp and mp, the global
// providers where nil (as uidclient.Config.TracerProvider does).
func newServerTelemetry(queueGroup string, tp trace.TracerProvider, mp metric.MeterProvider) *serverTelemetry {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	_, noSpans := tp.(tracenoop.TracerProvider)
	t := &serverTelemetry{
		tracer:     tp.Tracer(instrumentationName, trace.WithInstrumentationVersion(protocol.ServiceVersion)),
		noSpans:    noSpans,
		queueGroup: semconv.MessagingConsumerGroupNameKey.String(queueGroup),
	}
	m := mp.Meter(instrumentationName, metric.WithInstrumentationVersion(protocol.ServiceVersion))
	var err error
	t.requests = counter(m, "uid.requests", "{request}", "Requests served, by endpoint and outcome.")
	if t.duration, err = m.Float64Histogram("uid.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from receiving a request to handing its reply to the connection, by endpoint and outcome."),
		metric.WithExplicitBucketBoundaries(0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)); err != nil {
		otel.Handle(err)
		t.duration = metricnoop.Float64Histogram{}
	}
	t.issued = counter(m, "uid.ids.issued", "{id}", "IDs sent to requesters, by endpoint.")
	t.episodes = counter(m, "uid.throttle.episodes", "{episode}", "Episodes of demand above what the instance sustains (bulk requests had to wait for IDs).")
	t.waits = counter(m, "uid.throttle.waits", "{request}", "Bulk requests that waited for IDs in a throttling episode (the source at its capacity).")
	// Exported from the start, so that alerts see them before the first episode.
	t.episodes.Add(context.Background(), 0)
	t.waits.Add(context.Background(), 0)
	// The uid.next, uid.batch and uid.parse series at 0 from the start:
	// an alert on the rate of 503s, or a dashboard, sees them before the
	// first one. The not_found outcome and the sequence endpoints' series
	// (one per sequence name) start with their first request.
	ctx := context.Background()
	for _, endpoint := range []string{protocol.EndpointNext, protocol.EndpointBatch, protocol.EndpointParse} {
		for _, outcome := range []string{outcomeOK, outcomeBadRequest, outcomeUnavailable, outcomeInternal} {
			t.requests.Add(ctx, 0, metricAttrs(endpoint, outcome))
		}
		if endpoint != protocol.EndpointParse {
			t.issued.Add(ctx, 0, metricAttrs(endpoint, ""))
		}
	}
	return t
}

// counter makes an Int64Counter, or a no-op one when the meter refuses.
func counter(m metric.Meter, name, unit, description string) metric.Int64Counter {
	c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(description))
	if err != nil {
		otel.Handle(err)
		return metricnoop.Int64Counter{}
	}
	return c
}

func (t *serverTelemetry) throttleEpisode() { t.episodes.Add(context.Background(), 1) }
func (t *serverTelemetry) throttleWait()    { t.waits.Add(context.Background(), 1) }

// metricAttrs is the attribute set of a request metric ("" outcome: the
// endpoint's alone).
func metricAttrs(endpoint, outcome string) metric.MeasurementOption {
	kvs := []attribute.KeyValue{uidattr.Endpoint.String(endpoint)}
	if outcome != "" {
		kvs = append(kvs, uidattr.Outcome.String(outcome))
	}
	return metric.WithAttributeSet(attribute.NewSet(kvs...))
}

// endpoint builds the telemetry of endpoint's requests on subject (a
// wildcard endpoint's subject template, so that made-up sequence names
// make no spans of their own).
func (t *serverTelemetry) endpoint(endpoint, subject string) *endpointTelemetry {
	e := &endpointTelemetry{t: t, endpoint: endpoint, issued: []metric.AddOption{metricAttrs(endpoint, "")},
		batch: endpoint == protocol.EndpointBatch || endpoint == protocol.EndpointSeqBatch}
	for i, o := range outcomes {
		attrs := metricAttrs(endpoint, o)
		e.counted[i], e.recorded[i] = []metric.AddOption{attrs}, []metric.RecordOption{attrs}
	}
	// Each attribute of a recorded span costs about 0.5 µs of CPU (set,
	// snapshot, OTLP transform and encoding), against 8.7 µs for a span
	// of nine exported: a tenth of a uid.next's whole cost with every
	// request recorded. So the spans carry what semconv requires of a
	// messaging process span and what only they can tell, nothing that
	// another attribute or the span's status already says:
	// messaging.operation.type would repeat messaging.operation.name
	// ("process"), uid.endpoint the subject, uid.count on uid.next is
	// always 1, and uid.outcome "ok" is the status left unset.
	e.span = &spanTemplate{name: "process " + subject, kind: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}, attrs: []attribute.KeyValue{
		semconv.MessagingSystemKey.String(messagingSystem),
		semconv.MessagingOperationNameKey.String("process"),
		semconv.MessagingDestinationNameKey.String(subject),
		t.queueGroup,
	}}
	return e
}

// outcomeIndex is the index in outcomes of the outcome of a reply with
// the error code (0: success).
func outcomeIndex(code int) int {
	switch code {
	case 0:
		return 0
	case protocol.CodeBadRequest:
		return 1
	case protocol.CodeNotFound:
		return 2
	case protocol.CodeUnavailable:
		return 3
	}
	return 4
}

// serverRequest is the telemetry of one request being served.
type serverRequest struct {
	span  trace.Span
	start time.Time
}

// start starts the server span of a request, a child of the trace
// context in the request's headers when there is one; workerID (the
// uid.worker_id attribute) is called only for a recorded span. Pass the
// returned context down so that what happens while serving (a rejected
// take, say) lands on the span.
func (e *endpointTelemetry) start(headers map[string][]string, workerID func() uint64) (context.Context, serverRequest) {
	r := serverRequest{start: time.Now()}
	ctx := context.Background()
	if len(headers) > 0 {
		ctx = otel.GetTextMapPropagator().Extract(ctx, protocol.HeaderCarrier(headers))
	}
	if e.t.noSpans {
		// The caller's span, if any, as a no-op one: ctx still carries
		// its trace context.
		r.span = trace.SpanFromContext(ctx)
		return ctx, r
	}
	ctx, r.span = e.span.start(ctx, e.t.tracer, workerID)
	return ctx, r
}

// end ends the request's span and records its metrics: ids is how many
// IDs the reply carries, code the error reply's code (0: success) and err
// the handler's error. It returns how long the request took.
func (e *endpointTelemetry) end(ctx context.Context, r serverRequest, ids int, code int, err error) time.Duration {
	i := outcomeIndex(code)
	if r.span.IsRecording() {
		switch {
		case err != nil:
			outcome := outcomes[i]
			r.span.SetAttributes(uidattr.Count.Int(ids), uidattr.Outcome.String(outcome), semconv.ErrorTypeKey.String(outcome))
			r.span.RecordError(err)
			r.span.SetStatus(codes.Error, err.Error())
		case e.batch:
			r.span.SetAttributes(uidattr.Count.Int(ids))
		}
	}
	took := time.Since(r.start)
	t := e.t
	t.requests.Add(ctx, 1, e.counted[i]...)
	t.duration.Record(ctx, took.Seconds(), e.recorded[i]...)
	if ids > 0 {
		t.issued.Add(ctx, int64(ids), e.issued...)
	}
	// Last, so that whoever sees the span ended sees the request counted.
	r.span.End()
	return took
}

// tagSequence puts the sequence's name on the request's span: the span is
// named after the endpoint's wildcard subject (uid.seq.*.next), so that
// made-up names make no span names of their own, and the attribute says
// which sequence it served. A batch whose body does not parse is tagged
// too (the name is in the subject): which sequence a bad client asked for
// is worth seeing.
func tagSequence(ctx context.Context, name string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(uidattr.Sequence.String(name))
	}
}

// producerTelemetry makes the producer spans of JetStream block publishes.
type producerTelemetry struct {
	tracer trace.Tracer
}

// newProducerTelemetry makes the publisher's spans with tp, or the global
// provider where nil (as newServerTelemetry does).
func newProducerTelemetry(tp trace.TracerProvider) producerTelemetry {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return producerTelemetry{tracer: tp.Tracer(instrumentationName, trace.WithInstrumentationVersion(protocol.ServiceVersion))}
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
	// A block message always has headers (encodeBlock makes them).
	otel.GetTextMapPropagator().Inject(ctx, protocol.HeaderCarrier(msg.Header))
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
