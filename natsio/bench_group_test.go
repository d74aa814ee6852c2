package natsio

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// latencies collects the durations of one goroutine's calls for the
// percentiles a benchmark reports.
type latencies []time.Duration

func (l *latencies) add(d time.Duration) { *l = append(*l, d) }

// report adds the p50 and p99 of l, in microseconds, to b's results.
func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	at := func(q float64) float64 { return float64(l[int(q*float64(len(l)-1))]) / float64(time.Microsecond) }
	b.ReportMetric(at(0.50), "p50-us")
	b.ReportMetric(at(0.99), "p99-us")
}

// BenchmarkQueueGroup: uid.next from 8 concurrent clients (each with its
// own connection, one request at a time) to one, two and three dispensers
// in the queue group, all on one embedded nats-server. One op is one
// request of one ID; IDs/s and the requests' p50/p99 are the figures. On
// a 2-core machine the dispensers share the cores with the server and the
// clients, so more of them show the cost of the queue group rather than
// added capacity. The IDs are checked for duplicates and for coming from
// every dispenser.
func BenchmarkQueueGroup(b *testing.B) {
	const clients = 8
	for _, dispensers := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("dispensers=%d", dispensers), func(b *testing.B) {
			url := startNATS(b, nil)
			for w := range dispensers {
				startInstance(b, url, uint64(w+1), instanceOpts{cached: uidcore.CachedOptions{MaxAhead: uidcore.NoAheadBound}})
			}
			pool := make([]*uidclient.Client, clients)
			for i := range pool {
				pool[i] = uidclient.New(connect(b, url).Conn, uidclient.Config{})
			}
			ctx := context.Background()
			if _, err := pool[0].Next(ctx); err != nil { // all subscribed
				b.Fatal(err)
			}
			var (
				next atomic.Int64
				mu   sync.Mutex
				lat  latencies
				ids  []uint64
			)
			b.SetParallelism((clients + 1) / 2) // × GOMAXPROCS goroutines; 8 on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				c := pool[int(next.Add(1)-1)%clients]
				var (
					mine latencies
					got  []uint64
				)
				for pb.Next() {
					t0 := time.Now()
					id, err := c.Next(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					mine.add(time.Since(t0))
					got = append(got, id)
				}
				mu.Lock()
				lat = append(lat, mine...)
				ids = append(ids, got...)
				mu.Unlock()
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IDs/s")
			lat.report(b)
			testenv.CheckDistinct(b, ids)
			if shares := workerShares(b, ids); b.N >= 1000 && len(shares) != dispensers {
				b.Fatalf("IDs from workers %v; want all %d dispensers", shares, dispensers)
			}
		})
	}
}
