package natsio

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// Throughput benchmarks: one dispenser, one client, an embedded server,
// all in this process on loopback. Rates above 2^seqBits IDs per second
// borrow future seconds, so the ring may run ahead of the clock without
// bound here (uidcore.NoAheadBound); see BENCHMARKS.md for the rate a
// worker sustains under the default bound.

func benchInstance(b *testing.B) string {
	b.Helper()
	url := startNATS(b, nil)
	startInstance(b, url, 1, instanceOpts{cached: uidcore.CachedOptions{MaxAhead: uidcore.NoAheadBound}})
	return url
}

// BenchmarkBatchBinary: uid.batch with binary encoding, one client, one
// request at a time. One op is one request; IDs/s is the figure, with the
// requests' p50 and p99 latency. The sizes 1, 64, 1024 and 16384 are the
// benchmark report's (make bench).
func BenchmarkBatchBinary(b *testing.B) {
	url := benchInstance(b)
	// Plain requests: the Go client asks ranges since issue 35.
	nc := connect(b, url).Conn
	for _, n := range []int{1, 64, 1000, 1024, 10_000, 16_384, 100_000} {
		b.Run(fmt.Sprintf("ids=%d", n), func(b *testing.B) {
			msg := &nats.Msg{Subject: "uid.batch", Data: []byte(strconv.Itoa(n)), Header: nats.Header{protocol.EncodingHeader: []string{protocol.EncodingBinary}}}
			buf := make([]uint64, 0, n)
			var lat latencies
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				t0 := time.Now()
				reply, err := nc.RequestMsg(msg, 10*time.Second)
				if err == nil {
					buf, err = protocol.Binary.Decode(buf[:0], reply.Data)
				}
				if err != nil || len(buf) != n {
					b.Fatalf("%d IDs, %v", len(buf), err)
				}
				lat.add(time.Since(t0))
			}
			b.ReportMetric(float64(b.N*n)/time.Since(start).Seconds(), "IDs/s")
			lat.report(b)
		})
	}
}

// BenchmarkPrefetcher: IDs taken in-process from a Prefetcher refilled
// in the background with batches (ranges since issue 35). One op is one ID.
func BenchmarkPrefetcher(b *testing.B) {
	url := benchInstance(b)
	client := uidclient.New(connect(b, url).Conn, uidclient.Config{})
	for _, size := range []int{8192, 100_000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			p := uidclient.NewPrefetcher(client, uidclient.PrefetchConfig{BatchSize: size, LowWater: 2 * size})
			defer p.Close()
			ctx := context.Background()
			if _, err := p.Next(ctx); err != nil { // wait for the first refill
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				if _, err := p.Next(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "IDs/s")
		})
	}
}

// BenchmarkClientNext is what uidclient.Client.Next costs beside the plain
// request it sends: one client, one request at a time, a default-bounded
// instance (uid.next is one ID a request, far under the bound). The
// plain request (target=request, as natscli sends it) is the limit; the
// client adds its retry loop, per-attempt timeout, span and trace
// context. ctx is what callers pass: context.Background, a context that
// can be cancelled (a daemon's) and one with a deadline further away
// than an attempt's timeout (a request handler's). One op is
// one request; cpu-ns/op is the whole process's CPU, server included.
func BenchmarkClientNext(b *testing.B) {
	url := startNATS(b, nil)
	startInstance(b, url, 1, instanceOpts{})
	nc := connect(b, url).Conn
	client := uidclient.New(nc, uidclient.Config{})
	cancelled, cancel := context.WithCancel(context.Background())
	defer cancel()
	far, cancelFar := context.WithTimeout(context.Background(), time.Hour)
	defer cancelFar()
	for _, target := range []string{"request", "uidclient/ctx=background", "uidclient/ctx=cancel", "uidclient/ctx=deadline-far"} {
		b.Run("target="+target, func(b *testing.B) {
			call := func() error {
				switch target {
				case "request":
					_, err := nc.Request("uid.next", nil, time.Second)
					return err
				case "uidclient/ctx=background":
					_, err := client.Next(context.Background())
					return err
				case "uidclient/ctx=cancel":
					_, err := client.Next(cancelled)
					return err
				}
				_, err := client.Next(far)
				return err
			}
			b.ReportAllocs()
			cpu := testenv.ProcessCPU(b)
			var lat latencies
			for b.Loop() {
				t0 := time.Now()
				if err := call(); err != nil {
					b.Fatal(err)
				}
				lat.add(time.Since(t0))
			}
			b.ReportMetric(float64(testenv.ProcessCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
			lat.report(b)
		})
	}
}
