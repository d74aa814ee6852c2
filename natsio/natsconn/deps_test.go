package natsconn_test

import (
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testdeps"
)

// TestLinksNoServerSide: connecting is the client's concern too, so the
// package links nats.go and the key libraries, never nats-server or
// anything of the dispenser.
func TestLinksNoServerSide(t *testing.T) {
	const module = testdeps.Module
	testdeps.Check(t, module+"natsio/natsconn", append([]string{module + "natsio", module + "dispenser", module + "workerid"}, testdeps.ServerSide...),
		[]string{"github.com/nats-io/nats.go", "github.com/nats-io/nkeys", "github.com/nats-io/jwt/v2"})
}
