package uidclient

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
)

// This file is the OpenTelemetry side of the client: trace context carried
// in NATS headers and a client span per call. It uses the global
// propagator, and the global tracer provider unless Config names
// one; without them everything here is a no-op that still passes a
// caller's trace context on.

// instrumentationName names the client's tracer: its import path, as
// OpenTelemetry scopes are named.
const instrumentationName = "github.com/uid-dispenser/uid-dispenser/natsio/uidclient"

// sequenceKey names the sequence on a sequence request's span: the key of
// telemetry/uidattr.Sequence, which the server's span carries too (the
// client links nothing of the server side, so it spells the key itself).
const sequenceKey = attribute.Key("uid.sequence")

// messagingSystem is the messaging.system attribute's value.
const messagingSystem = "nats"

// clientTelemetry holds a client's tracer, from Config or the
// global provider when the client is made, and the name and attributes of
// the span of each of its subjects.
type clientTelemetry struct {
	tracer trace.Tracer
	kind   []trace.SpanStartOption // made once: the option and its slice are an allocation each
	spans  map[string]clientSpan   // by subject; read-only once made
}

// clientSpan is the name and attributes of the client spans on one
// subject, built once. The attributes are set only on recording spans.
type clientSpan struct {
	name  string
	attrs []attribute.KeyValue
}

func newClientTelemetry(tp trace.TracerProvider, subjects ...string) clientTelemetry {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	t := clientTelemetry{
		tracer: tp.Tracer(instrumentationName, trace.WithInstrumentationVersion(protocol.ServiceVersion)),
		kind:   []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)},
		spans:  make(map[string]clientSpan, len(subjects)),
	}
	for _, subject := range subjects {
		t.spans[subject] = clientSpan{name: "send " + subject, attrs: []attribute.KeyValue{
			semconv.MessagingSystemKey.String(messagingSystem),
			semconv.MessagingDestinationNameKey.String(subject),
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationNameKey.String("send"),
		}}
	}
	return t
}

// start starts the client span of a request (all its attempts) and
// injects the trace context into msg's headers. The span is named after
// the subject template (a sequence's wildcard subject, not its name, so
// span names stay few).
func (t clientTelemetry) start(ctx context.Context, msg *nats.Msg, template string) (context.Context, trace.Span) {
	s := t.spans[template]
	ctx, span := t.tracer.Start(ctx, s.name, t.kind...)
	if span.IsRecording() {
		span.SetAttributes(s.attrs...)
		if name, ok := wildcardToken(template, msg.Subject); ok {
			span.SetAttributes(sequenceKey.String(name))
		}
	}
	injectTraceContext(ctx, msg)
	return ctx, span
}

// wildcardToken is the token of subject in the place of template's "*"
// (a sequence's name in uid.seq.*.next); false when template has none.
func wildcardToken(template, subject string) (string, bool) {
	i := strings.IndexByte(template, '*')
	if i < 0 || len(subject) < len(template) {
		return "", false
	}
	return subject[i : len(subject)-(len(template)-i-1)], true
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
	otel.GetTextMapPropagator().Inject(ctx, (*msgCarrier)(msg))
}

// msgCarrier is a message as a propagator's carrier of its headers: it
// makes the headers on the first Set, so that a call with nothing to
// carry (no span, no baggage) allocates nothing for them, and, being a
// pointer, it is passed as a carrier without an allocation either.
type msgCarrier nats.Msg

func (m *msgCarrier) Get(key string) string { return protocol.HeaderCarrier(m.Header).Get(key) }
func (m *msgCarrier) Keys() []string        { return protocol.HeaderCarrier(m.Header).Keys() }

func (m *msgCarrier) Set(key, value string) {
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	protocol.HeaderCarrier(m.Header).Set(key, value)
}
