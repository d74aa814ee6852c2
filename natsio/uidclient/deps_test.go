package uidclient_test

import (
	"strings"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
)

// TestLinksNoServerSide: a program that imports uidclient links nats.go,
// the OpenTelemetry API and uidcore, and none of the dispenser's server
// side: no nats-server, no MySQL driver, no envconfig, no OpenTelemetry
// SDK, no Prometheus, and of this module's packages only the protocol,
// uidcore and the stdlib-only natsio/internal ones.
func TestLinksNoServerSide(t *testing.T) {
	const module = "github.com/uid-dispenser/uid-dispenser/"
	forbidden := []string{
		"github.com/nats-io/nats-server/",
		"github.com/go-sql-driver/mysql",
		"github.com/kelseyhightower/envconfig",
		"go.opentelemetry.io/otel/sdk",
		"github.com/prometheus/",
	}
	deps := testenv.Deps(t, module+"natsio/uidclient")
	seen := map[string]bool{}
	for _, pkg := range deps {
		seen[pkg] = true
		for _, f := range forbidden {
			if pkg == strings.TrimSuffix(f, "/") || strings.HasPrefix(pkg, f) {
				t.Errorf("uidclient links %s", pkg)
			}
		}
		if ours, ok := strings.CutPrefix(pkg, module); ok &&
			ours != "natsio/uidclient" && ours != "natsio/protocol" && ours != "uidcore" && !strings.HasPrefix(ours, "natsio/internal/") {
			t.Errorf("uidclient links %s of this module", pkg)
		}
	}
	// The list is the real one: the client's own imports are in it.
	for _, want := range []string{"github.com/nats-io/nats.go", "github.com/nats-io/nats.go/jetstream", "go.opentelemetry.io/otel/trace", module + "uidcore"} {
		if !seen[want] {
			t.Errorf("go list -deps misses %s (%d packages listed)", want, len(deps))
		}
	}
}
