package telemetry

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// losableClaim is a static claim the test can declare lost, as a lease
// that expired would be.
type losableClaim struct {
	uidcore.StaticClaim
	lost atomic.Bool
}

func (c *losableClaim) Until() (int64, error) {
	if c.lost.Load() {
		return 0, uidcore.ErrClaimLost
	}
	return c.StaticClaim.Until()
}

// tinyLayout has 64 IDs per second, so a ring of 64 slots fills in one
// second's worth of IDs.
func tinyLayout() uidcore.Layout {
	return uidcore.Layout{TimeBits: 41, WorkerBits: 16, SeqBits: 6, Epoch: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// providers are SDK providers that keep spans and metrics in memory.
type providers struct {
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newProviders(t *testing.T) *providers {
	t.Helper()
	p := &providers{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	p.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p.spans))
	p.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(p.reader))
	t.Cleanup(func() {
		ctx := context.Background()
		if err := errors.Join(p.tp.Shutdown(ctx), p.mp.Shutdown(ctx)); err != nil {
			t.Errorf("shutdown providers: %v", err)
		}
	})
	return p
}

// ended returns the ended spans named name.
func (p *providers) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range p.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// collect returns the metrics as the reader sees them now.
func (p *providers) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := p.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect metrics: %v", err)
	}
	return rm
}
