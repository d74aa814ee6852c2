package telemetry

import (
	"errors"
	"testing"
	"time"
)

func TestConfigFromEnv(t *testing.T) {
	day := 24 * time.Hour
	for _, c := range []struct {
		addr, warning string
		want          Config
		bad           bool
	}{
		{"", "", Config{RunwayWarning: DefaultRunwayWarning}, false},
		{" :9464 ", "90d", Config{MetricsAddr: ":9464", RunwayWarning: 90 * day}, false},
		{"", "2y", Config{RunwayWarning: 2 * 365 * day}, false},
		{"", "1.5y", Config{RunwayWarning: 547*day + 12*time.Hour}, false},
		{"", "8760h", Config{RunwayWarning: 365 * day}, false},
		{"", "0", Config{RunwayWarning: -1}, false},
		{"", "0d", Config{RunwayWarning: -1}, false},
		{"", "a year", Config{}, true},
		{"", "-3d", Config{}, true},
		{"", "-1h", Config{}, true},
		{"", "1e300y", Config{}, true},
		{"", "NaNd", Config{}, true},
		{"", "d", Config{}, true},
	} {
		env := map[string]string{MetricsAddrEnv: c.addr, RunwayWarningEnv: c.warning}
		got, err := configFromEnv(func(k string) string { return env[k] })
		if c.bad {
			if !errors.Is(err, ErrBadDuration) {
				t.Errorf("%s=%q: err %v, want ErrBadDuration", RunwayWarningEnv, c.warning, err)
			}
			continue
		}
		if err != nil || got.MetricsAddr != c.want.MetricsAddr || got.RunwayWarning != c.want.RunwayWarning {
			t.Errorf("addr %q warning %q: %+v, %v; want %+v", c.addr, c.warning, got, err, c.want)
		}
	}
}

// FuzzParseRunway: any input gives a non-negative duration or
// ErrBadDuration, never a panic.
func FuzzParseRunway(f *testing.F) {
	for _, s := range []string{"90d", "2y", "1.5y", "8760h", "0", "", "d", "-1d", "1e300y", "Infd", "0x10d", "1h30m", "NaNy", "   "} {
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
		if d < 0 {
			t.Fatalf("ParseRunway(%q) = %v, negative", s, d)
		}
	})
}
