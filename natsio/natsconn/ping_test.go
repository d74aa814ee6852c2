package natsconn

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/internal/faultproxy"
	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
)

// A link that dies silently (packets dropped, the TCP connection left
// open) is noticed by the client's pings and left for a reconnect; with
// nats.go's default of a ping every 2 minutes, the fault harness saw an
// instance stay on a cut-off node for minutes.
func TestSilentlyDeadLinkIsNoticed(t *testing.T) {
	srv := startNATS(t, &server.Options{})
	u, err := url.Parse(srv)
	if err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.NewProxy(t, u.Host)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The default is what a deployment gets.
	conn, err := Connect(ctx, Config{URL: "nats://" + proxy.Addr(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if got := conn.Opts.PingInterval; got != DefaultPingInterval || conn.Opts.MaxPingsOut != MaxPingsOut {
		t.Fatalf("ping every %v, %d outstanding; want %v, %d", got, conn.Opts.MaxPingsOut, DefaultPingInterval, MaxPingsOut)
	}
	conn.Close()

	// A shorter interval shows the mechanism without waiting for the default.
	conn, err = Connect(ctx, Config{URL: "nats://" + proxy.Addr(), PingInterval: 100 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Flush(); err != nil {
		t.Fatalf("a round trip before the fault: %v", err)
	}
	proxy.Stall()
	testwait.WaitFor(t, time.Second, "the client to notice the silent link", func() bool {
		return conn.Status() != nats.CONNECTED
	})
	proxy.Restore()
	testwait.WaitFor(t, 2*time.Second, "the client to reconnect after the link heals", func() bool {
		return conn.Status() == nats.CONNECTED
	})
	if err := conn.Flush(); err != nil {
		t.Fatalf("a round trip after the fault: %v", err)
	}
}
