package telemetry

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// The dispenser's own telemetry settings; the exporters read the standard
// OTEL_* variables themselves.
const (
	// MetricsAddrEnv is the listen address of the /metrics, /healthz and
	// /readyz server; empty: no server.
	MetricsAddrEnv = "DISPENSER_METRICS_ADDR"
	// RunwayWarningEnv is the runway under which observers warn, as a Go
	// duration or a number of days ("d") or 365-day years ("y"): "8760h",
	// "90d", "2y". "0" turns the warning off.
	RunwayWarningEnv = "DISPENSER_RUNWAY_WARNING"
)

// DefaultRunwayWarning is the runway under which observers warn unless
// configured otherwise: a year, time enough to plan a new layout.
const DefaultRunwayWarning = 365 * 24 * time.Hour

// ConfigFromEnv returns a Config with MetricsAddr and RunwayWarning read
// from DISPENSER_METRICS_ADDR and DISPENSER_RUNWAY_WARNING.
func ConfigFromEnv() (Config, error) {
	return configFromEnv(os.Getenv)
}

func configFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{MetricsAddr: strings.TrimSpace(getenv(MetricsAddrEnv)), RunwayWarning: DefaultRunwayWarning}
	if s := strings.TrimSpace(getenv(RunwayWarningEnv)); s != "" {
		d, err := ParseRunway(s)
		if err != nil {
			return Config{}, fmt.Errorf("telemetry: %s: %w", RunwayWarningEnv, err)
		}
		// Zero would mean "the default" in ObserverOptions; a negative
		// threshold is never reached.
		if d == 0 {
			d = -1
		}
		cfg.RunwayWarning = d
	}
	return cfg, nil
}

// ErrBadDuration is wrapped by ParseRunway's errors.
var ErrBadDuration = errors.New("not a duration (examples: 8760h, 90d, 2y, 0)")

// ParseRunway parses a long duration: a Go duration ("8760h30m") or a
// non-negative number of days or 365-day years ("90d", "1.5y").
func ParseRunway(s string) (time.Duration, error) {
	unit := time.Duration(0)
	switch {
	case strings.HasSuffix(s, "d"):
		unit = 24 * time.Hour
	case strings.HasSuffix(s, "y"):
		unit = 365 * 24 * time.Hour
	}
	if unit == 0 {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("%q: %w", s, ErrBadDuration)
		}
		return d, nil
	}
	n, err := strconv.ParseFloat(s[:len(s)-1], 64)
	if err != nil || n < 0 || math.IsNaN(n) || n*float64(unit) >= math.MaxInt64 {
		return 0, fmt.Errorf("%q: %w", s, ErrBadDuration)
	}
	return time.Duration(n * float64(unit)), nil
}
