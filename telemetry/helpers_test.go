package telemetry

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
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

// metricValue sums the data points of the named metric whose attributes
// include all of match; found is false when the metric has no such point.
func metricValue(rm metricdata.ResourceMetrics, name string, match ...attribute.KeyValue) (sum float64, found bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			add := func(attrs attribute.Set, v float64) {
				for _, kv := range match {
					if got, ok := attrs.Value(kv.Key); !ok || got != kv.Value {
						return
					}
				}
				sum += v
				found = true
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				addPoints(d.DataPoints, add)
			case metricdata.Sum[float64]:
				addPoints(d.DataPoints, add)
			case metricdata.Gauge[int64]:
				addPoints(d.DataPoints, add)
			case metricdata.Gauge[float64]:
				addPoints(d.DataPoints, add)
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					add(dp.Attributes, float64(dp.Count))
				}
			}
		}
	}
	return sum, found
}

// addPoints passes each data point's attributes and value to add.
func addPoints[N int64 | float64](points []metricdata.DataPoint[N], add func(attribute.Set, float64)) {
	for _, dp := range points {
		add(dp.Attributes, float64(dp.Value))
	}
}

// spanAttr returns the value of key on the span, or an invalid value.
func spanAttr(attrs []attribute.KeyValue, key attribute.Key) attribute.Value {
	for _, kv := range attrs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}
