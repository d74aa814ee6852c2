package main

import (
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testdeps"
)

// TestLinksNoServerSide: the demo is a client program. It connects with
// authentication (natsconn) and asks for IDs (uidclient) without linking
// nats-server or the MySQL driver, as any client program can.
func TestLinksNoServerSide(t *testing.T) {
	const module = testdeps.Module
	testdeps.Check(t, module+"cmd/client-demo", append([]string{module + "natsio", module + "dispenser"}, testdeps.ServerSide...),
		[]string{module + "natsio/natsconn", module + "natsio/uidclient", "github.com/nats-io/nats.go"})
}
