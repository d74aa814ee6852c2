package main

import (
	"bytes"
	"database/sql"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
)

// TestUnissuableConfigurationsLeaveNothingBehind runs the binary with
// configurations that cannot issue IDs (each once started, reported ready
// and answered every request with a 500, or was refused only after it had
// claimed a worker ID) against a real MySQL database and a real NATS
// server. Each must exit 2 with one line naming the variable, having
// created no table, no bucket and no stream: refused before any side
// effect. A good configuration on the same stores then creates both,
// which proves the checks could see them.
func TestUnissuableConfigurationsLeaveNothingBehind(t *testing.T) {
	cases := []struct {
		name  string
		env   []string
		names string
	}{
		{"epoch in the future", []string{"DISPENSER_EPOCH=" + time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339)}, "DISPENSER_EPOCH"},
		{"runway over (20/27/16 from 2026)", []string{"DISPENSER_TIME_BITS=20", "DISPENSER_WORKER_BITS=27"}, "DISPENSER_TIME_BITS"},
		{"UidGenerator's 28/22/13 from 2016-05-20+08:00", []string{"DISPENSER_TIME_BITS=28", "DISPENSER_WORKER_BITS=22", "DISPENSER_SEQ_BITS=13", "DISPENSER_EPOCH=2016-05-20T00:00:00+08:00"}, "DISPENSER_TIME_BITS"},
		{"runway shorter than the warning", []string{"DISPENSER_RUNWAY_WARNING=100y"}, "DISPENSER_RUNWAY_WARNING"},
		// A large boost power or many sequence bits are capped by the ring's
		// memory now; a ring below 64 slots, or more lanes than worker IDs,
		// cannot be.
		{"ring too small", []string{"DISPENSER_RING_MEMORY=100"}, "DISPENSER_RING_MEMORY"},
		{"more lanes than worker IDs", []string{"DISPENSER_WORKER_BITS=4", "DISPENSER_TIME_BITS=37", "DISPENSER_MAX_LANES=17"}, "DISPENSER_MAX_LANES"},
	}
	srv := testenv.NATS(t, nil)
	url := srv.ClientURL()
	dsn := testenv.MySQL(t)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables := func() int {
		t.Helper()
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	streams := func() int {
		t.Helper()
		jsz, err := srv.Jsz(nil)
		if err != nil {
			t.Fatal(err)
		}
		return jsz.Streams
	}
	for _, tc := range cases {
		for _, store := range []struct {
			name string
			env  []string
		}{
			{"KV leased", []string{"DISPENSER_NATS_URL=" + url}},
			{"MySQL disposable", []string{"DISPENSER_NATS_URL=" + url, "DISPENSER_MYSQL_DSN=" + dsn, "DISPENSER_WORKER_MODE=disposable"}},
		} {
			t.Run(tc.name+"/"+store.name, func(t *testing.T) {
				cmd := command(t, nil, append(store.env, tc.env...)...)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				start := time.Now()
				code := exitCode(cmd.Run())
				lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
				if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], tc.names) {
					t.Fatalf("exit %d after %v; want 2 and one line naming %s; stderr:\n%s", code, time.Since(start), tc.names, stderr.String())
				}
				if n, m := tables(), streams(); n != 0 || m != 0 {
					t.Fatalf("refused start left %d tables and %d streams behind; stderr: %s", n, m, stderr.String())
				}
			})
		}
	}

	// The same stores show what a start that is not refused leaves (the
	// disposable start without its wait of W before the row is read back).
	for _, env := range [][]string{{"DISPENSER_NATS_URL=" + url}, {"DISPENSER_NATS_URL=" + url, "DISPENSER_MYSQL_DSN=" + dsn, "DISPENSER_WORKER_MODE=disposable", "DISPENSER_STORE_LOSS_WINDOW=0"}} {
		p := startLogged(t, append(env, "DISPENSER_LOG_FORMAT=json")...)
		p.waitFor(servingLine)
		if code := p.stop(syscall.SIGTERM); code != 0 {
			t.Fatalf("exit %d; log:\n%s", code, p.log.String())
		}
	}
	if n, m := tables(), streams(); n == 0 || m == 0 {
		t.Fatalf("a good start left %d tables and %d streams: the checks above could not see them", n, m)
	}

	// The fleet is recorded now: another subject prefix on the same store
	// is refused with exit 2, naming both values.
	for _, env := range [][]string{{"DISPENSER_NATS_URL=" + url}, {"DISPENSER_NATS_URL=" + url, "DISPENSER_MYSQL_DSN=" + dsn, "DISPENSER_WORKER_MODE=disposable"}} {
		cmd := command(t, nil, append(env, "DISPENSER_SUBJECT_PREFIX=ids")...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if code := exitCode(cmd.Run()); code != 2 || !strings.Contains(stderr.String(), "DISPENSER_SUBJECT_PREFIX") || !strings.Contains(stderr.String(), "subject prefix ids, the fleet's is uid") {
			t.Fatalf("another prefix on the fleet's store: exit %d; stderr:\n%s", code, stderr.String())
		}
	}
}
