// Package retry is the one retry policy of the module's loops (the
// worker-ID stores, the claims, the NATS connection, the client, the
// prefetcher and the block source): pauses that double from Min to Max,
// each drawn at random from its upper half ("equal jitter"). The jitter
// is the point: after an outage, loops that all failed together would
// otherwise retry together, in lockstep, for as long as they fail. A
// server's own hint (Uid-Retry-After-Ms) is a floor on the pause.
// Standard library only: the client links it.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy bounds the pauses. Zero values take the defaults.
type Policy struct {
	Min time.Duration // the first pause's bound (default 50ms)
	Max time.Duration // the longest pause (default 2s; at least Min)
}

// Default bounds of the pauses.
const (
	DefaultMin = 50 * time.Millisecond
	DefaultMax = 2 * time.Second
)

// Backoff is one loop's pauses, for one goroutine.
type Backoff struct {
	min, max, bound time.Duration
}

// Start returns the pauses of a loop that has just failed for the
// first time.
func (p Policy) Start() Backoff {
	if p.Min <= 0 {
		p.Min = DefaultMin
	}
	if p.Max <= 0 {
		p.Max = max(DefaultMax, p.Min)
	}
	p.Max = max(p.Max, p.Min)
	return Backoff{min: p.Min, max: p.Max, bound: p.Min}
}

// Next is the pause before the next attempt: at random in the upper half
// of a bound that doubles with each call, up to Max.
func (b *Backoff) Next() time.Duration {
	if b.bound == 0 { // the zero Backoff: the default policy
		*b = Policy{}.Start()
	}
	d := b.bound/2 + rand.N(b.bound/2+1)
	b.bound = min(2*b.bound, b.max)
	return d
}

// NextAtLeast is Next, but never shorter than floor (a server's
// Uid-Retry-After-Ms).
func (b *Backoff) NextAtLeast(floor time.Duration) time.Duration {
	return max(b.Next(), floor)
}

// Reset starts the pauses over, after a success.
func (b *Backoff) Reset() { b.bound = b.min }

// Sleep waits d, or until ctx is done (then it returns ctx's error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
