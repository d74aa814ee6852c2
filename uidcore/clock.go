package uidcore

import (
	"context"
	"time"
)

// Clock is where the generators read the time. Tests inject a clock they
// can move backwards and forwards.
type Clock interface {
	Now() time.Time
	// Sleep waits for d or until ctx is done, whichever comes first, and
	// returns ctx.Err() in the latter case.
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the host's clock. (A build with the faultclock tag, made
// only for the fault harness, offsets it: faultclock.go.)
type SystemClock struct{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return wallNow() }

// Sleep implements Clock.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// untilNextSecond is how long from now until the next whole second starts.
func untilNextSecond(now time.Time) time.Duration {
	return time.Duration(1e9 - now.Nanosecond())
}
