package client

import (
	"log/slog"
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
	got := request(nc, mover, "uid.batch", op, time.Minute, true)
	if got.Type != history.OK || len(got.Values) != 2 || got.Attempts != 3 {
		t.Fatalf("with retry: %+v", got)
	}
	got = request(nc, mover, "uid.batch", op, time.Minute, false)
	if got.Type != history.Fail || got.Error != "503 worker claim lost: worker ID 1" || got.Attempts != 1 {
		t.Fatalf("without retry: %+v", got)
	}
}

// No responders is retried until the call's timeout leaves no time for
// another request; then the call failed (nothing was handed out).
func TestRequestNoRespondersFailsAtItsTimeout(t *testing.T) {
	nc := connect(t)
	op := history.Op{Process: "c0/0", Call: 1, Func: history.FuncIDs, Count: 1}
	got := request(nc, uidclient.NewMover(nc, uidclient.MoveConfig{}), "uid.batch", op, 2*time.Second, true)
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
		got := request(nc, mover, "uid.batch", op, 2*time.Second, true)
		if got.Type != history.Fail || got.Attempts < 2 {
			t.Errorf("MoveAfter %d: %+v", moveAfter, got)
		}
		if moved := mover.Moves() > 0; moved != (moveAfter == 0) {
			t.Errorf("MoveAfter %d: %d moves after %d attempts", moveAfter, mover.Moves(), got.Attempts)
		}
		nc.Close()
	}
}
