package uidcore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ClockBackwardsError is returned when the clock is behind the last second
// the generator issued IDs for by more than the tolerance.
type ClockBackwardsError struct {
	By        time.Duration // how far the clock is behind the last issued second
	Tolerance time.Duration
}

func (e *ClockBackwardsError) Error() string {
	return fmt.Sprintf("uidcore: clock moved backwards by %s (tolerance %s): refusing to issue IDs until it catches up", e.By, e.Tolerance)
}

// ErrClockBackwards matches every *ClockBackwardsError with errors.Is.
var ErrClockBackwards = errors.New("uidcore: clock moved backwards")

// Is makes errors.Is(err, ErrClockBackwards) true.
func (e *ClockBackwardsError) Is(target error) bool { return target == ErrClockBackwards }

// DefaultOptions configure a DefaultGenerator.
type DefaultOptions struct {
	Layout Layout // zero value: DefaultLayout()
	Claim  Claim  // required
	Clock  Clock  // zero value: SystemClock
	// BackwardsTolerance is how far the clock may move back before Next
	// fails instead of waiting for it to catch up. Zero means the default
	// of 1s; negative means never wait.
	BackwardsTolerance time.Duration
}

// DefaultBackwardsTolerance is the default DefaultOptions.BackwardsTolerance.
const DefaultBackwardsTolerance = time.Second

// DefaultGenerator issues IDs from the current second of the clock, like
// UidGenerator's DefaultUidGenerator: at most 2^SeqBits IDs per second.
// It is safe for concurrent use.
type DefaultGenerator struct {
	layout    Layout
	claim     Claim
	clock     Clock
	tolerance time.Duration

	mu         sync.Mutex
	lastSecond int64  // the last second IDs were issued for
	nextSeq    uint64 // the next sequence within lastSecond
}

// NewDefault returns a clock-driven generator.
func NewDefault(opts DefaultOptions) (*DefaultGenerator, error) {
	if err := checkBasics(&opts.Layout, opts.Claim, &opts.Clock); err != nil {
		return nil, err
	}
	switch {
	case opts.BackwardsTolerance == 0:
		opts.BackwardsTolerance = DefaultBackwardsTolerance
	case opts.BackwardsTolerance < 0:
		opts.BackwardsTolerance = 0
	}
	g := &DefaultGenerator{layout: opts.Layout, claim: opts.Claim, clock: opts.Clock, tolerance: opts.BackwardsTolerance}
	// An earlier holder of the worker ID may have used seconds up to
	// After: treat them as used so this generator starts strictly later.
	g.lastSecond = opts.Claim.After()
	g.nextSeq = opts.Layout.MaxSequence() + 1
	return g, nil
}

// Layout returns the generator's layout.
func (g *DefaultGenerator) Layout() Layout { return g.layout }

// Next returns a new ID. When the current second's sequence is used up it
// sleeps until the next second; when the clock is behind the last issued
// second by no more than the tolerance it sleeps until the clock catches
// up; further behind, it returns a *ClockBackwardsError. ctx bounds the
// waiting.
func (g *DefaultGenerator) Next(ctx context.Context) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		now := g.clock.Now()
		sec := now.Unix()
		switch {
		case sec < g.lastSecond:
			// The clock is behind the last issued second: wait until it is
			// back in that second (whose unused sequences are still ours).
			behind := time.Unix(g.lastSecond, 0).Sub(now)
			if behind > g.tolerance {
				return 0, &ClockBackwardsError{By: behind, Tolerance: g.tolerance}
			}
			if err := g.clock.Sleep(ctx, behind); err != nil {
				return 0, fmt.Errorf("uidcore: waiting for the clock to catch up: %w", err)
			}
			continue
		case sec == g.lastSecond && g.nextSeq > g.layout.MaxSequence():
			// This second is used up: wait for the next one without spinning.
			if err := g.clock.Sleep(ctx, untilNextSecond(now)); err != nil {
				return 0, fmt.Errorf("uidcore: waiting for the next second: %w", err)
			}
			continue
		case sec > g.lastSecond:
			until, err := g.claim.Until()
			if err != nil {
				return 0, err
			}
			if sec > until {
				if r, ok := g.claim.(Reserver); ok {
					r.Reserve(sec)
				}
				return 0, &NotReservedError{WorkerID: g.claim.WorkerID(), Second: sec, Until: until}
			}
			if _, err := g.layout.secondBase(sec, 0); err != nil {
				return 0, err
			}
			g.lastSecond, g.nextSeq = sec, 0
		}
		if _, err := g.claim.Until(); err != nil {
			return 0, err
		}
		id, err := g.layout.Compose(sec, g.claim.WorkerID(), g.nextSeq)
		if err != nil {
			return 0, err
		}
		g.nextSeq++
		return id, nil
	}
}
