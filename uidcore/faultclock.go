//go:build faultclock

package uidcore

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// The fault harness's clock (tools/internal/faults), compiled in only with
// the faultclock build tag: the wall clock plus an offset the harness
// writes to a file, as a Go duration ("-45s"), so that it can step one
// dispenser's clock back and forth without touching the machine's. Go
// reads the wall clock without libc, so libfaketime cannot do this. The
// release build has none of it (wallclock.go); the harness's tests check
// that the release binary does not contain it.
var faultClock struct {
	path    string
	offset  atomic.Int64 // nanoseconds
	checked atomic.Int64 // unix nanoseconds of the last read of the file
}

// faultClockRead is how often the offset file is read at most.
const faultClockRead = 50 * time.Millisecond

// SetFaultClockFile names the offset file (empty: no offset). Called once
// at start-up, before any clock is read.
func SetFaultClockFile(path string) { faultClock.path = path }

func wallNow() time.Time {
	now := time.Now()
	if faultClock.path != "" {
		if last := faultClock.checked.Load(); now.UnixNano()-last >= int64(faultClockRead) &&
			faultClock.checked.CompareAndSwap(last, now.UnixNano()) {
			readFaultOffset(now)
		}
	}
	return now.Add(time.Duration(faultClock.offset.Load()))
}

// readFaultOffset takes a new offset from the file and, when it changed,
// writes <file>.seen with it: the harness's proof that the step reached
// the process.
func readFaultOffset(now time.Time) {
	b, err := os.ReadFile(faultClock.path)
	if err != nil {
		return
	}
	d, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return
	}
	if old := faultClock.offset.Swap(int64(d)); old != int64(d) {
		_ = os.WriteFile(faultClock.path+".seen", fmt.Appendf(nil, "%s %d\n", d, now.UnixNano()), 0o600)
	}
}
