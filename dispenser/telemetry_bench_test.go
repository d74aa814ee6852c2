package dispenser

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/telemetry/telemetrytest"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// BenchmarkNextTracing is the throughput of uid.next through NATS (a
// dispenser and Go clients in this process, an embedded nats-server) with
// tracing
//   - off: no exporter configured, so no-op tracers;
//   - server-*: the dispenser's SDK exporting OTLP/HTTP (batch processor)
//     to a local collector that discards what it gets; the callers do not
//     trace, so every request is a root: the default sampler records 1%
//     of them (server-1pct), OTEL_TRACES_SAMPLER=parentbased_always_on all
//     (server-all);
//   - both-*: the callers trace too (a client span per request, its
//     context sent along; in this process they share the dispenser's
//     provider): the default sampler makes 1% of the callers' traces
//     recorded (both-1pct), parentbased_always_on all (both-all).
//
// The Prometheus metrics are on in all. ns/op is the time per ID at the
// given number of concurrent callers, cpu-ns/op the CPU time the whole
// process spent per ID; compare with benchstat:
//
//	go test -run '^$' -bench NextTracing -count 8 ./dispenser/ | tee tracing.txt
//	benchstat -col /tracing tracing.txt
func BenchmarkNextTracing(b *testing.B) {
	url := testenv.NATS(b, nil).ClientURL()
	var exports atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		exports.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()

	for _, clients := range []int{1, 8} {
		for _, tracing := range []string{"off", "server-1pct", "server-all", "both-1pct", "both-all"} {
			b.Run("clients="+strconv.Itoa(clients)+"/tracing="+tracing, func(b *testing.B) {
				telemetrytest.ClearEnv(b)
				if tracing != "off" {
					b.Setenv("OTEL_TRACES_EXPORTER", "otlp")
					b.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", collector.URL+"/v1/traces")
				}
				if strings.HasSuffix(tracing, "-all") {
					b.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
				}
				before := exports.Load()
				cfg := testConfig(url, "")
				cfg.MetricsAddr = "127.0.0.1:0"
				// A fresh worker ID per start: a recycled one would start
				// after its previous holder's reservation, and quick
				// restarts would soon hit the ahead-of-clock bound.
				cfg.WorkerMode = workerid.ModeDisposable
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				d, err := Start(ctx, cfg, WithLogger(testLogger()))
				if err != nil {
					b.Fatal(err)
				}
				conn, err := natsconn.Connect(ctx, natsconn.Config{URL: url, Logger: testLogger()})
				if err != nil {
					b.Fatal(err)
				}
				var opts uidclient.Config
				if strings.HasPrefix(tracing, "server") {
					opts.TracerProvider = tracenoop.NewTracerProvider()
				}
				c := uidclient.New(conn.Conn, opts)
				b.SetParallelism((clients + 1) / 2) // 2 cores: clients callers in all
				cpuBefore := processCPU(b)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := c.Next(context.Background()); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				// CPU time of the whole process (clients, nats-server,
				// dispenser, exporter) per ID: what tracing costs, less
				// disturbed than ns/op by other load on the machine.
				b.ReportMetric(float64(processCPU(b)-cpuBefore)/float64(b.N), "cpu-ns/op")
				conn.Close()
				sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer scancel()
				if err := d.Shutdown(sctx); err != nil { // flushes the spans
					b.Fatal(err)
				}
				if got := exports.Load() - before; (tracing == "off") == (got > 0) && b.N >= 1000 {
					b.Fatalf("tracing %s: the collector got %d exports", tracing, got)
				}
			})
		}
	}
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
