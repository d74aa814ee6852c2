// Package problemlog logs a failure that recurs (a fetch that keeps
// failing, a stream that keeps refusing) without flooding the log. Both
// sides of the ID blocks use it: the block publisher (natsio) and the
// block source (natsio/uidclient). Standard library only, so the client
// may import it.
package problemlog

import (
	"log/slog"
	"time"
)

// rewarn is how often a failure that persists, or keeps coming
// back, is logged at Warn again.
const rewarn = time.Minute

// Log logs a recurring failure without flooding the log: at Warn
// at most once a minute (with the failures since), at Debug otherwise; a
// recovery is logged at Info when its failure was warned about. A failure
// that flaps (a ring running dry every second) thus logs two lines a
// minute. Used from one goroutine.
type Log struct {
	Log      *slog.Logger
	What     string // what failed, as in "blocks: fetch"
	failing  bool
	warned   bool // this failure was logged at Warn
	lastWarn time.Time
	since    int // failures since the last Warn
}

// Fail records a failure.
func (l *Log) Fail(err error) {
	now := time.Now()
	l.since++
	if l.lastWarn.IsZero() || now.Sub(l.lastWarn) >= rewarn {
		l.Log.Warn(l.What+" failed", "err", err, "failures", l.since)
		l.lastWarn, l.since, l.warned = now, 0, true
	} else {
		l.Log.Debug(l.What+" failed", "err", err)
	}
	l.failing = true
}

// OK records a success, ending the failure if there was one.
func (l *Log) OK() {
	if !l.failing {
		return
	}
	if l.warned {
		l.Log.Info(l.What + " recovered")
	} else {
		l.Log.Debug(l.What + " recovered")
	}
	l.failing, l.warned = false, false
}
