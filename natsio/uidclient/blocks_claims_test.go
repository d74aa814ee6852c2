package uidclient_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// claimsTestStream creates the default blocks stream and its claims
// bucket as a publisher would, without a publisher: the test publishes
// the blocks itself, so that it can put a used block back as a restored
// store would.
func claimsTestStream(t *testing.T, nc *nats.Conn) (jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	js := blocksTestJS(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, natsio.BlocksConfig{}.StreamConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: protocol.BlockClaimsBucket(protocol.DefaultBlocksStream), TTL: protocol.BlockClaimsTTL}); err != nil {
		t.Fatal(err)
	}
	claims, err := js.Stream(ctx, "KV_"+protocol.BlockClaimsBucket(protocol.DefaultBlocksStream))
	if err != nil {
		t.Fatal(err)
	}
	return js, claims
}

// claimsTestBlock publishes a block of count IDs from first as a new
// message (no message ID: a restored store brings a block back whatever
// the duplicate window holds).
func claimsTestBlock(t *testing.T, js jetstream.JetStream, first, count uint64) {
	t.Helper()
	msg := protocol.EncodeBlockRuns(protocol.DefaultBlocksSubject, 1, []protocol.Run{{First: first, Count: count}})
	msg.Header.Del(nats.MsgIdHdr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
}

// claimsTestSource is a source with the default loss window W whose wait
// of W is wait (nil: none), and whose fetcher calls idle (when not nil)
// each time it waits to be woken.
func claimsTestSource(t *testing.T, nc *nats.Conn, wait func(context.Context, time.Duration) error, idle func()) *uidclient.BlockSource {
	t.Helper()
	if wait == nil {
		wait = func(context.Context, time.Duration) error { return nil }
	}
	s, err := uidclient.NewBlockSourceWithClaimWait(nc, uidclient.BlockSourceConfig{FetchWait: 200 * time.Millisecond, LowWater: 1}, wait, idle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// claimsTestPullsEnded waits until the server holds no pull of the
// default consumer. A block published while a pull of a source that asks
// no more (closed, or idle) is pending would go to that pull and, never
// acknowledged, come back only as a redelivery, which every source
// refuses.
func claimsTestPullsEnded(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, protocol.DefaultBlocksStream, uidclient.DefaultBlocksConsumer)
	if err != nil {
		t.Fatal(err)
	}
	testwait.WaitFor(t, 5*time.Second, "the pulls pending at the server to end", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumWaiting == 0
	})
}

// claimsTestTake takes n IDs from s and checks that they are first..first+n-1.
func claimsTestTake(t *testing.T, s *uidclient.BlockSource, first uint64, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := make([]uint64, n)
	if got, err := s.NextN(ctx, ids); err != nil || got != n {
		t.Fatalf("took %d of %d IDs: %v", got, n, err)
	}
	for i, id := range ids {
		if id != first+uint64(i) {
			t.Fatalf("ID %d is %d, want %d (block from %d)", i, id, first+uint64(i), first)
		}
	}
}

// TestBlockWhoseRemovalIsForgottenIsRefusedBySecondSource: source A uses
// a block; the stream forgets its removal (the block back as a first
// delivery, as a store restored from before the ack would have it); source
// B gets it and passes rules 1 to 3 (verify/blocks.pml, finding
// DESIGN_MEMORY_AGE), but its claim, a Create of the block's key, finds
// A's: the block is refused and B hands out none of its IDs. Without the
// claims B used it (the test fails with LossWindow -1).
func TestBlockWhoseRemovalIsForgottenIsRefusedBySecondSource(t *testing.T) {
	srv := blocksTestServer(t)
	js, _ := claimsTestStream(t, blocksTestConn(t, srv))
	const first, count = 1_000_000, 64
	claimsTestBlock(t, js, first, count)
	a := claimsTestSource(t, blocksTestConn(t, srv), nil, nil)
	claimsTestTake(t, a, first, count)
	a.Close() // B is refused by the store's claim, not by A's memory
	claimsTestPullsEnded(t, js)

	claimsTestBlock(t, js, first, count) // the forgotten removal
	b := claimsTestSource(t, blocksTestConn(t, srv), nil, nil)
	testwait.WaitFor(t, 5*time.Second, "source B refuses the block used before", func() bool { return b.Stats().ClaimRefused == 1 })
	claimsTestBlock(t, js, first+count, count) // a fresh block: B goes on with it
	claimsTestTake(t, b, first+count, count)
	if st := b.Stats(); st.BlocksUsed != 1 || st.ClaimRefused != 1 || st.ClaimFailed != 0 {
		t.Fatalf("source B: %+v; want 1 block used, 1 refused", st)
	}
}

// TestBlockClaimForgottenWithinTheWindowIsRefusedAtTheReadBack: source A
// claims a block and waits out W; within W the store forgets the block's
// removal and A's claim with it; source B gets the block, claims it and,
// its own W over, uses it. When A's wait ends, it reads the claim back at
// the stream leader, finds B's and refuses the block: its next IDs come
// from the next block.
func TestBlockClaimForgottenWithinTheWindowIsRefusedAtTheReadBack(t *testing.T) {
	srv := blocksTestServer(t)
	js, claims := claimsTestStream(t, blocksTestConn(t, srv))
	const first, count = 2_000_000, 64
	claimsTestBlock(t, js, first, count)
	release := make(chan struct{})
	var waitedFor atomic.Int64
	var idleInWait atomic.Bool // A's fetcher idle since A began its wait
	a := claimsTestSource(t, blocksTestConn(t, srv), func(ctx context.Context, d time.Duration) error {
		waitedFor.Store(int64(d))
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, func() {
		if waitedFor.Load() != 0 {
			idleInWait.Store(true)
		}
	})
	key := "$KV." + protocol.BlockClaimsBucket(protocol.DefaultBlocksStream) + "." + protocol.BlockClaimKey(first)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A creates its claim, then starts its wait: the claim in the store
	// does not mean A is waiting yet.
	testwait.WaitFor(t, 5*time.Second, "source A's claim and A in its wait", func() bool {
		_, err := claims.GetLastMsgForSubject(ctx, key)
		return err == nil && waitedFor.Load() != 0
	})
	if d := time.Duration(waitedFor.Load()); d <= 0 || d > uidclient.DefaultBlocksLossWindow {
		t.Errorf("A waits %s before reading its claim back, want up to W = %s", d, uidclient.DefaultBlocksLossWindow)
	}

	// A pulls no more (its claimed block counts as at hand, LowWater 1):
	// once its fetcher is idle in its wait (a pull it began while the
	// block was being checked would otherwise still be on its way to the
	// server) and the server holds none of its pulls, the block put back
	// goes to B.
	testwait.WaitFor(t, 5*time.Second, "source A's fetcher idle during its wait", idleInWait.Load)
	claimsTestPullsEnded(t, js)

	// The loss: A's claim gone, the block back in the stream.
	if err := claims.Purge(ctx, jetstream.WithPurgeSubject(key)); err != nil {
		t.Fatal(err)
	}
	claimsTestBlock(t, js, first, count)
	b := claimsTestSource(t, blocksTestConn(t, srv), nil, nil)
	claimsTestTake(t, b, first, count)
	b.Close() // the next block goes to A
	claimsTestPullsEnded(t, js)

	close(release)
	testwait.WaitFor(t, 5*time.Second, "source A refuses the block at the read-back", func() bool { return a.Stats().ClaimRefused == 1 })
	claimsTestBlock(t, js, first+count, count)
	claimsTestTake(t, a, first+count, count)
	if st := a.Stats(); st.BlocksUsed != 1 || st.ClaimRefused != 1 {
		t.Fatalf("source A: %+v; want 1 block used, 1 refused", st)
	}
}

// TestBlocksClaimedSourcesAllDistinct: three publishers (which create the
// claims bucket), six sources each claiming every block, waiting out a
// real loss window of 50ms and reading the claim back, two takers each:
// every ID is distinct, no block is refused (nothing was lost), and every
// block a source used was claimed by it alone.
func TestBlocksClaimedSourcesAllDistinct(t *testing.T) {
	srv := blocksTestServer(t)
	const goal = 300_000
	cfg := natsio.BlocksConfig{PollInterval: 10 * time.Millisecond, BlockSize: 4096}
	for w := uint64(1); w <= 3; w++ {
		blocksTestPublisher(t, blocksTestConn(t, srv), blocksTestGenerator(t, w, 0), cfg, nil)
	}
	var sources []*uidclient.BlockSource
	for range 6 {
		sources = append(sources, blocksTestSource(t, blocksTestConn(t, srv), uidclient.BlockSourceConfig{
			AckWait: 5 * time.Second, LossWindow: 50 * time.Millisecond, LowWater: 3 * 4096}))
	}
	all := blocksTakeDistinct(t, sources, goal)
	var used uint64
	for i, s := range sources {
		st := s.Stats()
		if st.ClaimRefused != 0 || st.ClaimFailed != 0 {
			t.Errorf("source %d: %+v; want no claim refused or failed", i, st)
		}
		used += st.BlocksUsed
	}
	if used == 0 {
		t.Fatal("no block used")
	}
	t.Logf("%d IDs distinct from %d claimed blocks", len(all.ids), used)
}

// TestBlockSourceClaimsFurtherAheadWhenTakersWait: a source whose
// LowWater is one block delivers at most a block per loss window at
// first; its takers wait, and it doubles how far ahead it claims until
// they are served: 64 blocks' worth of IDs come through, and the depth
// has grown past LowWater.
func TestBlockSourceClaimsFurtherAheadWhenTakersWait(t *testing.T) {
	srv := blocksTestServer(t)
	const size = 1024
	blocksTestPublisher(t, blocksTestConn(t, srv), blocksTestGenerator(t, 1, 0), natsio.BlocksConfig{BlockSize: size, PollInterval: 10 * time.Millisecond}, nil)
	s := blocksTestSource(t, blocksTestConn(t, srv), uidclient.BlockSourceConfig{LossWindow: 20 * time.Millisecond, LowWater: size})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids := make([]uint64, 64*size)
	if n, err := s.NextN(ctx, ids); err != nil || n != len(ids) {
		t.Fatalf("took %d of %d IDs: %v", n, len(ids), err)
	}
	blocksAssertDistinct(t, ids)
	if st := s.Stats(); st.ClaimAhead <= size || st.ClaimRefused != 0 {
		t.Fatalf("stats %+v: want the depth grown past LowWater (%d), nothing refused", st, size)
	}
	t.Logf("claimed ahead: %d IDs", s.Stats().ClaimAhead)
}

// TestBlockSourceWaitsForTheClaimsBucket: a claiming source on a stream
// whose claims bucket does not exist yet (its publishers predate the
// claims) pulls nothing, so no block is acknowledged and then lost; once
// the bucket exists it uses the block.
func TestBlockSourceWaitsForTheClaimsBucket(t *testing.T) {
	srv := blocksTestServer(t)
	js := blocksTestJS(t, blocksTestConn(t, srv))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := js.CreateStream(ctx, natsio.BlocksConfig{}.StreamConfig())
	if err != nil {
		t.Fatal(err)
	}
	const first, count = 3_000_000, 64
	claimsTestBlock(t, js, first, count)
	s := claimsTestSource(t, blocksTestConn(t, srv), nil, nil)
	// The source keeps trying to bind: each try reads the bucket at the
	// leader; wait for a few, then check the block is still there.
	var reads atomic.Int64
	sub, err := blocksTestConn(t, srv).Subscribe("$JS.API.STREAM.MSG.GET.KV_"+protocol.BlockClaimsBucket(protocol.DefaultBlocksStream), func(*nats.Msg) { reads.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	testwait.WaitFor(t, 10*time.Second, "the source's checks of the missing bucket", func() bool { return reads.Load() >= 2 })
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("the block was taken from the stream without a claims bucket (%v)", err)
	}
	if st := s.Stats(); st.ClaimFailed != 0 || st.BlocksUsed != 0 {
		t.Fatalf("stats %+v: want nothing pulled", st)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: protocol.BlockClaimsBucket(protocol.DefaultBlocksStream), TTL: protocol.BlockClaimsTTL}); err != nil {
		t.Fatal(err)
	}
	claimsTestTake(t, s, first, count)
}
