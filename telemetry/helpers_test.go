package telemetry

import (
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/uid-dispenser/uid-dispenser/telemetry/telemetrytest"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// losableClaim is a static claim the test can declare lost, as a lease
// that expired would be.
type losableClaim struct {
	uidcore.StaticClaim
	lost atomic.Bool
}

func (c *losableClaim) Until() (int64, error) {
	if c.lost.Load() {
		return 0, uidcore.ErrClaimLost
	}
	return c.StaticClaim.Until()
}

// tinyLayout has 64 IDs per second, so a ring of 64 slots fills in one
// second's worth of IDs.
func tinyLayout() uidcore.Layout {
	return uidcore.Layout{TimeBits: 41, WorkerBits: 16, SeqBits: 6, Epoch: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// providers are SDK providers that keep spans and metrics in memory.
type providers = telemetrytest.Providers

func newProviders(t *testing.T) *providers { return telemetrytest.NewProviders(t) }
