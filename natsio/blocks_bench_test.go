package natsio

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// BenchmarkBlocks measures IDs consumed through blocks (one op = one ID
// taken with BlockSource.Next) by one and by four consumers, each with
// its own connection, while three publishers keep the stream topped up,
// all against one embedded nats-server with file storage.
//
// The publishers' generators may borrow seconds without bound
// (NoAheadBound) so that the figure is the block path's alone; the
// figure with the default bounds on (the 2 s ahead bound, lanes, leases)
// is dispenser's BenchmarkBlocksSustained.
//
// claims=on is the same with every block claimed (issue 31's D6: a KV
// Create, a wait of the loss window, here 50 ms, and a read at the
// leader), the sources fetching far enough ahead to hide the wait
// (LowWater: 32 default blocks); claims=off is W = 0.
func BenchmarkBlocks(b *testing.B) {
	for _, consumers := range []int{1, 4} {
		for _, claims := range []bool{false, true} {
			b.Run(fmt.Sprintf("consumers=%d/claims=%s", consumers, map[bool]string{false: "off", true: "on"}[claims]), func(b *testing.B) {
				cfg := uidclient.BlockSourceConfig{LossWindow: -1} // W = 0: no claims
				if claims {
					cfg = uidclient.BlockSourceConfig{LossWindow: 50 * time.Millisecond, LowWater: 32 * protocol.DefaultBlockSize}
				}
				benchmarkBlocks(b, 3, consumers, cfg)
			})
		}
	}
}

func benchmarkBlocks(b *testing.B, publishers, consumers int, sourceCfg uidclient.BlockSourceConfig) {
	srv := testenv.NATS(b, nil)
	connect := func() *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		return nc
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var pubs []*BlockPublisher
	for w := range publishers {
		g, err := uidcore.NewCached(uidcore.CachedOptions{
			Claim:    uidcore.StaticClaim{ID: uint64(w + 1)},
			MaxAhead: uidcore.NoAheadBound,
			TakeWait: time.Second,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { g.Close() })
		p, err := NewBlockPublisher(ctx, connect(), g, BlocksConfig{})
		if err != nil {
			b.Fatal(err)
		}
		pubs = append(pubs, p)
		b.Cleanup(func() { p.Stop(context.Background()) })
	}
	var sources []*uidclient.BlockSource
	for range consumers {
		s, err := uidclient.NewBlockSource(connect(), sourceCfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		// Warm up: the consumer is bound and has its first block.
		if _, err := s.Next(ctx); err != nil {
			b.Fatal(err)
		}
		sources = append(sources, s)
	}
	var (
		wg   sync.WaitGroup
		errs = make(chan error, consumers)
	)
	b.ResetTimer()
	for i, s := range sources {
		share := b.N / consumers
		if i < b.N%consumers {
			share++
		}
		wg.Go(func() {
			for range share {
				if _, err := s.Next(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IDs/s")
	var refused uint64
	for _, p := range pubs {
		refused += p.Stats().Refused
	}
	b.ReportMetric(float64(refused)/float64(max(1, b.N/protocol.DefaultBlockSize)), "refused/block")
}
