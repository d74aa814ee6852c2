package telemetry

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// DefaultRootRequestRatio is the fraction of requests without trace
// context that the default sampling records as new traces.
const DefaultRootRequestRatio = 0.01

// The default sampling, when OTEL_TRACES_SAMPLER is unset, instead of
// OpenTelemetry's parentbased_always_on:
//
//   - a span with a parent follows the parent's decision, so a caller that
//     traces its requests gets the dispenser's server spans in its traces;
//   - every padding round is recorded (a few a second at most);
//   - other roots, chiefly requests from callers that do not trace, are
//     recorded at DefaultRootRequestRatio.
//
// Recording every request adds about half of what serving one costs the
// dispenser's CPU (4-6 µs to 11 µs as deployed, see BENCHMARKS.md);
// OTEL_TRACES_SAMPLER=parentbased_always_on does that when wanted.
//
// The roots not recorded are decided before the SDK sees them
// (rootGate): the SDK would make each one a span that records nothing,
// with new trace and span IDs, a sampler's decision and a context
// holding it, 0.7 µs of CPU on the request path as deployed, for 99 of
// every 100 requests. The SDK's own sampler, parent-based, then records
// every root the gate lets through.
func defaultSampling(tp *sdktrace.TracerProvider) trace.TracerProvider {
	return rootGate{tp: tp, bound: ratioBound(DefaultRootRequestRatio)}
}

// defaultSDKSampler is the SDK's sampler under rootGate.
func defaultSDKSampler() sdktrace.Sampler { return sdktrace.ParentBased(sdktrace.AlwaysSample()) }

// ratioBound is the bound under which a uniform uint64 falls with
// probability ratio.
func ratioBound(ratio float64) uint64 {
	switch {
	case ratio >= 1:
		return math.MaxUint64
	case ratio <= 0:
		return 0
	}
	return uint64(ratio * (1 << 64))
}

// rootGate is the tracer provider of the default sampling: its tracers
// start no span for the roots (spans without a valid parent in their
// context) that are not recorded, but padding rounds, and hand the rest
// to the SDK.
type rootGate struct {
	embedded.TracerProvider
	tp    *sdktrace.TracerProvider
	bound uint64 // a root is recorded when a uniform uint64 falls under it
}

func (g rootGate) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return gatedTracer{tracer: g.tp.Tracer(name, opts...), bound: g.bound}
}

type gatedTracer struct {
	embedded.Tracer
	tracer trace.Tracer
	bound  uint64
}

// Start starts a span with the SDK, or for a root not recorded returns
// ctx as it is and the no-op span it holds: what the caller then does
// with the span (attributes, events, End) does nothing, as with a span
// the SDK does not record.
func (t gatedTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if name != PaddingSpanName && t.bound != math.MaxUint64 && rand.Uint64() >= t.bound &&
		!trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.tracer.Start(ctx, name, opts...)
}

// checkSamplerEnv refuses the OTEL_TRACES_SAMPLER values the SDK would
// silently replace by its default, so that a typo stops start-up with the
// variable named instead of changing what is traced.
func checkSamplerEnv() error {
	name := os.Getenv("OTEL_TRACES_SAMPLER")
	switch name {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return nil
	case "traceidratio", "parentbased_traceidratio":
		arg := os.Getenv("OTEL_TRACES_SAMPLER_ARG")
		if arg == "" {
			return nil // the SDK's ratio default, 1.0
		}
		if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
			return fmt.Errorf("telemetry: OTEL_TRACES_SAMPLER_ARG: %q is not a ratio from 0 to 1", arg)
		}
		return nil
	}
	return fmt.Errorf("telemetry: OTEL_TRACES_SAMPLER: %q is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio", name)
}
