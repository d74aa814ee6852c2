package natsio

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	cfg := BlocksConfig{BlockSize: 16, BlocksTargetDepth: 4, Logger: quietLogger()}
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
	ids := make([]uint64, 16)
	if n, err := inst.gen.NextN(ctx, ids); err != nil || n != len(ids) {
		t.Fatalf("NextN: %d IDs, %v", n, err)
	}
	msg := protocol.EncodeBlock(p.cfg.BlocksSubject, 12, ids)
	// The first attempt: stored (its acknowledgement, for the publisher,
	// is lost), and used by a source meanwhile.
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, p.cfg.BlocksStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs == 0 {
		t.Fatalf("the first attempt was not stored: %v, %v", info, err)
	}
	if err := js.DeleteStream(ctx, p.cfg.BlocksStream); err != nil {
		t.Fatal(err)
	}
	// Created again (by another publisher's round, or an operator).
	stream, err = ensureBlockStream(ctx, js, p.cfg.streamConfig())
	if err != nil {
		t.Fatal(err)
	}
	f := lostAckFuture{msg: msg, err: make(chan error, 1)}
	f.err <- jetstream.ErrAsyncPublishTimeout
	if got := p.await(ctx, pendingBlock{future: f, ids: len(ids)}); got == blockStored {
		t.Errorf("await = stored, want the block given up")
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Fatalf("the re-created stream holds %d message(s) after the retry, want 0: the block's IDs would be used twice", info.State.Msgs)
	}
	if st := p.Stats(); st.IDsDiscarded != uint64(len(ids)) || st.Failed != 1 {
		t.Errorf("stats %+v, want the %d IDs discarded and the block counted as failed", st, len(ids))
	}
}
