package uidclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
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
