package natsio

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// A JetStream store at its limits: the block publisher backs off with one
// warning for the episode, refused blocks are not stored (their IDs are
// discarded, never published again), uid.next and uid.batch are answered
// throughout, and once consumers take blocks (room again) publishing
// resumes. Every ID, from requests and from blocks, is distinct.
func TestBlocksStorePressurePublisherBacksOffRequestsServed(t *testing.T) {
	const blockSize = 512 // 4 KiB of IDs and the headers a block
	for _, tc := range []struct {
		name string
		opts *server.Options
		// limit, when set, caps the stream once the publisher made it.
		limit func(cfg jetstream.StreamConfig) jetstream.StreamConfig
		code  string // the API error the refusals carry
	}{
		{name: "server max_file_store", opts: &server.Options{JetStreamMaxStore: 48 << 10}, code: "10023"},
		{name: "stream MaxBytes", limit: func(cfg jetstream.StreamConfig) jetstream.StreamConfig {
			cfg.MaxBytes = 48 << 10
			return cfg
		}, code: "maximum bytes exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := startNATS(t, tc.opts)
			inst := startInstance(t, url, 21, instanceOpts{})
			var logs testenv.LogBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			p, err := NewBlockPublisher(ctx, connect(t, url).Conn, inst.gen,
				// Binary blocks: 4 KiB each, so that the store fills (runs
				// take a few dozen bytes a block).
				BlocksConfig{BlockSize: blockSize, BinaryBlocks: true, TargetDepth: 64, PollInterval: 10 * time.Millisecond, Logger: logs.Logger(slog.LevelInfo)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Stop(context.Background()) })
			if tc.limit != nil {
				js, err := jetstream.New(connect(t, url).Conn)
				if err != nil {
					t.Fatal(err)
				}
				s, err := js.Stream(ctx, protocol.DefaultBlocksStream)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := js.UpdateStream(ctx, tc.limit(s.CachedInfo().Config)); err != nil {
					t.Fatal(err)
				}
			}
			testenv.WaitFor(t, 10*time.Second, "the publisher meets the store's limit", func() bool { return p.Stats().Pressure > 0 })
			if d := p.Stats().Depth; d == 0 || d >= 64 {
				t.Fatalf("stream depth %d under pressure: want some blocks, fewer than the target", d)
			}

			// Under pressure, requests are served.
			client := uidclient.New(connect(t, url).Conn, uidclient.Config{})
			var ids []uint64
			for range 200 {
				id, err := client.Next(ctx)
				if err != nil {
					t.Fatalf("uid.next under store pressure: %v", err)
				}
				ids = append(ids, id)
				batch, err := client.Batch(ctx, 100)
				if err != nil {
					t.Fatalf("uid.batch under store pressure: %v", err)
				}
				ids = append(ids, batch...)
			}
			// Still under pressure, and backing off: one block refused a
			// round at most, rounds a poll interval or more apart.
			before := p.Stats()
			testenv.WaitFor(t, 10*time.Second, "the publisher tries again", func() bool { return p.Stats().Pressure > before.Pressure })
			if st := p.Stats(); st.Published != before.Published || st.Failed != 0 {
				t.Fatalf("under pressure: stats %+v then %+v", before, st)
			}
			out := logs.String()
			if n := strings.Count(out, "level=WARN"); n != 1 || !strings.Contains(out, "JetStream store at its limits") || !strings.Contains(out, tc.code) {
				t.Fatalf("%d warnings, want one about the store's limits naming %q:\n%s", n, tc.code, out)
			}

			// Consumers take blocks: room again, publishing resumes.
			src, err := uidclient.NewBlockSource(connect(t, url).Conn, uidclient.BlockSourceConfig{FetchWait: 200 * time.Millisecond, LossWindow: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			fromBlocks := make([]uint64, 30*blockSize)
			if _, err := src.NextN(ctx, fromBlocks); err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, 10*time.Second, "publishing resumes", func() bool { return p.Stats().Published > before.Published })
			testenv.WaitFor(t, 5*time.Second, "the recovery is logged", func() bool {
				return strings.Contains(logs.String(), "JetStream store at its limits, backing off) recovered")
			})
			src.Close()
			if st := src.Stats(); st.Malformed != 0 {
				t.Fatalf("source stats %+v", st)
			}
			st := p.Stats()
			// A refused block is held and published again while young
			// enough: only the expired ones are discarded.
			if st.Failed != 0 || st.IDsDiscarded != st.Expired*blockSize {
				t.Fatalf("publisher stats %+v: only expired blocks' IDs may be discarded", st)
			}
			testenv.CheckDistinct(t, append(ids, fromBlocks...))
			t.Logf("publisher %+v; %d IDs from requests, %d from blocks", st, len(ids), len(fromBlocks))
		})
	}
}
