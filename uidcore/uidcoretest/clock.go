// Package uidcoretest has the one test double the project allows: a clock
// that tests move by hand, backwards and forwards. It satisfies
// uidcore.Clock.
package uidcoretest

import (
	"context"
	"sync"
	"time"
)

// Clock is a manual clock; Sleep advances it at once instead of waiting.
// It is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	slept  time.Duration
	sleeps int
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now implements uidcore.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep implements uidcore.Clock: it moves the clock by d at once.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
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

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Add moves the clock by d (negative: backwards).
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Slept reports the total time slept and how many Sleep calls there were.
func (c *Clock) Slept() (time.Duration, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slept, c.sleeps
}
