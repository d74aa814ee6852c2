package soak

import (
	"context"
	"time"
)

// stall is a span in which the soak's own process did not run: its
// goroutines (the clients among them) were not scheduled, so no call made
// in it could meet its deadline. A heavily loaded machine causes them.
type stall struct {
	At     time.Duration `json:"at_ns"` // since the run started
	Length time.Duration `json:"length_ns"`
}

// stallThreshold is the shortest gap in the soak's ticking reported as a
// stall.
const stallThreshold = 500 * time.Millisecond

// watchStalls ticks every tick until ctx is done and returns the gaps
// between ticks longer than stallThreshold.
func watchStalls(ctx context.Context, origin time.Time, tick time.Duration) []stall {
	var stalls []stall
	t := time.NewTicker(tick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return stalls
		case <-t.C:
			// Not the tick's own time, which is when it was due.
			now := time.Now()
			if gap := now.Sub(last); gap > stallThreshold {
				stalls = append(stalls, stall{At: last.Sub(origin), Length: gap})
			}
			last = now
		}
	}
}

// covering returns the longest stall overlapping from..to (zero when
// none).
func covering(stalls []stall, from, to time.Duration) time.Duration {
	var longest time.Duration
	for _, s := range stalls {
		if s.At <= to && s.At+s.Length >= from {
			longest = max(longest, s.Length)
		}
	}
	return longest
}
