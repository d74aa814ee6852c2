package telemetry

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// DefaultRunwayWarning is the runway under which observers warn unless
// configured otherwise: a year, time enough to plan a new layout.
const DefaultRunwayWarning = 365 * 24 * time.Hour

// RunwayWarningOff as ObserverConfig.RunwayWarning turns the warning off.
const RunwayWarningOff time.Duration = -1

// ErrBadDuration is wrapped by ParseRunway's errors.
var ErrBadDuration = errors.New("not a duration (examples: 8760h, 90d, 2y, 0)")

// ParseRunway parses a runway warning threshold (DISPENSER_RUNWAY_WARNING):
// a Go duration ("8760h") or a non-negative number of days or 365-day
// years ("90d", "1.5y"). Zero gives RunwayWarningOff.
func ParseRunway(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var unit time.Duration
	switch {
	case strings.HasSuffix(s, "d"):
		unit = 24 * time.Hour
	case strings.HasSuffix(s, "y"):
		unit = 365 * 24 * time.Hour
	}
	var d time.Duration
	if unit == 0 {
		var err error
		d, err = time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("%q: %w", s, ErrBadDuration)
		}
	} else {
		n, err := strconv.ParseFloat(s[:len(s)-1], 64)
		if err != nil || n < 0 || math.IsNaN(n) || n*float64(unit) >= math.MaxInt64 {
			return 0, fmt.Errorf("%q: %w", s, ErrBadDuration)
		}
		d = time.Duration(n * float64(unit))
	}
	if d == 0 {
		return RunwayWarningOff, nil
	}
	return d, nil
}
