package natsio

import (
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testdeps"
)

// TestServerSideImportsNoClient: the service and the block publisher take
// the protocol from natsio/protocol, which the client shares, never from
// the client package itself (the tests use the client, the code does not).
func TestServerSideImportsNoClient(t *testing.T) {
	const module = testdeps.Module
	testdeps.Check(t, module+"natsio", []string{module + "natsio/uidclient"}, []string{module + "natsio/protocol"})
}
