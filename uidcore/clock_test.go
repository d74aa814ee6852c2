package uidcore

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is the manual test clock.
type fakeClock = uidcoretest.Clock

func newFakeClock(t time.Time) *fakeClock { return uidcoretest.NewClock(t) }

// lossyClaim is a claim whose validity and reservation the test controls.
type lossyClaim struct {
	StaticClaim
	mu       sync.Mutex
	until    int64
	lost     bool
	reserved []int64
}

func (c *lossyClaim) Until() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost {
		return 0, ErrClaimLost
	}
	return c.until, nil
}

func (c *lossyClaim) Reserve(second int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reserved = append(c.reserved, second)
}

func (c *lossyClaim) set(until int64, lost bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.until, c.lost = until, lost
}

// paddingWait is how long the tests' takes may wait for padding
// (TakeWait) where the wait is not what they test: a bound for a failure
// on a loaded machine, not a latency figure (those are benchmarks'). With
// a second, eight takers under the race detector on a shared 2-core
// machine ran out of it while the padding goroutine waited for a core.
const paddingWait = 30 * time.Second

// t0 is a fixed wall-clock instant for tests, on a whole second.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// smallLayout has 256 IDs per second and 256 workers, so tests reach the
// edges quickly.
func smallLayout() Layout {
	return Layout{TimeBits: 47, WorkerBits: 8, SeqBits: 8, Epoch: DefaultEpoch}
}
