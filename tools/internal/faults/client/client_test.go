package client

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/history"
)

func connect(t *testing.T) *nats.Conn {
	t.Helper()
	srv := testenv.NATS(t, nil)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// A call retries the failures that handed nothing out (two 503s here)
// and records the answer it got in the end, with its attempts; without
// retry it records the first 503.
func TestRequestRetries503(t *testing.T) {
	nc := connect(t)
	var n atomic.Int64
	sub, err := nc.Subscribe("uid.batch", func(m *nats.Msg) {
		reply := nats.NewMsg(m.Reply)
		if n.Add(1)%3 != 0 {
			reply.Header.Set("Nats-Service-Error-Code", "503")
			reply.Header.Set("Nats-Service-Error", "worker claim lost: worker ID 1")
		} else {
			reply.Data = []byte("7\n8")
		}
		_ = m.RespondMsg(reply)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	op := history.Op{Process: "c0/0", Call: 1, Func: history.FuncIDs, Count: 2}
	mover := uidclient.NewMover(nc, uidclient.MoveConfig{})
	got := request(nc, mover, "uid.batch", op, time.Minute, time.Second, true)
	if got.Type != history.OK || len(got.Values) != 2 || got.Attempts != 3 {
		t.Fatalf("with retry: %+v", got)
	}
	got = request(nc, mover, "uid.batch", op, time.Minute, time.Second, false)
	if got.Type != history.Fail || got.Error != "503 worker claim lost: worker ID 1" || got.Attempts != 1 {
		t.Fatalf("without retry: %+v", got)
	}
}

// An attempt that timed out may have been served, and is asked again
// as uidclient asks it: the call is ok with the reply that came. A call
// whose attempts all timed out is unknown, and one whose later attempt
// failed for certain stays unknown (its first may have been served).
func TestRequestRetriesAnAttemptThatTimedOut(t *testing.T) {
	nc := connect(t)
	var n atomic.Int64
	sub, err := nc.Subscribe("uid.batch", func(m *nats.Msg) {
		switch n.Add(1) {
		case 1: // held: the attempt times out
		case 2:
			_ = m.Respond([]byte("7\n8"))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	op := history.Op{Process: "c0/0", Call: 1, Func: history.FuncIDs, Count: 2}
	mover := uidclient.NewMover(nc, uidclient.MoveConfig{After: -1})
	got := request(nc, mover, "uid.batch", op, time.Minute, 100*time.Millisecond, true)
	if got.Type != history.OK || len(got.Values) != 2 || got.Attempts != 2 {
		t.Fatalf("a timed-out attempt then a reply: %+v", got)
	}
	n.Store(10) // every later request held
	got = request(nc, mover, "uid.batch", op, time.Second, 100*time.Millisecond, true)
	if got.Type != history.Unknown || got.Attempts < 2 {
		t.Fatalf("every attempt timed out: %+v", got)
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// No responders after no attempt that timed out is a certain failure
	// (the next test); here the call began with an attempt held by a
	// responder that then left, so it stays unknown.
	// The responder takes the first request and leaves without answering.
	var held *nats.Subscription
	left := make(chan struct{})
	held, err = nc.Subscribe("uid.batch", func(*nats.Msg) {
		_ = held.Unsubscribe()
		close(left)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	got = request(nc, mover, "uid.batch", op, 5*time.Second, 500*time.Millisecond, true)
	<-left
	if got.Type != history.Unknown || !strings.Contains(got.Error, "then no responders") {
		t.Fatalf("a timed-out attempt then no responders: %+v", got)
	}
}

// No responders is retried until the call's timeout leaves no time for
// another request; then the call failed (nothing was handed out).
func TestRequestNoRespondersFailsAtItsTimeout(t *testing.T) {
	nc := connect(t)
	op := history.Op{Process: "c0/0", Call: 1, Func: history.FuncIDs, Count: 1}
	got := request(nc, uidclient.NewMover(nc, uidclient.MoveConfig{}), "uid.batch", op, 2*time.Second, time.Second, true)
	if got.Type != history.Fail || got.Error != "no responders" || got.Attempts < 2 {
		t.Fatalf("%+v", got)
	}
}

// The client's requests go through the product's move: on a connection
// whose pool holds two servers and no responders anywhere, a call moves
// the connection to the other server; with MoveAfter negative it never
// does.
func TestRequestMovesOffAServerWithoutResponders(t *testing.T) {
	first, second := testenv.NATS(t, nil), testenv.NATS(t, nil)
	for _, moveAfter := range []int{0, -1} {
		nc, err := nats.Connect(first.ClientURL()+","+second.ClientURL(), nats.DontRandomize())
		if err != nil {
			t.Fatal(err)
		}
		mover := uidclient.NewMover(nc, uidclient.MoveConfig{After: moveAfter, Logger: slog.New(slog.DiscardHandler)})
		op := history.Op{Process: "c0/0", Call: 1, Func: history.FuncIDs, Count: 1}
		got := request(nc, mover, "uid.batch", op, 2*time.Second, time.Second, true)
		if got.Type != history.Fail || got.Attempts < 2 {
			t.Errorf("MoveAfter %d: %+v", moveAfter, got)
		}
		if moved := mover.Moves() > 0; moved != (moveAfter == 0) {
			t.Errorf("MoveAfter %d: %d moves after %d attempts", moveAfter, mover.Moves(), got.Attempts)
		}
		nc.Close()
	}
}

// Each fleet has a Mover of its own, as each uidclient.Client has: calls
// to a fleet that answers, interleaved with calls to one that gets no
// responders, still move the connection. With one Mover for both (before
// newMovers) the answered fleet's replies reset the count after every
// no responders, and a client on a server cut off from one fleet's
// members never moved while the other fleet answered there.
func TestRequestMovesForAFleetWithoutRespondersBesideOneThatAnswers(t *testing.T) {
	first, second := testenv.NATS(t, nil), testenv.NATS(t, nil)
	nc, err := nats.Connect(first.ClientURL()+","+second.ClientURL(), nats.DontRandomize())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.Subscribe("uid.batch", func(m *nats.Msg) { _ = m.Respond([]byte("7")) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	movers := newMovers(nc, []string{"uid", "uidmy"}, 0, slog.New(slog.DiscardHandler))
	op := history.Op{Process: "c0/0", Call: 1, Func: history.FuncIDs, Count: 1}
	for range 2 {
		if got := request(nc, movers["uid"], "uid.batch", op, time.Minute, time.Second, false); got.Type != history.OK {
			t.Fatalf("the fleet that answers: %+v", got)
		}
		if got := request(nc, movers["uidmy"], "uidmy.batch", op, time.Minute, time.Second, false); got.Error != "no responders" {
			t.Fatalf("the fleet without responders: %+v", got)
		}
	}
	if movers["uidmy"].Moves() != 1 || movers["uid"].Moves() != 0 {
		t.Fatalf("moves: uidmy %d, uid %d; want 1 and 0", movers["uidmy"].Moves(), movers["uid"].Moves())
	}
}
