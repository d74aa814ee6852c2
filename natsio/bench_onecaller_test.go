package natsio

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// BenchmarkOneCaller splits what one caller, one request at a time,
// waits for beyond a bare echo: the Service's request path, or the
// ring's take and the padding it sets off. Three responders on one
// embedded nats-server, each on its own connection, answer plain
// requests of 16 bytes:
//
//   - target=echo: a bare micro echo service (testenv.MicroEcho);
//   - target=counter: a Service whose IDs come from an atomic counter:
//     its whole request path (span, metrics, counters, reply buffer,
//     reply) with no take;
//   - target=ring: a Service over a default-bounded ring, as a
//     dispenser serves uid.next.
//
// Both Services have a dispenser's providers when nothing exports its
// spans: OpenTelemetry's no-op tracer, and the SDK's meter (here with a
// manual reader; a dispenser's is read by /metrics).
//
// One op is one request; req/s, p50 and p99, and cpu-ns/op (the whole
// process's CPU, server included) are the figures. UID_BENCH_ROUND
// alternates the order between runs (testenv.RoundOrder).
func BenchmarkOneCaller(b *testing.B) {
	url := startNATS(b, nil)
	testenv.MicroEcho(b, connect(b, url).Conn, "bench.echo")
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = meters.Shutdown(context.Background()) })
	providers := ServiceConfig{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: meters}
	ring := providers
	startInstance(b, url, 1, instanceOpts{service: ring})
	counter := providers
	counter.SubjectPrefix, counter.QueueGroup = "counter", "counter"
	startInstance(b, url, 2, instanceOpts{
		service: counter,
		source:  func(g *uidcore.CachedGenerator) IDSource { return &counterSource{CachedGenerator: g} },
	})
	subjects := map[string]string{"echo": "bench.echo", "counter": "counter.next", "ring": "uid.next"}
	nc := connect(b, url).Conn
	payload := []byte("0123456789abcdef")
	for _, target := range testenv.RoundOrder([]string{"echo", "counter", "ring"}) {
		b.Run("target="+target, func(b *testing.B) {
			subject := subjects[target]
			if _, err := nc.Request(subject, payload, time.Second); err != nil { // warm-up
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu := testenv.ProcessCPU(b)
			var lat latencies
			start := time.Now()
			for b.Loop() {
				t0 := time.Now()
				if _, err := nc.Request(subject, payload, time.Second); err != nil {
					b.Fatal(err)
				}
				lat.add(time.Since(t0))
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
			b.ReportMetric(float64(testenv.ProcessCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
			lat.report(b)
		})
	}
}

// counterSource is an IDSource handing out an atomic counter's numbers,
// the generator it wraps answering for its layout, worker ID and state:
// a Service over it does all a request needs but the ring's take.
type counterSource struct {
	*uidcore.CachedGenerator
	n atomic.Uint64
}

func (s *counterSource) Next(context.Context) (uint64, error) { return s.n.Add(1), nil }

func (s *counterSource) NextN(_ context.Context, dst []uint64) (int, error) {
	return s.TryNextN(dst)
}

func (s *counterSource) TryNextN(dst []uint64) (int, error) {
	last := s.n.Add(uint64(len(dst)))
	for i := range dst {
		dst[i] = last - uint64(len(dst)-1-i)
	}
	return len(dst), nil
}
