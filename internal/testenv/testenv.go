// Package testenv gives tests the real servers they talk to: a fresh
// database on the machine's MySQL-compatible server and an embedded
// nats-server with JetStream on a random port.
package testenv

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// MySQLDSNEnv names the variable with the DSN of the test server (without a
// database name); its default is root with no password on 127.0.0.1:3306.
const MySQLDSNEnv = "UID_TEST_MYSQL_DSN"

// RequireMySQLEnv, when "1", turns a missing MySQL server into a test
// failure instead of a skip. .ci/run sets it.
const RequireMySQLEnv = "UID_REQUIRE_MYSQL"

// MySQL creates a fresh database for the test, drops it when the test ends,
// and returns a DSN for it (parseTime on). Without a reachable server the
// test is skipped with the reason, or fails when RequireMySQLEnv is set.
func MySQL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(MySQLDSNEnv)
	if base == "" {
		base = "root@tcp(127.0.0.1:3306)/"
	}
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("testenv: %s is not a valid DSN: %v", MySQLDSNEnv, err)
	}
	cfg.Timeout = 3 * time.Second
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err == nil {
		err = admin.Ping()
	}
	if err != nil {
		msg := "testenv: no MySQL server at " + cfg.Addr + " (" + redact(err, cfg.Passwd) + "); set " + MySQLDSNEnv
		if os.Getenv(RequireMySQLEnv) == "1" {
			t.Fatal(msg + " (required: " + RequireMySQLEnv + "=1)")
		}
		t.Skip(msg)
	}
	name := "uidtest_" + randomHex(6)
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		admin.Close()
		t.Fatalf("testenv: create database: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name); err != nil {
			t.Errorf("testenv: drop database %s: %v", name, err)
		}
		admin.Close()
	})
	cfg.DBName = name
	cfg.ParseTime = true
	return cfg.FormatDSN()
}

func redact(err error, password string) string {
	s := err.Error()
	if password == "" {
		return s
	}
	out := []byte{}
	for i := 0; i < len(s); {
		if len(s)-i >= len(password) && s[i:i+len(password)] == password {
			out = append(out, "***"...)
			i += len(password)
			continue
		}
		out = append(out, s[i])
		i++
	}
	return string(out)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// NATS starts an embedded nats-server with JetStream on a random loopback
// port and a temporary store, shut down when the test ends. Pass opts to
// change the defaults (nil for none); Host, Port and StoreDir are set here
// unless opts sets them.
func NATS(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	if opts == nil {
		opts = &server.Options{}
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = -1
	}
	opts.JetStream = true
	if opts.StoreDir == "" {
		opts.StoreDir = t.TempDir()
	}
	opts.NoSigs = true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("testenv: nats-server: %v", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		t.Fatal("testenv: nats-server not ready after 10s")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

// ProcessCPU is the CPU time (user and system) the process has used:
// what a benchmark costs the whole process, its goroutines in the
// background (an exporter, a server) included.
func ProcessCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CheckDistinct fails the test when ids holds a duplicate; it sorts ids.
// Uniqueness is the product's one promise: every test that collects the
// IDs or numbers something handed out checks them with this.
func CheckDistinct(tb testing.TB, ids []uint64) {
	tb.Helper()
	slices.Sort(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			tb.Fatalf("duplicate ID %d among %d", ids[i], len(ids))
		}
	}
}

// CheckJSSafe fails the test when an ID of ids is not exact as a
// JavaScript Number: the JS-safe preset's promise to every client.
func CheckJSSafe(tb testing.TB, ids []uint64) {
	tb.Helper()
	for _, id := range ids {
		if id > uidcore.MaxJSSafeID || uint64(float64(id)) != id {
			tb.Fatalf("ID %d is not exact as a JavaScript Number", id)
		}
	}
}
