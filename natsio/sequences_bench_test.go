package natsio

import (
	"context"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/sequence/sequencetest"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// BenchmarkSeqVsSnowflake: the sequence endpoints beside the snowflake
// ones, in one run on one instance, one client, one request at a time:
// next, and batches of 4,096 binary. The sequences come from the
// reference store with the default steps, so what is measured is the
// service path; the store's share (11 writes per million numbers) is
// dispenser's TestSequenceStoreWritesPerMillion.
func BenchmarkSeqVsSnowflake(b *testing.B) {
	url := startNATS(b, nil)
	alloc, err := sequence.NewAllocator(sequencetest.NewMemStore(), sequence.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(alloc.Abandon)
	if err := alloc.Declare(context.Background(), []sequence.Declaration{{Name: "orders", First: 1}}); err != nil {
		b.Fatal(err)
	}
	startInstance(b, url, 1, instanceOpts{cached: uidcore.CachedOptions{MaxAhead: uidcore.NoAheadBound}, service: ServiceConfig{Sequences: alloc}})
	client := uidclient.New(connect(b, url).Conn, uidclient.Config{})
	ctx := context.Background()
	const batch = 4096
	for _, c := range []struct {
		name string
		ids  int
		call func() error
	}{
		{"next/snowflake", 1, func() error { _, err := client.Next(ctx); return err }},
		{"next/seq", 1, func() error { _, err := client.SeqNext(ctx, "orders"); return err }},
		{"batch=4096/snowflake", batch, func() error { _, err := client.Batch(ctx, batch); return err }},
		{"batch=4096/seq", batch, func() error { _, err := client.SeqBatch(ctx, "orders", batch); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var lat latencies
			start := time.Now()
			for b.Loop() {
				t0 := time.Now()
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
				lat.add(time.Since(t0))
			}
			b.ReportMetric(float64(b.N*c.ids)/time.Since(start).Seconds(), "IDs/s")
			lat.report(b)
		})
	}
}
