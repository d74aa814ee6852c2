package testwait

import (
	"sync/atomic"
	"testing"
	"time"
)

// A wait goes on past the time it expected: that time is no deadline.
// The condition turns true only after a number of checks, the wait's
// expected time 1ns is long past by then, and the wait returns without
// failing the test.
func TestWaitGoesOnPastTheExpectedTime(t *testing.T) {
	var checks atomic.Int32
	WaitFor(t, time.Nanosecond, "the fifth check", func() bool { return checks.Add(1) >= 5 })
	if n := checks.Load(); n != 5 {
		t.Errorf("%d checks, want 5", n)
	}
}

// fakeTB is a test that reports a deadline already passed, and records a
// failure instead of ending the goroutine.
type fakeTB struct {
	testing.TB
	deadline time.Time
	failed   atomic.Bool
}

func (f *fakeTB) Deadline() (time.Time, bool)    { return f.deadline, true }
func (f *fakeTB) Helper()                        {}
func (f *fakeTB) Logf(string, ...any)            {}
func (f *fakeTB) Fatalf(format string, a ...any) { f.failed.Store(true); panic(errFatal) }

var errFatal = new(int)

// Near the test binary's deadline a wait fails, naming what it waited
// for, rather than leaving the binary to panic.
func TestWaitFailsNearTheBinarysDeadline(t *testing.T) {
	f := &fakeTB{TB: t, deadline: time.Now().Add(deadlineMargin - time.Hour)}
	func() {
		defer func() {
			if r := recover(); r != errFatal {
				panic(r)
			}
		}()
		WaitFor(f, time.Hour, "a condition that never holds", func() bool { return false })
	}()
	if !f.failed.Load() {
		t.Error("the wait returned without failing")
	}
}

// Receive returns the value sent on the channel, sent here after the
// wait began (the sender blocks until the wait takes it).
func TestReceiveReturnsTheValueSent(t *testing.T) {
	ch := make(chan int)
	go func() { ch <- 7 }()
	if got := Receive(t, time.Second, "the value sent", ch); got != 7 {
		t.Errorf("Receive = %d, want 7", got)
	}
}

// A call's context ends as a wait gives up, deadlineMargin before the
// binary's deadline, not at a short deadline of its own.
func TestContextEndsAsAWaitGivesUp(t *testing.T) {
	binary := time.Now().Add(time.Hour)
	ctx := Context(&fakeTB{TB: t, deadline: binary})
	got, ok := ctx.Deadline()
	if !ok || !got.Equal(binary.Add(-deadlineMargin)) {
		t.Fatalf("context deadline %v (set %v), want %v", got, ok, binary.Add(-deadlineMargin))
	}
	if ctx.Err() != nil {
		t.Fatalf("context already done: %v", ctx.Err())
	}
}
