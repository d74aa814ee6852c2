package uidclient_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
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

// BenchmarkPrefetcherVsAtomic puts Prefetcher.Next, refilled by a real
// dispenser service over NATS, beside its limit: one atomic add on a
// shared counter. Run with -cpu 1,8.
func BenchmarkPrefetcherVsAtomic(b *testing.B) {
	b.Run("prefetcher", func(b *testing.B) {
		url := testenv.NATS(b, nil).ClientURL()
		startClientTestService(b, url, 1, clientTestOpts{})
		p := uidclient.NewPrefetcher(uidclient.New(clientTestConn(b, url), uidclient.Config{}), uidclient.PrefetchConfig{})
		b.Cleanup(func() { p.Close() })
		var sink atomic.Uint64
		b.ResetTimer()
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
	b.Run("atomic", func(b *testing.B) {
		var counter, sink uint64
		b.RunParallel(func(pb *testing.PB) {
			var last uint64
			for pb.Next() {
				last = atomic.AddUint64(&counter, 1)
			}
			atomic.StoreUint64(&sink, last)
		})
	})
}
