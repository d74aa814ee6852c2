package uidclient_test

import (
	"strings"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testdeps"
)

// TestLinksNoServerSide: a program that imports uidclient links nats.go,
// the OpenTelemetry API and uidcore, and none of the dispenser's server
// side: no nats-server, no MySQL driver, no envconfig, no OpenTelemetry
// SDK, no Prometheus, and of this module's packages only the protocol,
// uidcore, the stdlib-only retry policy, setting error and event names,
// and the stdlib-only natsio/internal ones.
func TestLinksNoServerSide(t *testing.T) {
	const module = testdeps.Module
	forbidden := append([]string{
		"github.com/kelseyhightower/envconfig",
		"go.opentelemetry.io/otel/sdk/",
		"github.com/prometheus/",
	}, testdeps.ServerSide...)
	want := []string{"github.com/nats-io/nats.go", "github.com/nats-io/nats.go/jetstream", "go.opentelemetry.io/otel/trace", module + "uidcore", module + "natsio/protocol"}
	for _, pkg := range testdeps.Check(t, module+"natsio/uidclient", forbidden, want) {
		if ours, ok := strings.CutPrefix(pkg, module); ok &&
			ours != "natsio/uidclient" && ours != "natsio/protocol" && ours != "uidcore" && ours != "internal/retry" && ours != "internal/setting" && ours != "telemetry/event" && !strings.HasPrefix(ours, "natsio/internal/") {
			t.Errorf("uidclient links %s of this module", pkg)
		}
	}
}
