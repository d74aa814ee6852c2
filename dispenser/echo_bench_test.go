package dispenser

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// echoPayload is the request body of the echo comparison: natscli's
// `nats bench service request --size 16B`.
var echoPayload = []byte("0123456789abcdef")

// BenchmarkNextVsEcho is what one caller (and eight) gets from uid.next
// beside a bare micro echo service on the same embedded nats-server, the
// load of `nats bench service request --clients N` against `nats bench
// service serve`: every client its own connection, one request at a
// time, 16-byte requests. The dispenser is a default one (the 2 s ahead
// bound, lanes, worker IDs leased in the KV bucket), the echo a micro
// endpoint answering "ok", as natscli's serve does.
//
//   - target=echo: the micro echo service;
//   - target=uid.next: uid.next by a plain request, as natscli sends it;
//   - target=uidclient: uid.next through uidclient.Client.Next, what a Go
//     program gets.
//
// One op is one request; req/s and the requests' p50 and p99 are the
// figures. The sub-benchmarks share the server and the dispenser;
// scripts/bench-report.sh runs the whole benchmark once per round, so
// that the three targets alternate.
func BenchmarkNextVsEcho(b *testing.B) {
	url := testenv.NATS(b, nil).ClientURL()
	d, err := Start(b.Context(), DefaultConfig().withNATS(url), WithLogger(testLogger()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { shutdownBench(b, d) })
	testenv.MicroEcho(b, testConn(b, url).Conn, "bench.echo")
	for _, clients := range []int{1, 8} {
		conns := make([]*nats.Conn, clients)
		callers := make([]*uidclient.Client, clients)
		for i := range conns {
			conns[i] = testConn(b, url).Conn
			callers[i] = uidclient.New(conns[i], uidclient.Config{})
		}
		for _, target := range testenv.RoundOrder([]string{"echo", "uid.next", "uidclient"}) {
			b.Run("clients="+strconv.Itoa(clients)+"/target="+target, func(b *testing.B) {
				call := func(i int) error {
					switch target {
					case "echo":
						_, err := conns[i].Request("bench.echo", echoPayload, 5*time.Second)
						return err
					case "uid.next":
						_, err := conns[i].Request("uid.next", echoPayload, 5*time.Second)
						return err
					}
					_, err := callers[i].Next(context.Background())
					return err
				}
				runClients(b, clients, call)
			})
		}
	}
}

// withNATS is the configuration with the server at url.
func (c Config) withNATS(url string) Config {
	c.NATSURL = url
	return c
}

// runClients shares b.N requests among clients goroutines, each calling
// call with its index one request at a time, and reports req/s and the
// requests' p50 and p99.
func runClients(b *testing.B, clients int, call func(client int) error) {
	var (
		left atomic.Int64
		mu   sync.Mutex
		lat  []time.Duration
		wg   sync.WaitGroup
	)
	for i := range clients { // warm-up, not timed
		if err := call(i); err != nil {
			b.Fatal(err)
		}
	}
	left.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			mine := make([]time.Duration, 0, b.N/clients+1)
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				if err := call(i); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	reportLatencies(b, lat)
}

// reportLatencies adds the p50 and p99 of lat, in microseconds.
func reportLatencies(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / float64(time.Microsecond) }
	b.ReportMetric(at(0.50), "p50-us")
	b.ReportMetric(at(0.99), "p99-us")
}
