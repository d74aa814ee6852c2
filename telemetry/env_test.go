package telemetry

import (
	"errors"
	"testing"
	"time"
)

func TestParseRunway(t *testing.T) {
	day := 24 * time.Hour
	for in, want := range map[string]time.Duration{
		"90d":    90 * day,
		" 2y ":   2 * 365 * day,
		"1.5y":   547*day + 12*time.Hour,
		"8760h":  365 * day,
		"1h30m":  90 * time.Minute,
		"0":      RunwayWarningOff,
		"0d":     RunwayWarningOff,
		"0.0y":   RunwayWarningOff,
		"100y":   100 * 365 * day,
		"1e2d":   100 * day,
		"+3d":    3 * day,
		"0.5d":   12 * time.Hour,
		"720h0s": 30 * day,
	} {
		if got, err := ParseRunway(in); err != nil || got != want {
			t.Errorf("ParseRunway(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a year", "-3d", "-1h", "1e300y", "NaNd", "Infy", "d", "y", "3 days", "300y", "0x10d"} {
		if _, err := ParseRunway(in); !errors.Is(err, ErrBadDuration) {
			t.Errorf("ParseRunway(%q): %v, want ErrBadDuration", in, err)
		}
	}
}

// FuzzParseRunway: any input gives a positive duration, RunwayWarningOff
// or ErrBadDuration, never a panic.
func FuzzParseRunway(f *testing.F) {
	for _, s := range []string{"90d", "2y", "1.5y", "8760h", "0", "", "d", "-1d", "1e300y", "Infd", "0x10d", "1h30m", "NaNy", "   ", "292y", "106751d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseRunway(s)
		if err != nil {
			if !errors.Is(err, ErrBadDuration) {
				t.Fatalf("ParseRunway(%q): error %v does not wrap ErrBadDuration", s, err)
			}
			return
		}
		if d <= 0 && d != RunwayWarningOff {
			t.Fatalf("ParseRunway(%q) = %v", s, d)
		}
	})
}
