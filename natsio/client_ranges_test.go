package natsio

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// The Go client asks batches as ranges and expands them: concurrent
// callers on two instances get distinct, increasing IDs, and BatchRuns
// keeps the runs.
func TestClientBatchAsRangesConcurrentDistinct(t *testing.T) {
	url := startNATS(t, nil)
	startInstance(t, url, 1, instanceOpts{})
	startInstance(t, url, 2, instanceOpts{})
	nc := connect(t, url)
	client := uidclient.New(nc.Conn, uidclient.Config{})
	const goroutines, calls, n = 8, 20, 5000
	results := make([][]uint64, goroutines)
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for range calls {
				var err error
				before := len(results[g])
				if g%2 == 0 {
					results[g], err = client.AppendBatch(ctx, results[g], n)
				} else {
					var runs []uidclient.Run
					runs, err = client.BatchRuns(ctx, n)
					results[g] = protocol.AppendIDs(results[g], runs)
				}
				if err != nil {
					errs <- err
					return
				}
				if got := results[g][before:]; len(got) != n || !slices.IsSorted(got) {
					t.Errorf("a batch of %d IDs, sorted %v", len(got), slices.IsSorted(got))
				}
			}
		})
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
	if len(all) != goroutines*calls*n {
		t.Fatalf("%d IDs", len(all))
	}
	testenv.CheckDistinct(t, all)
}

// Ranges batches of a lane-second are reserved from the lanes, not taken
// through the ring: concurrent bulk callers and single takes on two
// instances get distinct IDs, each batch in a few runs.
func TestServiceReservedRangesConcurrentWithTakesUnique(t *testing.T) {
	url := startNATS(t, nil)
	startInstance(t, url, 1, instanceOpts{})
	startInstance(t, url, 2, instanceOpts{})
	nc := connect(t, url)
	client := uidclient.New(nc.Conn, uidclient.Config{})
	var (
		mu  sync.Mutex
		all []uint64
		wg  sync.WaitGroup
	)
	keep := func(ids []uint64) {
		mu.Lock()
		all = append(all, ids...)
		mu.Unlock()
	}
	errs := make(chan error, 8)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const bulk, rounds, n = 4, 3, 300_000
	for range bulk {
		wg.Go(func() {
			for range rounds {
				runs, err := client.BatchRuns(ctx, n)
				if err != nil {
					errs <- err
					return
				}
				if len(runs) > 8 {
					t.Errorf("%d IDs in %d runs", n, len(runs))
				}
				keep(protocol.AppendIDs(nil, runs))
			}
		})
	}
	for i := range 4 {
		wg.Go(func() {
			var mine []uint64
			for range 500 {
				var err error
				if i%2 == 0 {
					var id uint64
					id, err = client.Next(ctx)
					mine = append(mine, id)
				} else {
					mine, err = client.AppendBatch(ctx, mine, 20)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			keep(mine)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if want := bulk*rounds*n + 2*500 + 2*500*20; len(all) != want {
		t.Fatalf("%d IDs, want %d", len(all), want)
	}
	testenv.CheckDistinct(t, all)
}

// During a rolling upgrade a dispenser older than ranges answers the
// header with a 400: the client then asks binary, and keeps doing so.
// The older dispenser is played by a responder that answers as one did.
func TestClientBatchFallsBackToBinaryForAnOlderDispenser(t *testing.T) {
	nc := connect(t, startNATS(t, nil))
	var rangesAsked, binaryAsked atomic.Int32
	var next atomic.Uint64
	next.Store(1 << 40)
	sub, err := nc.Subscribe("old.batch", func(m *nats.Msg) {
		reply := nats.NewMsg(m.Reply)
		switch m.Header.Get(protocol.EncodingHeader) {
		case protocol.EncodingBinary:
			binaryAsked.Add(1)
			for range 3 {
				reply.Data = binary.BigEndian.AppendUint64(reply.Data, next.Add(1))
			}
		default:
			rangesAsked.Add(1)
			reply.Header.Set(micro.ErrorCodeHeader, "400")
			reply.Header.Set(micro.ErrorHeader, `Uid-Encoding "ranges" is not an encoding: send binary or base32, or no header for decimal`)
		}
		_ = m.RespondMsg(reply)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	client := uidclient.New(nc.Conn, uidclient.Config{SubjectPrefix: "old"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var all []uint64
	for range 3 {
		ids, err := client.Batch(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ids...)
	}
	if len(all) != 9 || !slices.IsSorted(all) || all[0] != 1<<40+1 {
		t.Fatalf("IDs %v", all)
	}
	if rangesAsked.Load() != 1 || binaryAsked.Load() != 3 {
		t.Fatalf("asked ranges %d times and binary %d; want once, then binary", rangesAsked.Load(), binaryAsked.Load())
	}
}
