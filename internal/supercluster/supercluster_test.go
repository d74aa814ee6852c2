package supercluster_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/internal/supercluster"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
)

// Requests cross the gateway while it is up, take the proxy's delay both
// ways, stop when it is cut and cross again once healed.
func TestGatewayCutHealAndDelay(t *testing.T) {
	sc := supercluster.Start(t, "east", "west")
	east, west := sc.Cluster("east").Connect(t), sc.Cluster("west").Connect(t)
	if _, err := west.Subscribe("echo", func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "east to reach west's echo", func() bool {
		_, err := east.Request("echo", nil, time.Second)
		return err == nil
	})
	const delay = 30 * time.Millisecond
	sc.Delay(delay)
	begin := time.Now()
	if _, err := east.Request("echo", nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took < 2*delay {
		t.Errorf("a request across the delayed gateway took %s, less than the %s of a round trip", took, 2*delay)
	}
	sc.Delay(0)
	sc.Cut(t)
	if _, err := east.Request("echo", nil, 300*time.Millisecond); err == nil {
		t.Fatal("a request crossed the cut gateway")
	}
	sc.Heal(t)
	testenv.WaitFor(t, 30*time.Second, "east to reach west's echo after the heal", func() bool {
		_, err := east.Request("echo", nil, time.Second)
		return err == nil
	})
}
