// Package testwait is the tests' one way to wait for a condition, with
// the standard library only, so that the tests of uidcore and telemetry
// (which must not pull in nats-server or a database driver through
// internal/testenv) wait the same way as every other test.
package testwait

import (
	"context"
	"testing"
	"time"
)

// deadlineMargin is how long before the test binary's deadline (go test
// -timeout) a wait gives up, so that the failure names what it waited
// for instead of ending in the binary's panic and goroutine dump.
const deadlineMargin = 30 * time.Second

// WaitFor checks cond every millisecond, growing to 20ms, until it holds,
// and returns how long that took. Call it from the test's goroutine (it
// may call t.Fatalf); tests wait on conditions with it, never with a
// fixed sleep.
//
// expected is how long the wait should take on an idle machine; it is not
// a deadline. A loaded machine (two cores shared by several test
// binaries, one of them kept busy) can take many times as long, so a wait
// past expected is only logged once, and the wait goes on until the
// test binary's own timeout is near: then the test fails saying what it
// waited for. A test that must not wait forever bounds the wait with
// that timeout, never with a short wall-clock deadline.
func WaitFor(t testing.TB, expected time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	giveUp, bounded := binaryDeadline(t)
	pause, logged := time.Millisecond, false
	for !cond() {
		waited := time.Since(start)
		if !logged && waited > expected {
			t.Logf("still waiting after %s (expected within %s on an idle machine): %s", waited.Round(time.Millisecond), expected, what)
			logged = true
		}
		if bounded && time.Now().After(giveUp) {
			t.Fatalf("not within %s, near the test binary's timeout: %s", waited.Round(time.Second), what)
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
	return time.Since(start)
}

// Receive waits for a value from ch as WaitFor waits for a condition
// (expected is no deadline) and returns it.
func Receive[T any](t testing.TB, expected time.Duration, what string, ch <-chan T) T {
	t.Helper()
	var v T
	WaitFor(t, expected, what, func() bool {
		select {
		case v = <-ch:
			return true
		default:
			return false
		}
	})
	return v
}

// Context is a context for a call that waits on state (a claim of a worker
// ID from a contended store, a fetch that many goroutines queue for): it
// ends deadlineMargin before the test binary's deadline, as WaitFor gives
// up, and is cancelled when the test ends. A call that a loaded machine
// slows many times over still ends by the test's own bound, never by a
// short wall-clock deadline; the margin leaves the test time to say which
// call did not return. Without a binary deadline (go test -timeout 0) it
// ends only with the test.
func Context(t testing.TB) context.Context {
	t.Helper()
	giveUp, bounded := binaryDeadline(t)
	if !bounded {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		return ctx
	}
	ctx, cancel := context.WithDeadline(context.Background(), giveUp)
	t.Cleanup(cancel)
	return ctx
}

// binaryDeadline is when a wait gives up: deadlineMargin before the test
// binary's deadline, when it has one and t can tell it.
func binaryDeadline(t testing.TB) (time.Time, bool) {
	d, ok := t.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return time.Time{}, false
	}
	deadline, ok := d.Deadline()
	if !ok {
		return time.Time{}, false
	}
	return deadline.Add(-deadlineMargin), true
}
