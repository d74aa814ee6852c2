package uidclient_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// Many goroutines take through many refills of small batches, so they
// race on the lock-free take and on every switch of range: no ID twice,
// none missing from the count.
func TestPrefetcherLockFreeTakesDistinctAcrossRefills(t *testing.T) {
	url := blocksTestServer(t).ClientURL()
	startClientTestService(t, url, 1, clientTestOpts{})
	startClientTestService(t, url, 2, clientTestOpts{})
	p := uidclient.NewPrefetcher(uidclient.New(clientTestConn(t, url), uidclient.Config{}),
		uidclient.PrefetchConfig{BatchSize: 64, LowWater: 128})
	defer p.Close()
	all := takeConcurrently(context.Background(), t, p, 16, 4_000) // 64,000 IDs: 1,000 refills at least
	testenv.CheckDistinct(t, all)
	if avail := p.Available(); avail > 128+64 {
		t.Fatalf("reserve %d exceeds LowWater+BatchSize", avail)
	}
}

// takeConcurrently takes each IDs from p on each of goroutines at once
// and returns them all, failing the test on an error or a short count.
func takeConcurrently(ctx context.Context, t *testing.T, p *uidclient.Prefetcher, goroutines, each int) []uint64 {
	t.Helper()
	results := make([][]uint64, goroutines)
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				id, err := p.Next(ctx)
				if err != nil {
					errs <- err
					return
				}
				results[g] = append(results[g], id)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var all []uint64
	for _, r := range results {
		all = append(all, r...)
	}
	if len(all) != goroutines*each {
		t.Fatalf("%d IDs, want %d", len(all), goroutines*each)
	}
	return all
}

// prefetchFleet is how many default instances refill the benchmark's
// prefetcher: one holds at most 16 lanes of 4,194,304 IDs/s (67 M IDs/s
// at wall-clock pace, the production bound), less than one goroutine
// takes at an atomic counter's speed, so a single instance would measure
// its own capacity, not the take.
const prefetchFleet = 3

// startLanedService runs the k-th instance of a fleet with the
// production bounds (MaxAhead 2 s, up to 16 lanes claimed on demand from
// worker IDs of its own).
func startLanedService(t testing.TB, url string, k uint64) {
	t.Helper()
	startClientTestService(t, url, 1+20*k, clientTestOpts{cached: uidcore.CachedOptions{
		Lanes: &uidcore.StaticAssigner{From: 2 + 20*k, To: 20 + 20*k}}})
}

// BenchmarkPrefetcherVsAtomic puts Prefetcher.Next, refilled by real
// dispenser services over NATS, beside its limit: one atomic add on a
// shared counter. Run with -cpu 1,8 -benchtime 10s, so that refills run
// during the timed loop; run the binary several times for alternated
// rounds (-count repeats one sub-benchmark before the next). The
// prefetcher is shared by the sub-benchmarks (its fetcher has learnt the
// rate); prefetcher-timed times every take with a histogram and reports
// its percentiles (the clock reads inflate ns/op there, not the tail).
func BenchmarkPrefetcherVsAtomic(b *testing.B) {
	url := testenv.NATS(b, nil).ClientURL()
	for k := range uint64(prefetchFleet) {
		startLanedService(b, url, k)
	}
	p := uidclient.NewPrefetcher(uidclient.New(clientTestConn(b, url), uidclient.Config{}), uidclient.PrefetchConfig{})
	b.Cleanup(func() { p.Close() })
	b.Run("atomic", func(b *testing.B) {
		defer reportCPU(b)()
		var counter, sink uint64
		b.RunParallel(func(pb *testing.PB) {
			var last uint64
			for pb.Next() {
				last = atomic.AddUint64(&counter, 1)
			}
			atomic.StoreUint64(&sink, last)
		})
	})
	b.Run("prefetcher", func(b *testing.B) {
		defer reportCPU(b)()
		defer reportWaits(b, p)()
		var sink atomic.Uint64
		b.RunParallel(func(pb *testing.PB) {
			var last uint64
			for pb.Next() {
				id, err := p.Next(context.Background())
				if err != nil {
					b.Error(err)
					return
				}
				last = id
			}
			sink.Store(last)
		})
	})
	b.Run("prefetcher-timed", func(b *testing.B) {
		defer reportWaits(b, p)()
		var (
			mu  sync.Mutex
			all testenv.Histogram
		)
		b.RunParallel(func(pb *testing.PB) {
			h := new(testenv.Histogram)
			t0 := time.Now()
			for pb.Next() {
				if _, err := p.Next(context.Background()); err != nil {
					b.Error(err)
					return
				}
				t1 := time.Now()
				h.Record(t1.Sub(t0))
				t0 = t1
			}
			mu.Lock()
			all.Merge(h)
			mu.Unlock()
		})
		reportTakeLatency(b, &all)
	})
}

// reportCPU, deferred at once, reports the process's CPU time (user and
// system) per op during the benchmark: on a machine shared with other
// jobs, wall time per op counts the time the process waits for a core,
// CPU time does not. The prefetcher's includes the in-process services
// and server refilling it.
func reportCPU(b *testing.B) func() {
	before := testenv.ProcessCPU(b)
	return func() { b.ReportMetric(float64(testenv.ProcessCPU(b)-before)/float64(b.N), "cpu-ns/op") }
}

// reportWaits, deferred at once, reports how many takes of p waited for
// a refill during the benchmark.
func reportWaits(b *testing.B, p *uidclient.Prefetcher) func() {
	before := uidclient.PrefetcherWaits(p)
	return func() { b.ReportMetric(float64(uidclient.PrefetcherWaits(p)-before), "waits") }
}

// reportTakeLatency reports the percentiles of a take (each the upper
// bound of its histogram bucket).
func reportTakeLatency(b *testing.B, h *testenv.Histogram) {
	b.ReportMetric(float64(h.Quantile(0.5)), "p50-ns")
	b.ReportMetric(float64(h.Quantile(0.99)), "p99-ns")
	b.ReportMetric(float64(h.Quantile(0.9999)), "p99.99-ns")
	b.ReportMetric(float64(h.Quantile(1)), "max-ns")
}

// A service whose largest batch (128 IDs: 7 sequence bits, MaxBatch
// 100) is far below MaxBatchSize: once the take rate and the waits for
// the lane's next second raise the reserve target above it, refills ask
// for more than the service answers, get a 400, and halve their size;
// no take fails, and every ID is distinct.
func TestPrefetcherShrinksRefillsToTheServiceLimit(t *testing.T) {
	url := blocksTestServer(t).ClientURL()
	layout := uidcore.Layout{TimeBits: 46, WorkerBits: 10, SeqBits: 7, Epoch: uidcore.DefaultEpoch}
	startClientTestService(t, url, 3, clientTestOpts{cached: uidcore.CachedOptions{Layout: layout},
		service: natsio.ServiceConfig{MaxBatch: 100}})
	p := uidclient.NewPrefetcher(uidclient.New(clientTestConn(t, url), uidclient.Config{}),
		uidclient.PrefetchConfig{BatchSize: 16, MaxBatchSize: 1 << 20})
	defer p.Close()
	all := takeConcurrently(context.Background(), t, p, 2, 400)
	testenv.CheckDistinct(t, all)
}
