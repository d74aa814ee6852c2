package natsio

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The shared consumer is deleted (say, by an operator) while source A
// holds a fetched block it has not acknowledged yet. Source B re-creates
// the consumer under the same name and gets that block again as a first
// delivery (the new consumer counts deliveries afresh); A's ack, sent to
// the consumer's name, is then accepted by the new consumer. Only one of
// them may hand the block's IDs out.
func TestBlocksConsumerRecreatedWhileABlockIsHeld(t *testing.T) {
	srv := blocksTestServer(t)
	blocksTestPublisher(t, blocksTestConn(t, srv), blocksTestGenerator(t, 1, 0),
		BlocksConfig{BlockSize: 512, BlocksTargetDepth: 4, BlocksPollInterval: 10 * time.Millisecond}, nil)

	var stalls atomic.Int32
	var heldSeq atomic.Uint64
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	held := blocksTestSourceWithHook(t, blocksTestConn(t, srv), BlockSourceConfig{LowWater: 1},
		func(meta *jetstream.MsgMetadata, _ []uint64) {
			if stalls.Add(1) == 1 {
				heldSeq.Store(meta.Sequence.Stream)
				<-release
			}
		})
	blocksWaitFor(t, 5*time.Second, "source A holds a block", func() bool { return heldSeq.Load() != 0 })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(blocksTestConn(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteConsumer(ctx, DefaultBlocksStream, DefaultBlocksConsumer); err != nil {
		t.Fatal(err)
	}
	// Source B binds afresh and takes the blocks, the held one first.
	other := blocksTestSource(t, blocksTestConn(t, srv), BlockSourceConfig{})
	buf := make([]uint64, 4*512)
	n, err := other.NextN(ctx, buf)
	if err != nil {
		t.Fatal(err)
	}
	otherIDs := slices.Clone(buf[:n])

	releaseOnce.Do(func() { close(release) })
	// A either hands out the block it held or, having given it up, the
	// next one it fetches.
	n, err = held.NextN(ctx, buf[:512])
	if err != nil {
		t.Fatal(err)
	}
	heldIDs := slices.Clone(buf[:n])
	held.Close()
	other.Close()
	blocksAssertDistinct(t, append(heldIDs, otherIDs...))
	t.Logf("held source stats %+v; other source stats %+v", held.Stats(), other.Stats())
}
