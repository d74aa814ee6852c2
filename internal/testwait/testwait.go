// Package testwait is the tests' one way to wait for a condition, with
// the standard library only, so that the tests of uidcore and telemetry
// (which must not pull in nats-server or a database driver through
// internal/testenv) wait the same way as every other test.
package testwait

import (
	"testing"
	"time"
)

// WaitFor checks cond every millisecond, growing to 20ms, until it holds,
// and returns how long that took; past within it fails the test saying
// what it waited for. Call it from the test's goroutine (it may call
// t.Fatalf); tests wait on conditions with it, never with a fixed sleep.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	pause := time.Millisecond
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
	return time.Since(start)
}
