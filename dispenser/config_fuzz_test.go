package dispenser

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzLoadConfig sets two configuration variables (chosen by index among
// all of them) to arbitrary strings: LoadConfig must either give a valid
// configuration or an error naming one of the two, never panic, and never
// quote a password or token. The seeds try a few values on every
// variable; fuzz it with
//
//	go test -run '^$' -fuzz FuzzLoadConfig -fuzztime 60s ./dispenser/
func FuzzLoadConfig(f *testing.F) {
	names := configVars()
	for i := range names {
		for _, v := range []string{"", "0", "-1", "1s", "true", "x y", "nats://u:s3cret@127.0.0.1:4222", "/nonexistent/file", "127.0.0.1:0", "99999999999999999999"} {
			f.Add(uint8(i), v, uint8(0), "")
		}
	}
	f.Add(uint8(index(names, "NATS_USER")), "alice", uint8(index(names, "NATS_TOKEN")), "t0ken-secret")
	f.Add(uint8(index(names, "NATS_PASSWORD")), "hunter2", uint8(index(names, "MAX_BATCH")), "5")
	f.Add(uint8(index(names, "MYSQL_DSN")), "root:hunter2@tcp(127.0.0.1:3306)/uids", uint8(index(names, "WORKER_MODE")), "disposable")
	f.Add(uint8(index(names, "BLOCKS_ENABLED")), "true", uint8(index(names, "BLOCKS_BLOCK_SIZE")), "200000")
	// Layouts and rings the generator could not issue IDs with.
	f.Add(uint8(index(names, "TIME_BITS")), "20", uint8(index(names, "WORKER_BITS")), "27")
	f.Add(uint8(index(names, "WORKER_BITS")), "8", uint8(index(names, "SEQ_BITS")), "24")
	f.Add(uint8(index(names, "EPOCH")), "2999-01-01T00:00:00Z", uint8(index(names, "RUNWAY_WARNING")), "0")
	f.Add(uint8(index(names, "EPOCH")), "1990-01-01T00:00:00Z", uint8(index(names, "TIME_BITS")), "30")
	f.Add(uint8(index(names, "BOOST_POWER")), "9", uint8(index(names, "RUNWAY_WARNING")), "100y")
	f.Add(uint8(index(names, "LAYOUT")), "uidgenerator", uint8(index(names, "RUNWAY_WARNING")), "0")
	f.Add(uint8(index(names, "LAYOUT")), "28/22/13@2016-05-20T00:00:00+08:00", uint8(index(names, "EPOCH")), "2026-01-01T00:00:00Z")
	f.Add(uint8(index(names, "LAYOUT")), "31/8/24", uint8(index(names, "BOOST_POWER")), "0")

	f.Fuzz(func(t *testing.T, i uint8, v string, j uint8, w string) {
		if strings.ContainsRune(v+w, 0) {
			t.Skip("an environment value cannot hold NUL")
		}
		clearEnv(t)
		a, b := EnvPrefix+"_"+names[int(i)%len(names)], EnvPrefix+"_"+names[int(j)%len(names)]
		t.Setenv(a, v)
		if b != a {
			t.Setenv(b, w)
		}
		cfg, err := LoadConfig()
		if err == nil {
			if verr := cfg.Validate(); verr != nil {
				t.Fatalf("%s=%q %s=%q: LoadConfig accepted a configuration Validate refuses: %v", a, v, b, w, verr)
			}
			return
		}
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("%s=%q %s=%q: error %T %v is not a configuration error", a, v, b, w, err, err)
		}
		msg := err.Error()
		if !namesVariable(msg, a) && !namesVariable(msg, b) {
			t.Fatalf("%s=%q %s=%q: error %q names neither", a, v, b, w, msg)
		}
		for _, s := range []struct{ name, value string }{{a, v}, {b, w}} {
			if (strings.HasSuffix(s.name, "_PASSWORD") || strings.HasSuffix(s.name, "_TOKEN")) && len(s.value) >= 4 && strings.Contains(msg, s.value) {
				t.Fatalf("%s=%q: error %q quotes the secret", s.name, s.value, msg)
			}
		}
	})
}

// namesVariable reports whether msg names the variable; the layout's bit
// widths share one name when only their sum is wrong.
func namesVariable(msg, variable string) bool {
	if strings.Contains(msg, variable) {
		return true
	}
	switch strings.TrimPrefix(variable, EnvPrefix+"_") {
	case "TIME_BITS", "WORKER_BITS", "SEQ_BITS":
		return strings.Contains(msg, "DISPENSER_TIME_BITS/WORKER_BITS/SEQ_BITS")
	}
	return false
}

func index(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	panic("no configuration variable " + name)
}

// FuzzParseInstant: an instant it reads prints (String, RFC 3339 UTC) as
// a value it reads back to the same instant; a plain date is midnight
// UTC; what it refuses is refused with the expected form.
func FuzzParseInstant(f *testing.F) {
	for _, s := range []string{"2026-01-01", "2026-01-01T00:00:00Z", "2020-06-01T00:00:00+02:00", "2026-02-30", "0000-01-01",
		"9999-12-31T23:59:59Z", "2026-01-01T00:00:00.123456789-07:00", "2026-1-1", " 2026-01-01", "", "yesterday", "2026-01-01T00:00:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseInstant(s)
		if err != nil {
			if !strings.Contains(err.Error(), "e.g. 2026-01-01T00:00:00Z") {
				t.Fatalf("%q: %v does not say the form", s, err)
			}
			return
		}
		if d, derr := time.Parse(time.DateOnly, s); derr == nil && !got.Equal(d) {
			t.Fatalf("%q: %v, want midnight UTC %v", s, got, d)
		}
		back, err := ParseInstant(Instant{got}.String())
		if err != nil || !back.Equal(got.Truncate(time.Second)) {
			t.Fatalf("%q: %v prints as %q, read back as %v, %v", s, got, Instant{got}.String(), back, err)
		}
	})
}
