package uidclient_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// TestJetStreamAckToRecreatedConsumer records what nats-server does with
// the acks BlockSource relies on when the durable consumer is deleted and
// re-created under the same name, which the block source's design rests on
// (server/consumer.go processAckMsg: an ack is matched by the stream
// sequence in its reply subject alone, by whichever consumer of that name
// exists; the ack subject names no consumer instance):
//
//  1. an ack with no consumer of that name: no responders;
//  2. an ack reaching the new consumer before it has delivered the message
//     (stream sequence at or past its next one): ignored, never answered;
//  3. the new consumer delivers the message again with NumDelivered 1;
//  4. the late ack to the old delivery, once the new consumer has
//     delivered the message, is confirmed and removes it, and so is the
//     new delivery's own ack: both holders would use the message;
//  5. a message acknowledged twice: both acks confirmed;
//  6. the new consumer has another Created time, which is what tells the
//     instances apart.
func TestJetStreamAckToRecreatedConsumer(t *testing.T) {
	srv := blocksTestServer(t)
	nc := blocksTestConn(t, srv)
	js := blocksTestJS(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PROBE", Subjects: []string{"probe"}, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := js.Publish(ctx, "probe", []byte("block")); err != nil {
			t.Fatal(err)
		}
	}
	cfg := uidclient.BlocksConsumerConfig("probe", 30*time.Second)
	fetch := func(c jetstream.Consumer) (jetstream.Msg, *jetstream.MsgMetadata) {
		t.Helper()
		m, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		meta, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		return m, meta
	}
	// ack sends a double ack on a reply subject as it is, bypassing the
	// client library's memory of acks already sent.
	ack := func(reply string) error {
		_, err := nc.Request(reply, []byte("+ACK"), 300*time.Millisecond)
		return err
	}
	msgs := func() uint64 {
		t.Helper()
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}

	c1, err := js.CreateOrUpdateConsumer(ctx, "PROBE", cfg)
	if err != nil {
		t.Fatal(err)
	}
	held, heldMeta := fetch(c1) // a source holds message 1 and stalls
	if heldMeta.Sequence.Stream != 1 || heldMeta.NumDelivered != 1 {
		t.Fatalf("first delivery: %+v", heldMeta)
	}
	if err := js.DeleteConsumer(ctx, "PROBE", "probe"); err != nil {
		t.Fatal(err)
	}
	// 1. Nobody listens on the ack subject.
	if err := ack(held.Reply()); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("ack with the consumer deleted: %v, want no responders", err)
	}
	c2, err := js.CreateOrUpdateConsumer(ctx, "PROBE", cfg)
	if err != nil {
		t.Fatal(err)
	}
	// 6. The instances differ by their creation time only.
	if c1.CachedInfo().Created.Equal(c2.CachedInfo().Created) {
		t.Fatalf("re-created consumer has the same Created %v", c2.CachedInfo().Created)
	}
	// 2. The new consumer has not delivered message 1: the ack is ignored.
	if err := ack(held.Reply()); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("ack to the re-created consumer before it delivered the message: %v, want no answer", err)
	}
	if n := msgs(); n != 3 {
		t.Fatalf("%d messages after the ignored ack, want 3", n)
	}
	// 3. It delivers message 1 again, as a first delivery.
	again, againMeta := fetch(c2)
	if againMeta.Sequence.Stream != 1 || againMeta.NumDelivered != 1 {
		t.Fatalf("delivery by the re-created consumer: %+v, want message 1 delivered once", againMeta)
	}
	// 4. Now the old delivery's late ack is confirmed, and so is the new one's.
	if err := ack(held.Reply()); err != nil {
		t.Fatalf("late ack to the old delivery: %v", err)
	}
	if n := msgs(); n != 2 {
		t.Fatalf("%d messages after the late ack, want message 1 removed", n)
	}
	if err := ack(again.Reply()); err != nil {
		t.Fatalf("ack of the new delivery: %v", err)
	}
	// 5. A message acknowledged twice.
	twice, _ := fetch(c2)
	if err := ack(twice.Reply()); err != nil {
		t.Fatal(err)
	}
	if err := ack(twice.Reply()); err != nil {
		t.Fatalf("second ack of an acknowledged message: %v, want it confirmed", err)
	}
	if n := msgs(); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
}

// recreateBlocksConsumer deletes the block sources' consumer and creates
// it again at once, as an operator's `nats consumer rm` and `add` would.
//
// The sources re-create it too, as soon as they see it deleted, and
// nats-server 2.15.2 races there: the delete takes the consumer out of
// the stream before it removes its directory, so a create landing in
// between gets a consumer whose directory is then removed, which fails
// every later update (API error 10012, "open …/obs/uid-blocks/meta.inf.tmp:
// no such file or directory") and confirms no ack. Deleting it again
// clears that, so the delete and create are repeated until the create
// succeeds.
func recreateBlocksConsumer(ctx context.Context, t *testing.T, js jetstream.JetStream, ackWait time.Duration) {
	t.Helper()
	var err error
	testenv.WaitFor(t, 30*time.Second, "the consumer is deleted and re-created", func() bool {
		err = js.DeleteConsumer(ctx, protocol.DefaultBlocksStream, uidclient.DefaultBlocksConsumer)
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return false
		}
		_, err = js.CreateOrUpdateConsumer(ctx, protocol.DefaultBlocksStream, uidclient.BlocksConsumerConfig(uidclient.DefaultBlocksConsumer, ackWait))
		return err == nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A source that holds a block across a delete and re-create of the
// consumer, while another source takes the same block from the new
// consumer as a first delivery: the block is used by one of them at most.
func TestBlocksRecreatedConsumerHeldBlockUsedOnce(t *testing.T) {
	srv := blocksTestServer(t)
	const ackWait = 10 * time.Second // far past the test: no redelivery by time
	nc := blocksTestConn(t, srv)
	js := blocksTestJS(t, nc)
	blocksTestPublisher(t, blocksTestConn(t, srv), blocksTestGenerator(t, 1, 0),
		natsio.BlocksConfig{BlockSize: 256, TargetDepth: 8, PollInterval: 10 * time.Millisecond}, nil)

	var stalls atomic.Int32
	var heldSeq, heldFirst atomic.Uint64
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	stalled := blocksTestSourceWithHook(t, blocksTestConn(t, srv), uidclient.BlockSourceConfig{AckWait: ackWait, LowWater: 1},
		func(meta *jetstream.MsgMetadata, ids []uint64) {
			if stalls.Add(1) == 1 {
				heldFirst.Store(ids[0])
				heldSeq.Store(meta.Sequence.Stream)
				<-release
			}
		})
	testenv.WaitFor(t, 30*time.Second, "the stalled source holds a block", func() bool { return heldSeq.Load() != 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recreateBlocksConsumer(ctx, t, js, ackWait)

	// The new consumer delivers the held block (the oldest in the stream)
	// to the other source as a first delivery.
	other := blocksTestSource(t, blocksTestConn(t, srv), uidclient.BlockSourceConfig{AckWait: ackWait})
	otherCtx, stopOther := context.WithCancel(ctx)
	defer stopOther()
	var otherIDs blocksCollector
	var total atomic.Int64
	done := make(chan error, 1)
	go func() { done <- otherIDs.run(otherCtx, other, 256, &total, 1<<62) }()
	testenv.WaitFor(t, 30*time.Second, "the other source used blocks of the new consumer", func() bool { return other.Stats().BlocksUsed >= 4 })
	releaseOnce.Do(func() { close(release) }) // the stalled source acks late

	buf := make([]uint64, 256)
	n, err := stalled.NextN(ctx, buf)
	if err != nil {
		t.Fatal(err)
	}
	stopOther()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	stalled.Close()
	other.Close()
	blocksAssertDistinct(t, append(slices.Clone(buf[:n]), otherIDs.ids...))
	t.Logf("stalled source %+v; other source %+v", stalled.Stats(), other.Stats())
	// The case happened: the other source used the held block, and the
	// stalled one gave it up because the consumer changed.
	if !slices.Contains(otherIDs.ids, heldFirst.Load()) {
		t.Errorf("the other source never got the held block (first ID %d): the test did not make the duplicate case", heldFirst.Load())
	}
	if stalled.Stats().ConsumerChanged == 0 {
		t.Error("the stalled source gave up no block as the consumer changed")
	}
}

// Sources under load while the consumer is deleted and re-created again
// and again, the stream purged, and the stream deleted (the publishers
// create it again), with blocks held across each fault:
// every ID handed out is collected, and none twice.
func TestBlocksRecreatedConsumerAndStreamUnderLoadNoDuplicates(t *testing.T) {
	srv := blocksTestServer(t)
	// An ack the re-created consumer ignores is waited for up to the ack
	// wait: keep it short.
	const ackWait = 2 * time.Second
	const faults = 8
	nc := blocksTestConn(t, srv)
	js := blocksTestJS(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stream, err := func() (jetstream.Stream, error) {
		cfg := natsio.BlocksConfig{BlockSize: 512, TargetDepth: 16, PollInterval: 10 * time.Millisecond}
		for w := uint64(1); w <= 2; w++ {
			blocksTestPublisher(t, blocksTestConn(t, srv), blocksTestGenerator(t, w, 0), cfg, nil)
		}
		return js.Stream(ctx, protocol.DefaultBlocksStream)
	}()
	if err != nil {
		t.Fatal(err)
	}
	repairStore := blocksStoreRepair(ctx, t, srv.JetStreamConfig().StoreDir, js)

	// gate holds the stalled blocks until the next fault is over and the
	// sources have used blocks after it.
	var gateMu sync.Mutex
	gate := make(chan struct{})
	current := func() chan struct{} {
		gateMu.Lock()
		defer gateMu.Unlock()
		return gate
	}
	open := func() {
		gateMu.Lock()
		defer gateMu.Unlock()
		close(gate)
		gate = make(chan struct{})
	}
	t.Cleanup(open)
	var held atomic.Int64
	// A stalled block waits for its gate however long the fault takes (a
	// loaded machine must not release it before the fault), or for the
	// end of the run.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	stallEvery := func(k int32) func(*jetstream.MsgMetadata, []uint64) {
		var n atomic.Int32
		return func(*jetstream.MsgMetadata, []uint64) {
			if n.Add(1)%k == 0 {
				g := current()
				held.Add(1)
				select {
				case <-g:
				case <-runCtx.Done():
				}
			}
		}
	}
	var sources []*uidclient.BlockSource
	for i := range 4 {
		var hook func(*jetstream.MsgMetadata, []uint64)
		if i < 3 {
			hook = stallEvery(int32(2 + i))
		}
		sources = append(sources, blocksTestSourceWithHook(t, blocksTestConn(t, srv), uidclient.BlockSourceConfig{AckWait: ackWait}, hook))
	}
	used := func() (n uint64) {
		for _, s := range sources {
			n += s.Stats().BlocksUsed
		}
		return n
	}
	var all blocksCollector
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(sources))
	for _, s := range sources {
		wg.Go(func() {
			if err := all.run(runCtx, s, 300, &total, 1<<62); err != nil {
				errs <- err
			}
		})
	}
	testenv.WaitFor(t, 30*time.Second, "the sources use blocks before the first fault", func() bool { return used() >= 8 })
	start := time.Now()
	for i := range faults {
		if took := testenv.WaitFor(t, 30*time.Second, "a source holds a block across the fault", func() bool {
			repairStore()
			return held.Load() > int64(i)
		}); took > time.Second {
			t.Logf("fault %d: %s until a source held a block", i, took.Round(time.Millisecond))
		}
		faultStart := time.Now()
		switch i % 4 {
		case 0, 1:
			recreateBlocksConsumer(ctx, t, js, ackWait)
		case 2:
			// A loaded server may fail a purge with a general stream error
			// (10051); the purge is the test's fault, not what it tests,
			// so it is asked again.
			var err error
			testenv.WaitFor(t, 30*time.Second, "the stream is purged", func() bool {
				repairStore()
				err = stream.Purge(ctx)
				return err == nil
			})
			if err != nil {
				t.Fatal(err)
			}
		case 3:
			// The publishers create it again, the sources bind a new
			// consumer on it.
			if err := js.DeleteStream(ctx, protocol.DefaultBlocksStream); err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, 30*time.Second, "the publishers re-created the stream", func() bool {
				repairStore()
				stream, err = js.Stream(ctx, protocol.DefaultBlocksStream)
				return err == nil
			})
		}
		if took := time.Since(faultStart); took > time.Second {
			t.Logf("fault %d took %s", i, took.Round(time.Millisecond))
		}
		before := used()
		took := testenv.WaitFor(t, 30*time.Second, "the sources use blocks after the fault", func() bool {
			repairStore()
			return used() >= before+6
		})
		if took > time.Second {
			t.Logf("fault %d: the sources took %s to use blocks again", i, took.Round(time.Millisecond))
		}
		open()
	}
	stop()
	open()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, s := range sources {
		s.Close()
	}
	blocksAssertDistinct(t, all.ids)
	var changed uint64
	for i, s := range sources {
		t.Logf("source %d: %+v", i, s.Stats())
		changed += s.Stats().ConsumerChanged
	}
	if changed == 0 {
		t.Error("no source gave up a block as the consumer changed: the faults never caught a held block")
	}
	t.Logf("%d IDs over %d faults in %s, %d blocks held across them", len(all.ids), faults, time.Since(start).Round(time.Millisecond), held.Load())
}

// blocksStoreRepair returns a check that deletes the blocks stream when
// the embedded nats-server has lost its store, so that the publishers
// create it again. nats-server 2.15.2's filestore, with the stream purged
// or deleted and re-created under load, can be left without the stream's
// msgs directory while the stream lives on: every store then fails
// ("Error creating msg block file …/msgs/N.blk: no such file or
// directory", 10051, a purge's error too), publishes get no ack at all,
// and no source ever gets a block again, until the stream is deleted.
// That is the server's fault, not the sources' or the publishers' (found
// by goroutine dumps of hung runs: both publishers awaiting acks, the
// stream's directory holding only obs/). storeDir is the server's
// JetStream store directory.
func blocksStoreRepair(ctx context.Context, t *testing.T, storeDir string, js jetstream.JetStream) func() {
	t.Helper()
	msgs := filepath.Join(storeDir, "$G", "streams", protocol.DefaultBlocksStream, "msgs")
	if _, err := os.Stat(msgs); err != nil {
		t.Fatalf("the blocks stream's store is not where the repair looks for it: %v", err)
	}
	return func() {
		if _, err := os.Stat(msgs); !errors.Is(err, fs.ErrNotExist) {
			return
		}
		if _, err := js.Stream(ctx, protocol.DefaultBlocksStream); err != nil {
			return // deleted: the publishers create it again
		}
		if _, err := os.Stat(msgs); !errors.Is(err, fs.ErrNotExist) {
			return // it was being created
		}
		t.Logf("the embedded nats-server lost the blocks stream's store (%s is gone): deleting the stream, the publishers create it again", msgs)
		if err := js.DeleteStream(ctx, protocol.DefaultBlocksStream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Logf("deleting the broken stream: %v (tried again)", err)
		}
	}
}

// A consumer deleted while a source holds blocks and has no pull pending
// (it is idle: the block in use is above the low-water mark) is bound
// again when the source next needs a block, on the embedded server and on
// the machine's nats-server. nats-server 2.9 answers a pull to a deleted
// consumer with nothing at all (no "no responders"): a source that only
// waited for answers never bound again, and every Next waited for ever.
// Found by hand: natscli `consumer rm` under client-demo -blocks.
func TestBlockSourceBindsAgainAfterAnIdleDelete(t *testing.T) {
	run := func(t *testing.T, url string) {
		connect := func() *nats.Conn {
			nc, err := nats.Connect(url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			return nc
		}
		nc := connect()
		js := blocksTestJS(t, nc)
		testenv.WaitFor(t, 10*time.Second, "JetStream ready", func() bool {
			_, err := js.AccountInfo(context.Background())
			return err == nil
		})
		const blockSize = 256
		blocksTestPublisher(t, connect(), blocksTestGenerator(t, 1, 0),
			natsio.BlocksConfig{BlockSize: blockSize, TargetDepth: 8, PollInterval: 10 * time.Millisecond}, nil)
		src := blocksTestSource(t, connect(), uidclient.BlockSourceConfig{LowWater: 1})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var ids []uint64
		take := func(n int) {
			t.Helper()
			buf := make([]uint64, n)
			got, err := src.NextN(ctx, buf)
			ids = append(ids, buf[:got]...)
			if err != nil {
				t.Fatalf("after %d IDs: %v (source %+v)", len(ids), err, src.Stats())
			}
		}
		take(10) // bound, one block in use, well above the low-water mark
		stream, err := js.Stream(ctx, protocol.DefaultBlocksStream)
		if err != nil {
			t.Fatal(err)
		}
		before, err := stream.Consumer(ctx, uidclient.DefaultBlocksConsumer)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.DeleteConsumer(ctx, uidclient.DefaultBlocksConsumer); err != nil {
			t.Fatal(err)
		}
		take(8 * blockSize) // past the blocks the source held: it must pull
		after, err := stream.Consumer(ctx, uidclient.DefaultBlocksConsumer)
		if err != nil {
			t.Fatal(err)
		}
		if !after.CachedInfo().Created.After(before.CachedInfo().Created) {
			t.Errorf("consumer created %s, before the delete %s: not bound again", after.CachedInfo().Created, before.CachedInfo().Created)
		}
		blocksAssertDistinct(t, ids)
	}
	t.Run("embedded", func(t *testing.T) { run(t, blocksTestServer(t).ClientURL()) })
	t.Run("process", func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
		url, version := testenv.NATSProcess(t)
		t.Logf("nats-server %s", version)
		run(t, url)
	})
}
