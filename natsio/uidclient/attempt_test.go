package uidclient_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// TestAttemptTimeoutByContext holds each way an attempt is bounded: a
// context that is never done leaves the bound to the attempt timeout, a
// deadline within it is the bound itself, and any other context gets one
// of its own per attempt. Each attempt the responder leaves unanswered
// must time out and be asked again, a cancelled call must end at once,
// no request carries headers it does not need, and the IDs handed out
// are distinct.
func TestAttemptTimeoutByContext(t *testing.T) {
	srv := blocksTestServer(t)
	nc := blocksTestConn(t, srv)
	// The responder drops every other request, as an instance that died
	// holding it would, and answers the rest with a fresh number.
	var seen, next, withHeaders atomic.Uint64
	sub, err := blocksTestConn(t, srv).Subscribe(protocol.Subject(protocol.DefaultSubjectPrefix, protocol.EndpointNext), func(m *nats.Msg) {
		if m.Header != nil {
			withHeaders.Add(1)
		}
		if seen.Add(1)%2 == 1 {
			return
		}
		_ = m.Respond([]byte(strconv.FormatUint(next.Add(1), 10)))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// Long enough that an answered attempt never times out on a loaded
	// machine: the checks count attempts, never time them.
	const attemptTimeout = time.Second
	client := uidclient.New(nc, uidclient.Config{AttemptTimeout: attemptTimeout})

	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	far, cancelFar := context.WithTimeout(context.Background(), time.Minute)
	defer cancelFar()
	contexts := map[string]context.Context{"background": context.Background(), "cancellable": cancellable, "deadline far": far}
	var ids []uint64
	for name, ctx := range contexts {
		before, requests := client.Stats().TimedOut, seen.Load()
		id, err := client.Next(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := client.Stats().TimedOut - before; got != 1 {
			t.Errorf("%s: %d attempts timed out, want 1 (the dropped request)", name, got)
		}
		if got := seen.Load() - requests; got != 2 {
			t.Errorf("%s: %d requests, want the dropped one and its retry", name, got)
		}
		ids = append(ids, id)
	}

	// A deadline within the attempt timeout bounds the call, not the
	// timeout: a dropped request fails at the deadline.
	seen.Store(0)
	ctx, cancelSoon := context.WithTimeout(context.Background(), attemptTimeout/4)
	defer cancelSoon()
	if _, err := client.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline within the attempt timeout: err %v, want context.DeadlineExceeded", err)
	}
	if got := seen.Load(); got != 1 {
		t.Errorf("deadline within the attempt timeout: %d requests, want 1 (no retry after the deadline)", got)
	}

	// Cancelling a call whose attempt is waiting ends it at once: with an
	// attempt timeout of a minute, only the cancel can end it before the
	// test binary's timeout, and it is sent once the responder has the
	// request (state, not a timer).
	seen.Store(0)
	patient := uidclient.New(nc, uidclient.Config{AttemptTimeout: time.Minute})
	ctx, cancelNow := context.WithCancel(context.Background())
	go func() {
		for seen.Load() == 0 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		cancelNow()
	}()
	if _, err := patient.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err %v, want context.Canceled", err)
	}
	if got := seen.Load(); got != 1 {
		t.Errorf("cancelled: %d requests, want 1 (no retry after the cancel)", got)
	}
	// No tracer provider or propagator here: there is no trace context
	// to carry, and a header block would cost the server its parsing.
	if n := withHeaders.Load(); n > 0 {
		t.Errorf("%d requests carried headers with nothing to carry", n)
	}
	testenv.CheckDistinct(t, ids)
	if len(ids) != len(contexts) {
		t.Fatalf("%d IDs, want %d", len(ids), len(contexts))
	}
}
