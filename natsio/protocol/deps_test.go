package protocol_test

import (
	"strings"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testdeps"
)

// TestLinksOnlyNATS: the protocol is the small package both sides share,
// so it links nats.go and the standard library and, of this module's,
// only stdlib-only helpers: no server side, no JetStream API, no
// OpenTelemetry, no uidcore.
func TestLinksOnlyNATS(t *testing.T) {
	const module = testdeps.Module
	forbidden := append([]string{"github.com/nats-io/nats.go/jetstream", "go.opentelemetry.io/"}, testdeps.ServerSide...)
	for _, pkg := range testdeps.Check(t, module+"natsio/protocol", forbidden, []string{"github.com/nats-io/nats.go"}) {
		if ours, ok := strings.CutPrefix(pkg, module); ok && ours != "natsio/protocol" && !strings.HasPrefix(ours, "natsio/internal/") {
			t.Errorf("the protocol links %s of this module", pkg)
		}
	}
}
