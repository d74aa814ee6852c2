package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/retry"
)

// Each pause lies in the upper half of a bound that doubles from Min to
// Max; a Reset starts over; a floor is kept.
func TestPausesDoubleWithinTheirBounds(t *testing.T) {
	b := retry.Policy{Min: 100 * time.Millisecond, Max: time.Second}.Start()
	bounds := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for round := range 2 {
		for i, bound := range bounds {
			bound *= time.Millisecond
			if d := b.Next(); d < bound/2 || d > bound {
				t.Fatalf("round %d, pause %d: %v, want within [%v, %v]", round, i, d, bound/2, bound)
			}
		}
		b.Reset()
	}
	if d := b.NextAtLeast(3 * time.Second); d != 3*time.Second {
		t.Fatalf("a 3s floor gave %v", d)
	}
	var zero retry.Backoff
	if d := zero.Next(); d < retry.DefaultMin/2 || d > retry.DefaultMin {
		t.Fatalf("the zero Backoff's first pause: %v", d)
	}
}

// A thousand loops that failed together draw a thousand different
// pauses at each step: none retries in lockstep with another.
func TestLoopsThatFailedTogetherDoNotRetryTogether(t *testing.T) {
	const loops = 1000
	backoffs := make([]retry.Backoff, loops)
	for i := range backoffs {
		backoffs[i] = retry.Policy{Max: 30 * time.Second}.Start()
	}
	for step := range 6 {
		seen := map[time.Duration]int{}
		for i := range backoffs {
			seen[backoffs[i].Next()]++
		}
		// The bound at step 0 is 50ms: 25,000,001 possible pauses in
		// nanoseconds; a birthday collision among 1,000 has probability
		// about 2%, so allow a few.
		if len(seen) < loops-5 {
			t.Fatalf("step %d: %d distinct pauses among %d loops", step, len(seen), loops)
		}
	}
}

func TestSleepEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := retry.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context: %v", err)
	}
	if err := retry.Sleep(context.Background(), time.Nanosecond); err != nil {
		t.Fatal(err)
	}
}
