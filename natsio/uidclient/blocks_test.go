package uidclient_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
)

// blocksTestServer starts an embedded nats-server for a blocks test and
// registers, before it, the goroutine-leak check, so the check runs after
// the server (and every connection) has shut down.
func blocksTestServer(t *testing.T) *server.Server {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	return testenv.NATS(t, nil)
}

func blocksTestConn(t *testing.T, srv *server.Server) *nats.Conn {
	t.Helper()
	return clientTestConn(t, srv.ClientURL())
}

// blocksTestGenerator is a real ring-buffer generator on a static claim.
func blocksTestGenerator(t *testing.T, worker uint64, after int64) *uidcore.CachedGenerator {
	t.Helper()
	g, err := uidcore.NewCached(uidcore.CachedOptions{
		Claim:    uidcore.StaticClaim{ID: worker, AfterSecond: after},
		TakeWait: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func blocksTestPublisher(t *testing.T, nc *nats.Conn, src natsio.BlockIDSource, cfg natsio.BlocksConfig, log *slog.Logger) *natsio.BlockPublisher {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.Logger = log
	p, err := natsio.NewBlockPublisher(ctx, nc, src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blocksTestStop(t, p) })
	return p
}

func blocksTestStop(t *testing.T, p *natsio.BlockPublisher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Error(err)
	}
}

func blocksTestSource(t *testing.T, nc *nats.Conn, cfg uidclient.BlockSourceConfig) *uidclient.BlockSource {
	t.Helper()
	return blocksTestSourceWithHook(t, nc, cfg, nil)
}

func blocksTestSourceWithHook(t *testing.T, nc *nats.Conn, cfg uidclient.BlockSourceConfig, beforeAck func(*jetstream.MsgMetadata, []uint64)) *uidclient.BlockSource {
	t.Helper()
	if cfg.FetchWait == 0 {
		cfg.FetchWait = 200 * time.Millisecond
	}
	if cfg.LossWindow == 0 {
		cfg.LossWindow = -1 // no claims: blocks_claims_test.go has them
	}
	s, err := uidclient.NewBlockSourceWithHook(nc, cfg, beforeAck)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// blocksTestDepth is the number of blocks in the stream.
// blocksTestDepthChecks counts the depth checks (stream info requests)
// made on stream from the moment it returns, by the connection that made
// them (its inbox prefix); the counts it returns are a copy.
func blocksTestDepthChecks(t *testing.T, nc *nats.Conn, stream string) func() map[string]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	sub, err := nc.Subscribe("$JS.API.STREAM.INFO."+stream, func(m *nats.Msg) {
		inbox := m.Reply
		if i := strings.LastIndexByte(inbox, '.'); i > 0 {
			inbox = inbox[:i]
		}
		mu.Lock()
		counts[inbox]++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(counts)
	}
}

// blocksTestJS is nc's JetStream API.
func blocksTestJS(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func blocksTestDepth(t *testing.T, nc *nats.Conn, stream string) uint64 {
	t.Helper()
	js := blocksTestJS(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// blocksTestSum adds up the publishers' counters (the depth left out,
// the ages at their maximum).
func blocksTestSum(pubs []*natsio.BlockPublisher) (s natsio.BlockPublisherStats) {
	for _, p := range pubs {
		st := p.Stats()
		s.Published += st.Published
		s.Refused += st.Refused
		s.Pressure += st.Pressure
		s.Failed += st.Failed
		s.Expired += st.Expired
		s.IDsPublished += st.IDsPublished
		s.IDsDiscarded += st.IDsDiscarded
		s.MaxAge = max(s.MaxAge, st.MaxAge)
		s.MaxAhead = max(s.MaxAhead, st.MaxAhead)
	}
	return s
}

// assertDistinct fails on any ID that occurs twice.
func blocksAssertDistinct(t *testing.T, ids []uint64) {
	t.Helper()
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	dups := 0
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			if dups < 5 {
				t.Errorf("ID %d handed out twice", sorted[i])
			}
			dups++
		}
	}
	if dups > 0 {
		t.Fatalf("%d duplicate IDs among %d", dups, len(ids))
	}
}

// blocksCollector takes IDs from a source with NextN until stop is set, keeping
// them all.
type blocksCollector struct {
	mu  sync.Mutex
	ids []uint64
}

func (c *blocksCollector) run(ctx context.Context, s *uidclient.BlockSource, batch int, total *atomic.Int64, goal int64) error {
	buf := make([]uint64, batch)
	var mine []uint64
	defer func() {
		c.mu.Lock()
		c.ids = append(c.ids, mine...)
		c.mu.Unlock()
	}()
	for total.Load() < goal {
		n, err := s.NextN(ctx, buf)
		mine = append(mine, buf[:n]...)
		total.Add(int64(n))
		if err != nil {
			if ctx.Err() != nil {
				return nil // the caller checks what it got
			}
			return err
		}
	}
	return nil
}

func TestBlocksThreePublishersEightConsumersAllDistinct(t *testing.T) {
	srv := blocksTestServer(t)
	const goal = 2_000_000
	cfg := natsio.BlocksConfig{PollInterval: 10 * time.Millisecond}
	var publishers []*natsio.BlockPublisher
	for w := uint64(1); w <= 3; w++ {
		publishers = append(publishers, blocksTestPublisher(t, blocksTestConn(t, srv), blocksTestGenerator(t, w, 0), cfg, nil))
	}
	var sources []*uidclient.BlockSource
	for range 8 {
		sources = append(sources, blocksTestSource(t, blocksTestConn(t, srv), uidclient.BlockSourceConfig{AckWait: 5 * time.Second}))
	}

	all := blocksTakeDistinct(t, sources, goal)

	workers := map[uint64]int{}
	layout := uidcore.DefaultLayout()
	for _, id := range all.ids {
		p, err := layout.Parse(id)
		if err != nil {
			t.Fatal(err)
		}
		workers[p.WorkerID]++
	}
	if len(workers) != 3 {
		t.Errorf("IDs came from workers %v, want all three publishers", workers)
	}
	var used uint64
	for i, s := range sources {
		st := s.Stats()
		if st.BlocksUsed == 0 {
			t.Errorf("consumer %d used no block", i)
		}
		// A redelivery is possible (a block delivered to a pull request
		// that had just expired comes back after the ack wait) and is
		// terminated; a malformed block is not.
		if st.Malformed != 0 || st.AckFailed != 0 {
			t.Errorf("consumer %d: %+v", i, st)
		}
		used += st.IDsUsed
	}
	var published uint64
	for _, p := range publishers {
		published += p.Stats().IDsPublished
	}
	if used < uint64(len(all.ids)) || published < used {
		t.Errorf("published %d IDs, consumers acknowledged %d, handed out %d", published, used, len(all.ids))
	}
	t.Logf("%d IDs from workers %v; %d IDs published", len(all.ids), workers, published)
}

func TestBlocksStalledConsumerBlockUsedOnce(t *testing.T) {
	srv := blocksTestServer(t)
	const ackWait = 300 * time.Millisecond
	blocksTestPublisher(t, blocksTestConn(t, srv), blocksTestGenerator(t, 1, 0),
		natsio.BlocksConfig{BlockSize: 512, TargetDepth: 4, PollInterval: 10 * time.Millisecond}, nil)

	// Source A stalls past the ack wait on its first block, then acks.
	var stalls atomic.Int32
	var heldSeq atomic.Uint64
	var held []uint64
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // on failure too
	stalled := blocksTestSourceWithHook(t, blocksTestConn(t, srv), uidclient.BlockSourceConfig{AckWait: ackWait, LowWater: 1},
		func(meta *jetstream.MsgMetadata, ids []uint64) {
			if stalls.Add(1) == 1 {
				held = slices.Clone(ids)
				heldSeq.Store(meta.Sequence.Stream)
				<-release
			}
		})
	testenv.WaitFor(t, 5*time.Second, "the stalled source holds a block", func() bool { return heldSeq.Load() != 0 })

	// Source B takes everything, including the redelivery of A's block.
	other := blocksTestSource(t, blocksTestConn(t, srv), uidclient.BlockSourceConfig{AckWait: ackWait})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	otherCtx, stopOther := context.WithCancel(ctx)
	defer stopOther()
	var otherIDs blocksCollector
	var total atomic.Int64
	done := make(chan error, 1)
	go func() { done <- otherIDs.run(otherCtx, other, 256, &total, 1<<62) }()
	// Past the ack wait the server redelivers A's block to B, which
	// terminates it.
	testenv.WaitFor(t, 10*time.Second, "the other source got the redelivery", func() bool { return other.Stats().Redelivered >= 1 })
	releaseOnce.Do(func() { close(release) }) // A acks late: the server still accepts it

	buf := make([]uint64, 512)
	n, err := stalled.NextN(ctx, buf)
	if err != nil {
		t.Fatal(err)
	}
	stalledIDs := buf[:n]
	// JetStream confirms the late ack, so the stalled source uses the
	// block it held; the other source terminated its redelivery.
	// (It may have pulled a second block with the first: pulls take up to
	// two.)
	if st := stalled.Stats(); st.BlocksUsed < 1 || st.AckFailed != 0 || !slices.Equal(stalledIDs, held) {
		t.Fatalf("stalled source stats %+v; handed out %d IDs, held %d: want the late-acknowledged block used", st, len(stalledIDs), len(held))
	}
	usedBefore := other.Stats().BlocksUsed
	testenv.WaitFor(t, 10*time.Second, "the other source takes more blocks", func() bool { return other.Stats().BlocksUsed >= usedBefore+2 })
	stopOther()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	stalled.Close()
	other.Close()
	blocksAssertDistinct(t, append(slices.Clone(stalledIDs), otherIDs.ids...))
	if st := other.Stats(); st.Redelivered < 1 {
		t.Fatalf("the other source never got the redelivery (stats %+v): the test did not exercise the late ack", st)
	}
	t.Logf("stalled source used stream seq %d (%d IDs); other source terminated %d redeliveries and handed out %d IDs",
		heldSeq.Load(), len(stalledIDs), other.Stats().Redelivered, len(otherIDs.ids))
}

func TestBlocksFullStreamPublishersBackOffAndResume(t *testing.T) {
	srv := blocksTestServer(t)
	var logs testenv.LogBuffer
	log := logs.Logger(slog.LevelDebug)
	const depth, size = 8, 256
	cfg := natsio.BlocksConfig{BlockSize: size, TargetDepth: depth, PollInterval: 20 * time.Millisecond}
	nc := blocksTestConn(t, srv)
	pubs := []*natsio.BlockPublisher{
		blocksTestPublisher(t, blocksTestConn(t, srv), blocksTestGenerator(t, 10, 0), cfg, log),
		blocksTestPublisher(t, blocksTestConn(t, srv), blocksTestGenerator(t, 11, 0), cfg, log),
	}
	sum := func() natsio.BlockPublisherStats { return blocksTestSum(pubs) }
	// The stream may count the blocks before the publishers have their
	// acknowledgements: wait for both.
	testenv.WaitFor(t, 5*time.Second, "the stream filled", func() bool {
		return blocksTestDepth(t, nc, protocol.DefaultBlocksStream) == depth && sum().Published == depth
	})

	// Full: the publishers only check the depth; nothing is published or
	// refused, nothing is logged above debug. Three more checks by each
	// publisher prove that what the first two would have led to is done.
	checks := blocksTestDepthChecks(t, nc, protocol.DefaultBlocksStream)
	before := sum()
	start := checks()
	testenv.WaitFor(t, 30*time.Second, "each publisher checked the full stream's depth three more times", func() bool {
		now, more := checks(), 0
		for inbox, n := range now {
			if n-start[inbox] >= 3 {
				more++
			}
		}
		return more >= len(pubs)
	})
	after := sum()
	if d := blocksTestDepth(t, nc, protocol.DefaultBlocksStream); d != depth {
		t.Fatalf("stream holds %d blocks, cap %d", d, depth)
	}
	if after != before {
		t.Fatalf("a full stream kept the publishers busy: %+v then %+v", before, after)
	}
	if after.Published != depth || after.Failed != 0 {
		t.Fatalf("publishers stored %d blocks (failed %d) for a stream of %d", after.Published, after.Failed, depth)
	}
	if strings.Contains(logs.String(), "level=WARN") || strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("warnings while the stream was full:\n%s", logs.String())
	}

	// A consumer drains 20 blocks: the publishers top the stream up again.
	src := blocksTestSource(t, blocksTestConn(t, srv), uidclient.BlockSourceConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ids := make([]uint64, 20*size)
	if _, err := src.NextN(ctx, ids); err != nil {
		t.Fatal(err)
	}
	blocksAssertDistinct(t, ids)
	testenv.WaitFor(t, 5*time.Second, "the publishers resumed and refilled the stream", func() bool {
		return sum().Published >= depth+20 && blocksTestDepth(t, nc, protocol.DefaultBlocksStream) == depth
	})
	if st := sum(); st.Failed != 0 {
		t.Fatalf("publisher stats %+v", st)
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("warnings while topping up:\n%s", logs.String())
	}
	t.Logf("publishers: %+v", sum())
}

// Consumers outrunning the generator: blocks of runs wait for the
// lanes' next second without a word; binary blocks, taken through the
// ring, find it dry and the publisher says so once. Either way it keeps
// publishing what the generator issues at wall-clock pace, and the
// consumer reads both forms.
func TestBlocksPublisherOutrunByConsumers(t *testing.T) {
	for _, binary := range []bool{false, true} {
		t.Run(fmt.Sprintf("binary=%v", binary), func(t *testing.T) { testBlocksPublisherOutrunByConsumers(t, binary) })
	}
}

func testBlocksPublisherOutrunByConsumers(t *testing.T, binary bool) {
	srv := blocksTestServer(t)
	var logs testenv.LogBuffer
	log := logs.Logger(slog.LevelInfo)
	// 1,024 IDs per second, at most one second ahead: 2,048 at start.
	g, err := uidcore.NewCached(uidcore.CachedOptions{
		Layout:   uidcore.Layout{TimeBits: 31, WorkerBits: 22, SeqBits: 10, Epoch: uidcore.DefaultLayout().Epoch},
		Claim:    uidcore.StaticClaim{ID: 9},
		MaxAhead: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	p := blocksTestPublisher(t, blocksTestConn(t, srv), g,
		natsio.BlocksConfig{BlockSize: 128, TargetDepth: 8, PollInterval: 20 * time.Millisecond, BinaryBlocks: binary}, log)
	src := blocksTestSource(t, blocksTestConn(t, srv), uidclient.BlockSourceConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ids := make([]uint64, 4_000)
	if _, err := src.NextN(ctx, ids); err != nil {
		t.Fatal(err)
	}
	blocksAssertDistinct(t, ids)
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); binary && (n != 1 || !strings.Contains(out, "taking IDs failed") || !strings.Contains(out, "ring buffer empty")) {
		t.Fatalf("%d warnings, want one about the empty ring:\n%s", n, out)
	} else if !binary && n != 0 {
		t.Fatalf("%d warnings, want none: runs wait for the next second:\n%s", n, out)
	}
	// A block can reach the consumer before its publish acknowledgement
	// reaches the publisher, which counts it then.
	testenv.WaitFor(t, 5*time.Second, "the publisher to count the IDs the consumer took", func() bool { return p.Stats().IDsPublished >= uint64(len(ids)) })
	if st := p.Stats(); st.Failed != 0 {
		t.Fatalf("publisher stats %+v", st)
	}
}

func TestBlocksRestartedPublisherOldBlocksStillUsedNoCollision(t *testing.T) {
	srv := blocksTestServer(t)
	const worker, depth, size = 7, 16, 1024
	cfg := natsio.BlocksConfig{BlockSize: size, TargetDepth: depth, PollInterval: 10 * time.Millisecond}
	nc := blocksTestConn(t, srv)

	// The first incarnation fills the stream, then stops.
	first := blocksTestGenerator(t, worker, 0)
	p1 := blocksTestPublisher(t, blocksTestConn(t, srv), first, cfg, nil)
	testenv.WaitFor(t, 5*time.Second, "the stream filled", func() bool { return blocksTestDepth(t, nc, protocol.DefaultBlocksStream) == depth })
	blocksTestStop(t, p1)
	first.Close()
	// A leased worker ID comes back with After = the last second the
	// previous holder reserved; here: the last second its ring reached.
	after := first.State().LogicalSecond

	// The second incarnation on the same worker ID serves requests and
	// publishes blocks while the old blocks are still in the stream.
	second := blocksTestGenerator(t, worker, after)
	blocksTestPublisher(t, blocksTestConn(t, srv), second, cfg, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	direct := make([]uint64, 50_000)
	if n, err := second.NextN(ctx, direct); err != nil || n != len(direct) {
		t.Fatalf("direct take: %d, %v", n, err)
	}

	src := blocksTestSource(t, blocksTestConn(t, srv), uidclient.BlockSourceConfig{})
	fromBlocks := make([]uint64, 3*depth*size)
	if _, err := src.NextN(ctx, fromBlocks); err != nil {
		t.Fatal(err)
	}
	layout := uidcore.DefaultLayout()
	old := 0
	for _, id := range fromBlocks {
		p := uidcoretest.MustParse(t, layout.Parse, id)
		if p.WorkerID != worker {
			t.Fatalf("ID %d of worker %d", id, p.WorkerID)
		}
		if p.Time.Unix() <= after {
			old++
		}
	}
	if old != depth*size {
		t.Fatalf("%d IDs of the first incarnation's blocks consumed, want all %d", old, depth*size)
	}
	for _, id := range direct {
		if p := uidcoretest.MustParse(t, layout.Parse, id); p.Time.Unix() <= after {
			t.Fatalf("new claim issued ID %d in second %d, not after %d", id, p.Time.Unix(), after)
		}
	}
	blocksAssertDistinct(t, append(slices.Clone(direct), fromBlocks...))
}

func TestBlocksMalformedBlockTerminatedAndReported(t *testing.T) {
	srv := blocksTestServer(t)
	nc := blocksTestConn(t, srv)
	var logs testenv.LogBuffer
	log := logs.Logger(slog.LevelInfo)
	p := blocksTestPublisher(t, nc, blocksTestGenerator(t, 3, 0),
		natsio.BlocksConfig{BlockSize: 64, TargetDepth: 3, PollInterval: 10 * time.Millisecond}, nil)
	testenv.WaitFor(t, 5*time.Second, "the stream filled", func() bool { return blocksTestDepth(t, nc, protocol.DefaultBlocksStream) == 3 })
	blocksTestStop(t, p)

	// Put garbage first in line: drain the three blocks with a source,
	// then publish bad blocks by hand.
	js := blocksTestJS(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	good := protocol.EncodeBlock(protocol.DefaultBlocksSubject, 3, []uint64{100, 200, 300})
	badCount := protocol.EncodeBlock(protocol.DefaultBlocksSubject, 3, []uint64{5, 6, 7})
	badCount.Header.Set(protocol.HeaderBlockCount, "2")
	badCount.Header.Set(jetstream.MsgIDHeader, "bad-count")
	torn := protocol.EncodeBlock(protocol.DefaultBlocksSubject, 3, []uint64{8, 9})
	torn.Data = torn.Data[:12]
	torn.Header.Set(jetstream.MsgIDHeader, "torn")

	src := blocksTestSource(t, blocksTestConn(t, srv), uidclient.BlockSourceConfig{LowWater: 1, Logger: log})
	drained := make([]uint64, 3*64)
	if _, err := src.NextN(ctx, drained); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*nats.Msg{badCount, torn, good} {
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]uint64, 3)
	if _, err := src.NextN(ctx, got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []uint64{100, 200, 300}) {
		t.Fatalf("got %v, want the good block's IDs", got)
	}
	if st := src.Stats(); st.Malformed != 2 || st.BlocksUsed != 4 {
		t.Fatalf("stats %+v, want 2 malformed and 4 used", st)
	}
	if n := strings.Count(logs.String(), "malformed block"); n != 2 {
		t.Fatalf("%d reports of malformed blocks, want 2:\n%s", n, logs.String())
	}
	testenv.WaitFor(t, 5*time.Second, "the terminated blocks left the stream", func() bool {
		return blocksTestDepth(t, nc, protocol.DefaultBlocksStream) == 0
	})
}

func TestBlockSourceWaitsForTheStreamAndClosesCleanly(t *testing.T) {
	srv := blocksTestServer(t)
	var logs testenv.LogBuffer
	src := blocksTestSource(t, blocksTestConn(t, srv), uidclient.BlockSourceConfig{Stream: "LATE_BLOCKS",
		Logger: logs.Logger(slog.LevelInfo)})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	_, err := src.Next(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next without a stream: %v, want a deadline error", err)
	}

	// The dispensers start later: the source binds and serves.
	blocksTestPublisher(t, blocksTestConn(t, srv), blocksTestGenerator(t, 4, 0),
		natsio.BlocksConfig{Stream: "LATE_BLOCKS", Subject: "late.blocks", BlockSize: 100, TargetDepth: 2}, nil)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := src.Next(ctx)
	if err != nil || id == 0 {
		t.Fatalf("Next: %d, %v", id, err)
	}
	// The missing stream was reported once, then its recovery.
	if out := logs.String(); strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "stream not found") || !strings.Contains(out, "recovered") {
		t.Errorf("log while the stream was missing:\n%s", out)
	}

	// Takers waiting when the source closes return at once. The taker
	// wants 10,000 blocks from a stream that holds 2: once it has used 3
	// more, it has drained what was at hand and waited for the publisher.
	used := src.Stats().BlocksUsed
	waiting := make(chan error, 1)
	go func() {
		buf := make([]uint64, 1_000_000)
		_, err := src.NextN(ctx, buf)
		waiting <- err
	}()
	testenv.WaitFor(t, 30*time.Second, "the taker used three more blocks", func() bool { return src.Stats().BlocksUsed >= used+3 })
	src.Close()
	if err := <-waiting; !errors.Is(err, uidclient.ErrBlockSourceClosed) {
		t.Fatalf("NextN across Close: %v", err)
	}
	if _, err := src.Next(ctx); !errors.Is(err, uidclient.ErrBlockSourceClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
}

// Three publishers with the default bounds (MaxAhead 2 s) race to top up
// a stream of four blocks while four consumers drain it: publishes are
// refused all the time, yet the refused blocks are held and published
// again, so that the publishers discard only blocks that expired (held
// past 2 s, which takes a starved machine while running; and what each
// held when it stopped), never a refused one. Every ID consumed is
// distinct. (BenchmarkBlocksSustained measures the fraction discarded.)
func TestBlocksRacingPublishersDiscardNothingAllDistinct(t *testing.T) {
	srv := blocksTestServer(t)
	const goal, size, depth = 400_000, 1024, 4
	cfg := natsio.BlocksConfig{BlockSize: size, TargetDepth: depth, PollInterval: 10 * time.Millisecond}
	var publishers []*natsio.BlockPublisher
	for w := uint64(21); w <= 23; w++ {
		publishers = append(publishers, blocksTestPublisher(t, blocksTestConn(t, srv), blocksTestGenerator(t, w, 0), cfg, nil))
	}
	sum := func() natsio.BlockPublisherStats { return blocksTestSum(publishers) }
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var total atomic.Int64
	var all blocksCollector
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		s := blocksTestSource(t, blocksTestConn(t, srv), uidclient.BlockSourceConfig{})
		wg.Go(func() {
			if err := all.run(ctx, s, 4096, &total, goal); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	running := sum()
	if len(all.ids) < goal {
		t.Fatalf("got %d IDs, want at least %d", len(all.ids), goal)
	}
	blocksAssertDistinct(t, all.ids)
	if running.Refused == 0 {
		t.Fatalf("no publish was refused (%+v): the publishers did not race", running)
	}
	if running.IDsDiscarded != running.Expired*size || running.Failed != 0 {
		t.Fatalf("while running: %+v, want only expired blocks discarded", running)
	}
	for _, p := range publishers {
		blocksTestStop(t, p)
	}
	stopped := sum()
	if held := uint64(len(publishers)) * 8 * size; stopped.IDsDiscarded-running.IDsDiscarded > held || stopped.IDsDiscarded != stopped.Expired*size || stopped.Failed != 0 {
		t.Fatalf("stopped: %+v, want only the held blocks (at most %d IDs) discarded at the stop", stopped, held)
	}
	t.Logf("%d IDs consumed; publishers %+v (%.3f%% of the IDs taken discarded, the stop included)", len(all.ids), stopped,
		100*float64(stopped.IDsDiscarded)/float64(stopped.IDsPublished+stopped.IDsDiscarded))
}

// blocksTakeDistinct takes at least goal IDs from sources, two takers a
// source (batches of 1,000 and of 37, spanning blocks), and checks that
// they are distinct.
func blocksTakeDistinct(t *testing.T, sources []*uidclient.BlockSource, goal int64) *blocksCollector {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var total atomic.Int64
	all := &blocksCollector{}
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(sources))
	for _, s := range sources {
		for _, batch := range []int{1000, 37} {
			wg.Go(func() {
				if err := all.run(ctx, s, batch, &total, goal); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if int64(len(all.ids)) < goal {
		t.Fatalf("got %d IDs, want at least %d", len(all.ids), goal)
	}
	blocksAssertDistinct(t, all.ids)
	return all
}

// With LowWater left at its default, a source follows the size of the
// blocks it gets: with blocks of 200,000 IDs (six default blocks) it
// fetches the next one as soon as the only one at hand comes into use,
// not when fewer than a default block's 32,768 IDs remain.
func TestBlockSourceLowWaterFollowsTheBlockSize(t *testing.T) {
	srv := blocksTestServer(t)
	blocksTestPublisher(t, blocksTestConn(t, srv), blocksTestGenerator(t, 4, 0),
		natsio.BlocksConfig{BlockSize: 200_000, TargetDepth: 4, PollInterval: 10 * time.Millisecond}, nil)
	src := blocksTestSource(t, blocksTestConn(t, srv), uidclient.BlockSourceConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := src.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "a second block fetched while the first has 199,999 IDs left", func() bool {
		return src.Stats().BlocksUsed >= 2
	})
	ids := make([]uint64, 300_000) // the rest of the first block, and into the second
	if _, err := src.NextN(ctx, ids); err != nil {
		t.Fatal(err)
	}
	blocksAssertDistinct(t, append(ids, first))
}
