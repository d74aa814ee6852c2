package protocol

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The carrier is what the propagators of both sides read and write.
var _ propagation.TextMapCarrier = HeaderCarrier(nil)

func TestHeaderCarrierIsCaseInsensitive(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	prop := propagation.TraceContext{}
	for _, key := range []string{"traceparent", "Traceparent", "TRACEPARENT"} {
		h := nats.Header{key: {tp}}
		sc := trace.SpanContextFromContext(prop.Extract(context.Background(), HeaderCarrier(h)))
		if !sc.IsValid() || sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || sc.SpanID().String() != "b7ad6b7169203331" || !sc.IsRemote() {
			t.Errorf("header %q: extracted %v, want the trace context it carries", key, sc)
		}
	}
	// Set replaces any other spelling, so a forwarded message never
	// carries two trace parents.
	h := HeaderCarrier{"Traceparent": {"old"}, "TRACEPARENT": {"older"}, "Uid-Encoding": {"binary"}}
	h.Set("traceparent", tp)
	if len(h) != 2 || h.Get("traceparent") != tp || h.Get("uid-encoding") != "binary" || len(h.Keys()) != 2 {
		t.Errorf("after Set: %v", h)
	}
	if HeaderCarrier(nil).Get("traceparent") != "" {
		t.Error("nil carrier returned a value")
	}
}
