//go:build !faultclock

package uidcore

import "time"

// wallNow is the host's wall clock. The release build reads it directly;
// only a build with the faultclock tag (faultclock.go) can offset it.
func wallNow() time.Time { return time.Now() }
