package telemetry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// otlpSpanExporter is the OTLP span exporter: the SDK's OTLP client (HTTP
// or gRPC, with every OTEL_EXPORTER_OTLP_* setting it reads: endpoint,
// headers, TLS, compression, timeout, retries) sends what it encodes.
//
// Why not the SDK's exporter as it is: with every request recorded, its
// conversion of each span to the generated protobuf structs (three
// allocations an attribute) and their marshalling cost about 4.6 µs of
// CPU a span here, most of what recording a request costs and as much as
// a tenth of a uid.next's own. This exporter writes the spans' protobuf
// wire form straight from the SDK's spans into one reused buffer (about
// a fifth of that), and hands the client ResourceSpans messages that
// carry those bytes as their unknown fields, which protobuf marshalling
// writes out as they are. What a collector receives parses to the same
// messages as the SDK exporter's (TestOTLPSpansMatchTheSDKExporter).
type otlpSpanExporter struct {
	client otlptrace.Client

	mu      sync.Mutex // ExportSpans reuses buf and memo
	buf     []byte
	memo    attrMemo
	stopped bool
}

var _ sdktrace.SpanExporter = (*otlpSpanExporter)(nil)

var errExporterStopped = errors.New("telemetry: OTLP span exporter already shut down")

// newOTLPSpanExporter starts client and exports through it.
func newOTLPSpanExporter(ctx context.Context, client otlptrace.Client) (*otlpSpanExporter, error) {
	if err := client.Start(ctx); err != nil {
		return nil, fmt.Errorf("telemetry: OTLP traces client: %w", err)
	}
	return &otlpSpanExporter{client: client}, nil
}

// ExportSpans encodes spans, grouped by resource and scope as OTLP wants
// them, and uploads them in one request.
func (e *otlpSpanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errExporterStopped
	}
	var rss []*tracepb.ResourceSpans
	e.buf = e.buf[:0]
	var bounds []int // where each ResourceSpans' bytes end in e.buf
	for _, group := range groupSpans(spans) {
		e.buf = appendResourceSpans(e.buf, group, &e.memo)
		bounds = append(bounds, len(e.buf))
	}
	start := 0
	for _, end := range bounds {
		rs := &tracepb.ResourceSpans{}
		rs.ProtoReflect().SetUnknown(protoreflect.RawFields(e.buf[start:end:end]))
		rss = append(rss, rs)
		start = end
	}
	if err := e.client.UploadTraces(ctx, rss); err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

// Shutdown stops the client; later exports fail.
func (e *otlpSpanExporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return nil
	}
	e.stopped = true
	e.mu.Unlock()
	return e.client.Stop(ctx)
}

// resourceGroup is the spans of one resource, by scope in the order
// first met.
type resourceGroup struct {
	resource *resource.Resource
	scopes   []scopeGroup
}

type scopeGroup struct {
	scope instrumentation.Scope
	spans []sdktrace.ReadOnlySpan
}

// groupSpans sorts spans by resource and scope, keeping their order
// within each. A process has one resource and a few scopes, so linear
// searches beat maps.
func groupSpans(spans []sdktrace.ReadOnlySpan) []resourceGroup {
	var groups []resourceGroup
	for _, s := range spans {
		if s == nil {
			continue
		}
		res, scope := s.Resource(), s.InstrumentationScope()
		gi := -1
		for i := range groups {
			if groups[i].resource == res || groups[i].resource.Equal(res) {
				gi = i
				break
			}
		}
		if gi < 0 {
			groups = append(groups, resourceGroup{resource: res})
			gi = len(groups) - 1
		}
		g := &groups[gi]
		si := -1
		for i := range g.scopes {
			if g.scopes[i].scope == scope {
				si = i
				break
			}
		}
		if si < 0 {
			g.scopes = append(g.scopes, scopeGroup{scope: scope, spans: make([]sdktrace.ReadOnlySpan, 0, len(spans))})
			si = len(g.scopes) - 1
		}
		g.scopes[si].spans = append(g.scopes[si].spans, s)
	}
	return groups
}

// The field numbers of the OTLP messages written here
// (opentelemetry/proto/trace/v1/trace.proto, common/v1/common.proto,
// resource/v1/resource.proto).
const (
	resourceSpansResource  = 1
	resourceSpansScopes    = 2
	resourceSpansSchemaURL = 3

	resourceAttributes = 1

	scopeSpansScope     = 1
	scopeSpansSpans     = 2
	scopeSpansSchemaURL = 3

	scopeName       = 1
	scopeVersion    = 2
	scopeAttributes = 3

	spanTraceID           = 1
	spanSpanID            = 2
	spanTraceState        = 3
	spanParentSpanID      = 4
	spanName              = 5
	spanKind              = 6
	spanStart             = 7
	spanEnd               = 8
	spanAttributes        = 9
	spanDroppedAttributes = 10
	spanEvents            = 11
	spanDroppedEvents     = 12
	spanLinks             = 13
	spanDroppedLinks      = 14
	spanStatus            = 15
	spanFlags             = 16

	eventTime              = 1
	eventName              = 2
	eventAttributes        = 3
	eventDroppedAttributes = 4

	linkTraceID           = 1
	linkSpanID            = 2
	linkAttributes        = 4
	linkDroppedAttributes = 5
	linkFlags             = 6

	statusMessage = 2
	statusCode    = 3

	keyValueKey   = 1
	keyValueValue = 2

	anyString = 1
	anyBool   = 2
	anyInt    = 3
	anyDouble = 4
	anyArray  = 5
	anyKVList = 6
	anyBytes  = 7

	arrayValues  = 1
	kvListValues = 1

	// The flags' bits beside the W3C trace flags: whether the parent is
	// remote is known, and whether it is.
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200

	statusCodeOK    = 1
	statusCodeError = 2
)

// appendMessage appends field num holding the message encode appends.
// The length goes first on the wire and is known only after: one byte is
// kept for it (most messages here are shorter than 128 bytes) and the
// body moved along when it needs more.
func appendMessage(b []byte, num protowire.Number, encode func([]byte) []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	at := len(b)
	b = append(b, 0)
	b = encode(b)
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	k := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, k-1)...)
	copy(b[at+k:], b[at+1:at+1+n])
	protowire.AppendVarint(b[at:at], uint64(n))
	return b
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

// unixNano is t's nanoseconds since the epoch, 0 before it (as the SDK's
// exporter writes it).
func unixNano(ns int64) uint64 { return uint64(max(0, ns)) }

func clampCount(n int) uint64 { return uint64(min(max(n, 0), math.MaxUint32)) }

func appendResourceSpans(b []byte, g resourceGroup, memo *attrMemo) []byte {
	if g.resource != nil {
		b = appendMessage(b, resourceSpansResource, func(b []byte) []byte {
			return appendAttributes(b, resourceAttributes, g.resource.Attributes())
		})
	}
	for _, sg := range g.scopes {
		b = appendMessage(b, resourceSpansScopes, func(b []byte) []byte { return appendScopeSpans(b, sg, memo) })
	}
	if g.resource != nil {
		b = appendString(b, resourceSpansSchemaURL, g.resource.SchemaURL())
	}
	return b
}

func appendScopeSpans(b []byte, sg scopeGroup, memo *attrMemo) []byte {
	if sg.scope != (instrumentation.Scope{}) {
		b = appendMessage(b, scopeSpansScope, func(b []byte) []byte {
			b = appendString(b, scopeName, sg.scope.Name)
			b = appendString(b, scopeVersion, sg.scope.Version)
			return appendAttributes(b, scopeAttributes, sg.scope.Attributes.ToSlice())
		})
	}
	for _, s := range sg.spans {
		b = appendMessage(b, scopeSpansSpans, func(b []byte) []byte { return appendSpan(b, s, memo) })
	}
	return appendString(b, scopeSpansSchemaURL, sg.scope.SchemaURL)
}

func appendSpan(b []byte, s sdktrace.ReadOnlySpan, memo *attrMemo) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = protowire.AppendTag(b, spanTraceID, protowire.BytesType)
	b = protowire.AppendBytes(b, tid[:])
	b = protowire.AppendTag(b, spanSpanID, protowire.BytesType)
	b = protowire.AppendBytes(b, sid[:])
	b = appendString(b, spanTraceState, sc.TraceState().String())
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		b = protowire.AppendTag(b, spanParentSpanID, protowire.BytesType)
		b = protowire.AppendBytes(b, psid[:])
	}
	b = appendString(b, spanName, s.Name())
	b = appendUint(b, spanKind, uint64(spanKindOf(s.SpanKind())))
	b = appendFixed64(b, spanStart, unixNano(s.StartTime().UnixNano()))
	b = appendFixed64(b, spanEnd, unixNano(s.EndTime().UnixNano()))
	b = memo.appendSpanAttributes(b, s.Attributes())
	b = appendUint(b, spanDroppedAttributes, clampCount(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		b = appendMessage(b, spanEvents, func(b []byte) []byte {
			b = appendFixed64(b, eventTime, unixNano(ev.Time.UnixNano()))
			b = appendString(b, eventName, ev.Name)
			b = appendAttributes(b, eventAttributes, ev.Attributes)
			return appendUint(b, eventDroppedAttributes, clampCount(ev.DroppedAttributeCount))
		})
	}
	b = appendUint(b, spanDroppedEvents, clampCount(s.DroppedEvents()))
	for _, l := range s.Links() {
		b = appendMessage(b, spanLinks, func(b []byte) []byte {
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = protowire.AppendTag(b, linkTraceID, protowire.BytesType)
			b = protowire.AppendBytes(b, ltid[:])
			b = protowire.AppendTag(b, linkSpanID, protowire.BytesType)
			b = protowire.AppendBytes(b, lsid[:])
			b = appendAttributes(b, linkAttributes, l.Attributes)
			b = appendUint(b, linkDroppedAttributes, clampCount(l.DroppedAttributeCount))
			b = protowire.AppendTag(b, linkFlags, protowire.Fixed32Type)
			return protowire.AppendFixed32(b, spanFlagsOf(l.SpanContext.TraceFlags(), l.SpanContext))
		})
	}
	b = appendUint(b, spanDroppedLinks, clampCount(s.DroppedLinks()))
	// The status is always there, as the SDK's exporter writes it.
	status := s.Status()
	b = appendMessage(b, spanStatus, func(b []byte) []byte {
		b = appendString(b, statusMessage, status.Description)
		switch status.Code {
		case codes.Ok:
			b = appendUint(b, statusCode, statusCodeOK)
		case codes.Error:
			b = appendUint(b, statusCode, statusCodeError)
		}
		return b
	})
	b = protowire.AppendTag(b, spanFlags, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, spanFlagsOf(sc.TraceFlags(), parent))
}

// spanKindOf is the OTLP SpanKind of k: the same numbers, with the
// unknown ones as internal (as the SDK's exporter has them).
func spanKindOf(k trace.SpanKind) int {
	switch k {
	case trace.SpanKindInternal, trace.SpanKindServer, trace.SpanKindClient, trace.SpanKindProducer, trace.SpanKindConsumer:
		return int(k)
	}
	return int(trace.SpanKindInternal)
}

// spanFlagsOf is the flags field: the W3C trace flags and whether the
// parent (or a link's context) is remote.
func spanFlagsOf(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	flags := uint32(tf) | flagHasIsRemote
	if parent.IsRemote() {
		flags |= flagIsRemote
	}
	return flags
}

// attrMemo is the encoding of the last span attributes written, reused
// for the next span when its attributes are the same: the server spans of
// one endpoint all carry the same ones (the subject, the queue group, the
// worker ID), and writing them was a third of a span's encoding.
type attrMemo struct {
	attrs []attribute.KeyValue
	enc   []byte
}

// appendSpanAttributes appends a span's attributes field.
func (m *attrMemo) appendSpanAttributes(b []byte, attrs []attribute.KeyValue) []byte {
	if m.matches(attrs) {
		return append(b, m.enc...)
	}
	at := len(b)
	b = appendAttributes(b, spanAttributes, attrs)
	if scalarsOnly(attrs) {
		m.attrs = append(m.attrs[:0], attrs...)
		m.enc = append(m.enc[:0], b[at:]...)
	} else {
		m.attrs = m.attrs[:0]
		m.enc = m.enc[:0]
	}
	return b
}

// matches reports whether attrs are the memo's, key by key and value by
// value (never for none: the memo is empty then).
func (m *attrMemo) matches(attrs []attribute.KeyValue) bool {
	if len(attrs) == 0 || len(attrs) != len(m.attrs) {
		return false
	}
	for i, kv := range attrs {
		// The memo holds scalars only, whose Values compare with ==.
		if kv.Key != m.attrs[i].Key || kv.Value.Type() != m.attrs[i].Value.Type() || kv.Value != m.attrs[i].Value {
			return false
		}
	}
	return true
}

// scalarsOnly reports whether every value is a string, an integer, a bool
// or a float, which == compares by value (a slice Value holds an array in
// an interface).
func scalarsOnly(attrs []attribute.KeyValue) bool {
	for _, kv := range attrs {
		switch kv.Value.Type() {
		case attribute.STRING, attribute.INT64, attribute.BOOL, attribute.FLOAT64:
		default:
			return false
		}
	}
	return true
}

func appendAttributes(b []byte, num protowire.Number, attrs []attribute.KeyValue) []byte {
	for _, kv := range attrs {
		b = appendMessage(b, num, func(b []byte) []byte { return appendKeyValue(b, kv) })
	}
	return b
}

func appendKeyValue(b []byte, kv attribute.KeyValue) []byte {
	b = appendString(b, keyValueKey, string(kv.Key))
	return appendMessage(b, keyValueValue, func(b []byte) []byte { return appendAnyValue(b, kv.Value) })
}

// appendAnyValue writes an AnyValue's body. A zero or empty value is
// still written (a bool false, an int 0, ""), as the oneof is set.
func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.STRING:
		b = protowire.AppendTag(b, anyString, protowire.BytesType)
		return protowire.AppendString(b, v.AsString())
	case attribute.BOOL:
		b = protowire.AppendTag(b, anyBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, anyInt, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, anyDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, anyBytes, protowire.BytesType)
		return protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return appendArray(b, v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		return appendMessage(b, anyKVList, func(b []byte) []byte {
			return appendAttributes(b, kvListValues, v.AsMap())
		})
	case attribute.EMPTY:
		return b
	}
	b = protowire.AppendTag(b, anyString, protowire.BytesType)
	return protowire.AppendString(b, "INVALID")
}

// appendArray writes an ArrayValue of elems, each made a Value by value.
func appendArray[E any](b []byte, elems []E, value func(E) attribute.Value) []byte {
	return appendMessage(b, anyArray, func(b []byte) []byte {
		for _, e := range elems {
			b = appendMessage(b, arrayValues, func(b []byte) []byte { return appendAnyValue(b, value(e)) })
		}
		return b
	})
}
