package telemetrytest

import (
	"context"
	"errors"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Providers are SDK providers that keep spans and metrics in memory.
type Providers struct {
	Spans  *tracetest.SpanRecorder
	Tracer *sdktrace.TracerProvider
	Reader *sdkmetric.ManualReader
	Meter  *sdkmetric.MeterProvider
}

// NewProviders makes in-memory providers, shut down when the test ends.
func NewProviders(t testing.TB) *Providers {
	t.Helper()
	p := &Providers{Spans: tracetest.NewSpanRecorder(), Reader: sdkmetric.NewManualReader()}
	p.Tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p.Spans))
	p.Meter = sdkmetric.NewMeterProvider(sdkmetric.WithReader(p.Reader))
	t.Cleanup(func() {
		ctx := context.Background()
		if err := errors.Join(p.Tracer.Shutdown(ctx), p.Meter.Shutdown(ctx)); err != nil {
			t.Errorf("shutdown providers: %v", err)
		}
	})
	return p
}

// Ended returns the ended spans named name.
func (p *Providers) Ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range p.Spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// Collect returns the metrics as the reader sees them now.
func (p *Providers) Collect(t testing.TB) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := p.Reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect metrics: %v", err)
	}
	return rm
}
