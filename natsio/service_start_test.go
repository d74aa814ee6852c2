package natsio

import (
	"context"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/faultproxy"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// A reconnect while NewService waits for the server to confirm its
// subscriptions does not fail the start: nats.go ends the flushes
// pending at a disconnect with nats.ErrConnectionClosed though the
// connection lives on, and it sends the subscriptions again on the
// reconnect, so the service confirms them then. The fault harness found
// it: a MySQL-fleet dispenser that joined its queue group just as its
// NATS server was paused found its connection stale, and exited 1 with
// "subscribe the service endpoints: nats: connection closed".
func TestServiceStartSurvivesAReconnectDuringItsFlush(t *testing.T) {
	srv := testenv.NATS(t, nil)
	proxy := faultproxy.NewProxy(t, srv.Addr().String())
	conn := connect(t, "nats://"+proxy.Addr())
	gen, err := uidcore.NewCached(uidcore.CachedOptions{Claim: uidcore.StaticClaim{ID: 7}, TakeWait: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gen.Close() })

	// The link slows, so that the flush's PONG is on its way back for
	// seconds once the server has every subscription.
	proxy.SetDelay(3 * time.Second)
	before := srv.NumSubscriptions()
	type started struct {
		svc *Service
		err error
	}
	done := make(chan started, 1)
	go func() {
		svc, err := NewService(conn.Conn, gen, ServiceConfig{Logger: quietLogger()})
		done <- started{svc, err}
	}()
	// Three endpoints and micro's PING, INFO and STATS, each by name,
	// by service and bare: 12 subscriptions, sent before the flush's PING.
	testwait.WaitFor(t, 10*time.Second, "the service's subscriptions at the server", func() bool {
		return srv.NumSubscriptions() >= before+12
	})
	proxy.SetDelay(0)
	if err := conn.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	s := testwait.Receive(t, 15*time.Second, "NewService's end", done)
	if s.err != nil {
		t.Fatalf("a reconnect during the start's flush failed it: %v", s.err)
	}
	t.Cleanup(func() { _ = s.svc.Stop() })
	if got := conn.Stats().Reconnects; got != 1 {
		t.Fatalf("%d reconnects, want the one forced", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if msg, err := conn.RequestWithContext(ctx, "uid.next", nil); err != nil || len(msg.Data) == 0 {
		t.Fatalf("uid.next after the reconnect: %v", err)
	}
}
