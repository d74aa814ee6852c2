package uidcore

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a clock the test moves by hand; Sleep advances it at once.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	slept  time.Duration
	sleeps int
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.slept += d
	c.sleeps++
	return nil
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Slept() (time.Duration, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slept, c.sleeps
}

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

// t0 is a fixed wall-clock instant for tests, on a whole second.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// smallLayout has 256 IDs per second and 256 workers, so tests reach the
// edges quickly.
func smallLayout() Layout {
	return Layout{TimeBits: 47, WorkerBits: 8, SeqBits: 8, Epoch: DefaultEpoch}
}
