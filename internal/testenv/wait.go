package testenv

import (
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
)

// WaitFor is testwait.WaitFor, for the tests that use testenv anyway.
func WaitFor(t testing.TB, expected time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return testwait.WaitFor(t, expected, what, cond)
}
