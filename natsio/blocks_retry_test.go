package natsio

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
)

// lostAckFuture is a publish whose acknowledgement never came back: the
// outcome is unknown to the publisher, although the server stored it.
type lostAckFuture struct {
	msg *nats.Msg
	err chan error
}

func (f lostAckFuture) Ok() <-chan *jetstream.PubAck { return nil }
func (f lostAckFuture) Err() <-chan error            { return f.err }
func (f lostAckFuture) Msg() *nats.Msg               { return f.msg }

// The counterexample spin found (verify/blocks.pml -DPUBLISHER_RETRY): a
// block stored, its acknowledgement lost, the block used, the stream
// deleted and created again, then the publisher's retry. The new stream
// does not remember the message ID, so a retry would store the block a
// second time and a second source would use its IDs. The publisher must
// never publish a block again once its outcome is unknown.
func TestBlockPublishWithLostAckNotRepublishedIntoRecreatedStream(t *testing.T) {
	inst := startInstance(t, startNATS(t, nil), 12, instanceOpts{})
	nc := inst.conn.Conn
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := BlocksConfig{BlockSize: 16, TargetDepth: 4, Logger: quietLogger()}
	p, err := NewBlockPublisher(ctx, nc, inst.gen, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Only the retry is under test: the publisher's own rounds stop.
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The rounds may have filled the stream (TargetDepth, discard-new)
	// before they stopped, however many a machine's load let through:
	// emptied, it has room for the attempt below.
	stream, err := js.Stream(ctx, p.cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	// And what they held when stopped is discarded: the counts below are
	// the retry's alone.
	before := p.Stats()
	ids := make([]uint64, 16)
	if n, err := inst.gen.NextN(ctx, ids); err != nil || n != len(ids) {
		t.Fatalf("NextN: %d IDs, %v", n, err)
	}
	msg := protocol.EncodeBlock(p.cfg.Subject, 12, ids)
	// The first attempt: stored (its acknowledgement, for the publisher,
	// is lost), and used by a source meanwhile.
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs == 0 {
		t.Fatalf("the first attempt was not stored: %v, %v", info, err)
	}
	if err := js.DeleteStream(ctx, p.cfg.Stream); err != nil {
		t.Fatal(err)
	}
	// Created again (by another publisher's round, or an operator).
	stream, err = ensureBlockStream(ctx, js, p.cfg.streamConfig())
	if err != nil {
		t.Fatal(err)
	}
	f := lostAckFuture{msg: msg, err: make(chan error, 1)}
	f.err <- jetstream.ErrAsyncPublishTimeout
	if got := p.await(pendingBlock{future: f, outBlock: &outBlock{msg: msg, ids: len(ids)}}); got == blockStored {
		t.Errorf("await = stored, want the block given up")
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Fatalf("the re-created stream holds %d message(s) after the retry, want 0: the block's IDs would be used twice", info.State.Msgs)
	}
	if st := p.Stats(); st.IDsDiscarded-before.IDsDiscarded != uint64(len(ids)) || st.Failed-before.Failed != 1 {
		t.Errorf("stats %+v (before the retry %+v), want the %d IDs discarded and the block counted as failed", st, before, len(ids))
	}
}

// A block the full stream refuses is not stored: the publisher holds it
// and, once there is room, publishes it again, the same message, before
// it takes new IDs; the stream stores it (the refusal left no trace of
// its message ID) and nothing of it is discarded.
func TestBlockRefusedByFullStreamHeldAndPublishedAgain(t *testing.T) {
	inst := startInstance(t, startNATS(t, nil), 13, instanceOpts{})
	nc := inst.conn.Conn
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := NewBlockPublisher(ctx, nc, inst.gen, BlocksConfig{BlockSize: 16, TargetDepth: 1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := p.js.Stream(ctx, p.cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	depth := func() uint64 {
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	testenv.WaitFor(t, 5*time.Second, "the publisher filled the stream", func() bool { return p.Stats().Published == 1 })
	// Only the rounds under test run from here, on the test goroutine.
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	blk, err := p.takeBlock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := p.js.PublishMsgAsync(blk.msg, jetstream.WithExpectStream(p.cfg.Stream))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.await(pendingBlock{future: f, outBlock: blk, sent: time.Now()}); got != blockRefused {
		t.Fatalf("await = %d, want refused (the stream holds its one block)", got)
	}
	if st := p.Stats(); st.Refused != 1 || st.IDsDiscarded != 0 || len(p.held) != 1 {
		t.Fatalf("after the refusal: stats %+v, %d held; want 1 refused, 0 discarded, the block held", st, len(p.held))
	}
	// A consumer makes room.
	if err := stream.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	cursor := inst.gen.State().Cursor
	if got := p.topUp(ctx); got != roundShort {
		t.Fatalf("topUp = %d, want the round to publish the held block", got)
	}
	if c := inst.gen.State().Cursor; c != cursor {
		t.Errorf("the round took %d new IDs; want the held block alone", c-cursor)
	}
	if d := depth(); d != 1 {
		t.Fatalf("stream holds %d blocks, want the held one", d)
	}
	raw, err := stream.GetLastMsgForSubject(ctx, p.cfg.Subject)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := raw.Header.Get(nats.MsgIdHdr), blk.msg.Header.Get(nats.MsgIdHdr); got != want {
		t.Fatalf("stream holds block %s, want the held %s", got, want)
	}
	st := p.Stats()
	if st.Published != 2 || st.Refused != 1 || st.IDsDiscarded != 0 || st.Failed != 0 || len(p.held) != 0 {
		t.Fatalf("stats %+v, %d held; want 2 published, nothing discarded or held", st, len(p.held))
	}
	if st.MaxAge <= 0 || st.MaxAge >= maxBlockAge {
		t.Errorf("MaxAge %s, want within (0, %s)", st.MaxAge, maxBlockAge)
	}

	// A held block grown older than maxBlockAge is given up, counted, and
	// a new block taken in its place.
	old := *blk
	old.first = time.Now().Add(-maxBlockAge)
	p.held = append(p.held, &old)
	next, _, err := p.nextBlock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); next == &old || len(p.held) != 0 || st.Expired != 1 || st.IDsDiscarded != uint64(old.ids) {
		t.Fatalf("stats %+v, %d held; want the old block expired, its %d IDs discarded, a new block taken", st, len(p.held), old.ids)
	}
}
