package kvstore_test

import (
	"context"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// BenchmarkSequenceTakeEpoch is what D7 adds to a segment take: the take
// alone (a read and an Update) beside the take and the epoch read after
// it (one stream info request), on an embedded server.
//
//	go test -run '^$' -bench SequenceTakeEpoch -count 6 ./natsio/kvstore/
func BenchmarkSequenceTakeEpoch(b *testing.B) {
	addr := embeddedAddr(b)
	cfg := kvConfig(workerid.ModeLeased)
	s, err := newKVAssigner(b, cfg, addr).Sequences(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Declare(ctx, "bench", 1); err != nil {
		b.Fatal(err)
	}
	watcher := s.(sequence.LossWatcher)
	for _, withEpoch := range []bool{false, true} {
		name := "take"
		if withEpoch {
			name = "take+epoch"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Take(ctx, "bench", 10, 0); err != nil {
					b.Fatal(err)
				}
				if withEpoch {
					if _, err := watcher.Epoch(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
