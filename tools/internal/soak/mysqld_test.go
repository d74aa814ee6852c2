package soak

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
)

// TestMySQLdKillRestartPause starts the soak's own mariadbd, commits rows,
// SIGKILLs it and restarts it on the same data directory (every
// committed row must survive, as the leases' safety needs), pauses it
// (a query waits, then completes) and stops it.
func TestMySQLdKillRestartPause(t *testing.T) {
	if _, _, err := findMariaDB(); errors.Is(err, errNoMariaDB) {
		if os.Getenv(testenv.RequireMySQLEnv) == "1" {
			t.Fatal("no mariadbd installed (required: " + testenv.RequireMySQLEnv + "=1)")
		}
		t.Skip("no mariadbd installed")
	}
	ctx := context.Background()
	var mu sync.Mutex
	var crashes []string
	start := time.Now()
	m, err := startMySQLd(ctx, t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)), func(msg string) {
		mu.Lock()
		crashes = append(crashes, msg)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.stop()
	t.Logf("install and start: %s", time.Since(start).Round(time.Millisecond))
	if !strings.HasPrefix(m.DSN(), "root@tcp(127.0.0.1:") {
		t.Fatalf("DSN %q: want root over TCP on loopback", m.DSN())
	}

	db, err := sql.Open("mysql", m.DSN()+"?timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("CREATE DATABASE soaktest")
	exec("CREATE TABLE soaktest.t (n INT PRIMARY KEY) ENGINE=InnoDB")
	for _, n := range []string{"1", "2", "3"} {
		exec("INSERT INTO soaktest.t VALUES (" + n + ")")
	}

	down, err := m.killAndRestart(ctx, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILL to accepting logins: %s", down.Round(time.Millisecond))
	// The pool's connections died with the server: database/sql retries
	// a bad connection on a new one.
	var count int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM soaktest.t").Scan(&count); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if count != 3 {
		t.Fatalf("%d rows after SIGKILL and restart, want the 3 committed", count)
	}

	pauseDone := make(chan error, 1)
	go func() { pauseDone <- m.pause(ctx, 500*time.Millisecond) }()
	// A query sent while the server is stopped completes once it runs again.
	testenv.WaitFor(t, 5*time.Second, "mariadbd stopped", func() bool { return processStopped(m.pid()) })
	qStart := time.Now()
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM soaktest.t").Scan(&count); err != nil {
		t.Fatalf("query across the pause: %v", err)
	}
	if waited := time.Since(qStart); waited < 100*time.Millisecond {
		t.Errorf("a query during the pause answered in %s: the server was not stopped", waited)
	}
	if err := <-pauseDone; err != nil {
		t.Fatal(err)
	}

	m.stop()
	mu.Lock()
	defer mu.Unlock()
	if len(crashes) != 0 {
		t.Fatalf("exits reported as crashes: %q", crashes)
	}
	if log, err := os.ReadFile(m.ErrorLog()); err != nil || !strings.Contains(string(log), "ready for connections") {
		t.Fatalf("error log %s: %v; want mariadbd's start-up lines in it", m.ErrorLog(), err)
	}
}
