package dispenser

import (
	"context"
	"errors"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// blocksConsumers and blocksTake are the load of issue 23: four block
// sources, each on its own connection, taking 4,096 IDs at a time (as
// `client-demo -blocks -c 4 -batch 4096`).
const (
	blocksConsumers = 4
	blocksTake      = 4096
)

// BenchmarkBlocksSustained is what block consumers get for as long as the
// load lasts: four BlockSources, each on its own connection, take 4,096
// IDs at a time (one op is one take) from the default block stream (64
// blocks of 4,096 IDs, file storage) on one embedded nats-server, fed by
//   - publisher=bare: one publisher filling blocks from an atomic counter
//     into the same stream configuration, eight in flight, a refused
//     block sent again: the limit of JetStream on this machine;
//   - publisher=dispensers/store=kv|mysql: three dispenser instances with
//     the default configuration and blocks on (lanes, the 2 s ahead
//     bound, worker IDs leased in the KV bucket or in MySQL).
//
// Metrics: IDs/s; errors (takes that failed); discarded-% (IDs the
// publishers took from their generators and never stored: given up or
// expired blocks, counted after the dispensers stopped, of all they
// took); pub-age-max-s and pub-ahead-max-s (the oldest a stored block's
// first ID was when published, from the start of its second, and the
// furthest its last ID's second ran ahead of the clock); age-p50-ms and
// age-p99-ms (the first ID of each take when the consumer got it, from
// the start of its second); depth-mean (blocks in the stream, sampled
// every 100 ms); rss-MiB and heap-MiB (peak RSS and Go heap in use of the
// benchmark's process, which holds the server, the dispensers and the
// consumers). UID_BENCH_BLOCKS_SERIES names a file for the per-second
// series (benchmark, second, IDs/s, depth at the end of the second).
//
//	go test -run '^$' -bench BlocksSustained -benchtime 10s -count 3 ./dispenser/ | tee blocks.txt
//	benchstat -col /publisher blocks.txt
func BenchmarkBlocksSustained(b *testing.B) {
	b.Run("publisher=bare", func(b *testing.B) {
		url := testenv.NATS(b, nil).ClientURL()
		startBarePublisher(b, url)
		runBlocksSustained(b, url, nil)
	})
	for _, store := range []string{"kv", "mysql"} {
		b.Run("publisher=dispensers/store="+store, func(b *testing.B) {
			cfg := benchConfig(b, store == "mysql")
			url := cfg.NATSURL
			cfg.BlocksEnabled = true
			var ds []*Dispenser
			for range 3 {
				d, err := Start(b.Context(), cfg, WithLogger(testLogger()))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { shutdownBench(b, d) })
				ds = append(ds, d)
			}
			runBlocksSustained(b, url, ds)
		})
	}
}

// runBlocksSustained drives the four consumers for b.N takes and reports;
// with dispensers it stops them at the end to count what they discarded.
func runBlocksSustained(b *testing.B, url string, ds []*Dispenser) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sources := make([]*uidclient.BlockSource, blocksConsumers)
	for i := range sources {
		s, err := uidclient.NewBlockSource(testConn(b, url).Conn, uidclient.BlockSourceConfig{Logger: testLogger(), LossWindow: -1}) // W = 0: no claims
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		sources[i] = s
	}
	layout := DefaultConfig().Layout()
	var (
		next, received, errs atomic.Int64
		mu                   sync.Mutex
		ages                 []time.Duration
		lastErr              atomic.Pointer[error]
	)
	depth := sampleDepth(b, url)
	stopSeries := recordSeries(b, os.Getenv("UID_BENCH_BLOCKS_SERIES"), &received, func() int64 { return int64(depth.last.Load()) })
	stopRSS := sampleRSS(b)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for _, s := range sources {
		wg.Go(func() {
			buf := make([]uint64, blocksTake)
			var mine []time.Duration
			for next.Add(1) <= int64(b.N) {
				n, err := s.NextN(ctx, buf)
				received.Add(int64(n))
				if err != nil {
					errs.Add(1)
					lastErr.Store(&err)
					continue
				}
				if ds != nil {
					p, perr := layout.Parse(buf[0])
					if perr != nil {
						errs.Add(1)
						lastErr.Store(&perr)
						continue
					}
					mine = append(mine, time.Since(p.Time))
				}
			}
			mu.Lock()
			ages = append(ages, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	stopSeries()
	depth.stop()
	b.ReportMetric(float64(received.Load())/elapsed.Seconds(), "IDs/s")
	b.ReportMetric(float64(errs.Load()), "errors")
	b.ReportMetric(depth.mean(), "depth-mean")
	if p := lastErr.Load(); p != nil {
		b.Logf("%d failed takes, the last: %v", errs.Load(), *p)
	}
	if len(ages) > 0 {
		slices.Sort(ages)
		b.ReportMetric(float64(ages[len(ages)/2].Milliseconds()), "age-p50-ms")
		b.ReportMetric(float64(ages[len(ages)*99/100].Milliseconds()), "age-p99-ms")
	}
	reportMemory(b, stopRSS())
	if ds == nil {
		return
	}
	// Stopped, the publishers have given up what they held: their counts
	// are final.
	var taken, discarded uint64
	var maxAge, maxAhead time.Duration
	for _, d := range ds {
		shutdownBench(b, d)
		st := d.blocks.Stats()
		taken += st.IDsPublished + st.IDsDiscarded
		discarded += st.IDsDiscarded
		maxAge, maxAhead = max(maxAge, st.MaxAge), max(maxAhead, st.MaxAhead)
	}
	b.ReportMetric(100*float64(discarded)/float64(max(taken, 1)), "discarded-%")
	b.ReportMetric(maxAge.Seconds(), "pub-age-max-s")
	b.ReportMetric(maxAhead.Seconds(), "pub-ahead-max-s")
}

// depthSampler reads the block stream's depth every 100 ms.
type depthSampler struct {
	last       atomic.Uint64
	sum, count atomic.Uint64
	stop       func()
}

func (d *depthSampler) mean() float64 {
	return float64(d.sum.Load()) / float64(max(d.count.Load(), 1))
}

func sampleDepth(b *testing.B, url string) *depthSampler {
	js, err := jetstream.New(testConn(b, url).Conn)
	if err != nil {
		b.Fatal(err)
	}
	d := &depthSampler{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			s, err := js.Stream(ctx, protocol.DefaultBlocksStream)
			cancel()
			if err != nil {
				continue
			}
			msgs := s.CachedInfo().State.Msgs
			d.last.Store(msgs)
			d.sum.Add(msgs)
			d.count.Add(1)
		}
	})
	d.stop = func() { close(done); wg.Wait() }
	return d
}

// reportMemory reports the process's peak RSS while the load ran (bytes,
// from sampleRSS) and the Go heap in use.
func reportMemory(b *testing.B, rss float64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
	b.ReportMetric(rss/(1<<20), "rss-MiB")
}

// startBarePublisher publishes blocks of 4,096 IDs from an atomic counter
// into the default block stream, eight publishes in flight, until the
// benchmark ends: a block the full stream refuses is sent again
// a millisecond later, with no depth checks: as fast as JetStream takes
// them.
func startBarePublisher(b *testing.B, url string) {
	nc := testConn(b, url).Conn
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(16))
	if err != nil {
		b.Fatal(err)
	}
	cfg := natsio.BlocksConfig{}.StreamConfig()
	if _, err := js.CreateOrUpdateStream(b.Context(), cfg); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() { cancel(); wg.Wait() })
	var counter uint64
	ids := make([]uint64, protocol.DefaultBlockSize)
	newBlock := func() *nats.Msg {
		for i := range ids {
			ids[i] = counter
			counter++
		}
		return protocol.EncodeBlock(cfg.Subjects[0], 0, ids)
	}
	wg.Go(func() {
		const window = 8
		var pending []jetstream.PubAckFuture
		for ctx.Err() == nil {
			for len(pending) < window {
				f, err := js.PublishMsgAsync(newBlock())
				if err != nil {
					return
				}
				pending = append(pending, f)
			}
			f := pending[0]
			pending = pending[1:]
			select {
			case <-f.Ok():
			case err := <-f.Err():
				var apiErr *jetstream.APIError
				if !errors.As(err, &apiErr) {
					return
				}
				// Refused: the stream is full. Send it again after a
				// millisecond (consumers take 64 blocks in about 26 ms
				// at 10 M IDs/s), not in a loop that keeps the server
				// busy refusing.
				time.Sleep(time.Millisecond)
				if f, err = js.PublishMsgAsync(f.Msg()); err != nil {
					return
				}
				pending = append(pending, f)
			case <-ctx.Done():
				return
			}
		}
	})
}
