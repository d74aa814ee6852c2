package natsio

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// BenchmarkBatchRangesVsBinary: the largest batch of each encoding, one
// client, one request at a time, from one instance with production
// bounds (MaxAhead 2 s, up to the default 16 lanes of 4,194,304 IDs/s
// each at wall-clock pace, claimed as demand needs them).
// Binary takes every ID through the ring and ships 8 bytes each; ranges
// reserves runs from the lane. Run with -benchtime 10s so that the lane's
// seconds, not the ring's head start, set the rate; -count alternates the
// two. One op is one request; IDs/s is the figure. cpu-ms/M-IDs is the
// CPU time (user and system) of the whole process per million IDs: the
// dispenser's and, as both encodings share them, the client's and the
// embedded server's.
func BenchmarkBatchRangesVsBinary(b *testing.B) {
	url := startNATS(b, nil)
	startInstance(b, url, 1, instanceOpts{cached: uidcore.CachedOptions{Lanes: &uidcore.StaticAssigner{From: 2, To: 100}}})
	nc := connect(b, url)
	for _, tc := range []struct {
		enc string
		n   int
	}{{protocol.EncodingBinary, DefaultMaxBatch}, {protocol.EncodingRanges, 1 << 20}} {
		b.Run(fmt.Sprintf("enc=%s/ids=%d", tc.enc, tc.n), func(b *testing.B) {
			msg := &nats.Msg{Subject: "uid.batch", Data: []byte(strconv.Itoa(tc.n)), Header: nats.Header{protocol.EncodingHeader: []string{tc.enc}}}
			var ids uint64
			start, cpuStart := time.Now(), testenv.ProcessCPU(b)
			for b.Loop() {
				reply, err := nc.RequestMsg(msg, 10*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if code := reply.Header.Get("Nats-Service-Error-Code"); code != "" {
					continue // 503 at capacity: counted as no IDs
				}
				if tc.enc == protocol.EncodingRanges {
					runs, err := protocol.DecodeRuns(nil, reply.Data)
					if err != nil {
						b.Fatal(err)
					}
					ids += protocol.CountOf(runs)
				} else {
					ids += uint64(len(reply.Data) / protocol.BinaryIDWidth)
				}
			}
			b.ReportMetric(float64(ids)/time.Since(start).Seconds(), "IDs/s")
			if ids > 0 {
				b.ReportMetric(float64((testenv.ProcessCPU(b)-cpuStart).Milliseconds())/(float64(ids)/1e6), "cpu-ms/M-IDs")
			}
		})
	}
}
