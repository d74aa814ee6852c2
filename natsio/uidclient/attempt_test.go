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
	const attemptTimeout = 100 * time.Millisecond
	client := uidclient.New(nc, uidclient.Config{AttemptTimeout: attemptTimeout})

	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	far, cancelFar := context.WithTimeout(context.Background(), time.Minute)
	defer cancelFar()
	contexts := map[string]context.Context{"background": context.Background(), "cancellable": cancellable, "deadline far": far}
	var ids []uint64
	for name, ctx := range contexts {
		before := client.Stats().TimedOut
		start := time.Now()
		id, err := client.Next(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		took := time.Since(start)
		if got := client.Stats().TimedOut - before; got != 1 {
			t.Errorf("%s: %d attempts timed out, want 1 (the dropped request)", name, got)
		}
		if took < attemptTimeout || took > 10*attemptTimeout {
			t.Errorf("%s: the call took %v, want one attempt timeout (%v) and a retry", name, took, attemptTimeout)
		}
		ids = append(ids, id)
	}

	// A deadline within the attempt timeout bounds the call, not the
	// timeout: a dropped request fails at the deadline.
	seen.Store(0)
	ctx, cancelSoon := context.WithTimeout(context.Background(), attemptTimeout/4)
	defer cancelSoon()
	start := time.Now()
	if _, err := client.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline within the attempt timeout: err %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > attemptTimeout {
		t.Errorf("deadline within the attempt timeout: the call took %v, longer than the attempt timeout", took)
	}

	// Cancelling a call whose attempt is waiting ends it at once.
	seen.Store(0)
	ctx, cancelNow := context.WithCancel(context.Background())
	time.AfterFunc(attemptTimeout/4, cancelNow)
	start = time.Now()
	if _, err := client.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > attemptTimeout {
		t.Errorf("cancelled: the call took %v, longer than the attempt timeout", took)
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
