package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/workerid"
	"github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore"
)

func openDurability(t *testing.T, dsn string, durability workerid.Durability, log *slog.Logger) (*mysqlstore.Assigner, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := mysqlstore.NewAssigner(ctx, mysqlstore.Config{DSN: dsn, Config: workerid.Config{StoreDurability: durability, Logger: log}})
	if err == nil {
		t.Cleanup(func() { a.Close() })
	}
	return a, err
}

// TestDurableServerAccepted: the shared MariaDB flushes every commit
// (innodb_flush_log_at_trx_commit=1) and has no binary log, so even
// StoreDurability=refuse starts and nothing is warned about.
func TestDurableServerAccepted(t *testing.T) {
	dsn := testenv.MySQL(t)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var flush, logBin, readOnly string
	if err := db.QueryRow("SELECT @@GLOBAL.innodb_flush_log_at_trx_commit, @@GLOBAL.log_bin, @@GLOBAL.read_only").Scan(&flush, &logBin, &readOnly); err != nil {
		t.Fatal(err)
	}
	if flush != "1" || logBin != "0" || readOnly != "0" {
		t.Skipf("the shared server is not durable as this test expects (flush %s, log_bin %s, read_only %s)", flush, logBin, readOnly)
	}
	var logs testenv.LogBuffer
	if _, err := openDurability(t, dsn, workerid.DurabilityRefuse, logs.Logger(slog.LevelInfo)); err != nil {
		t.Fatalf("StoreDurability=refuse on a durable server: %v", err)
	}
	if strings.Contains(logs.String(), "may forget") {
		t.Errorf("a durable server was warned about:\n%s", logs.String())
	}
}

// TestLazyServerWarnedOrRefused: a real MariaDB of the test's own that
// flushes InnoDB's log once a second and syncs its binary log never is
// warned about, each setting named (the default), or refused.
func TestLazyServerWarnedOrRefused(t *testing.T) {
	dsn := testenv.PrivateMariaDB(t, "--innodb-flush-log-at-trx-commit=2", "--log-bin=binlog", "--sync-binlog=0", "--server-id=1")
	var logs testenv.LogBuffer
	if _, err := openDurability(t, dsn, "", logs.Logger(slog.LevelInfo)); err != nil {
		t.Fatalf("the default (warn) refused: %v", err)
	}
	for _, want := range []string{"innodb_flush_log_at_trx_commit=2", "set innodb_flush_log_at_trx_commit=1", "sync_binlog=0", "set sync_binlog=1"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the warnings do not say %q:\n%s", want, logs.String())
		}
	}
	_, err := openDurability(t, dsn, workerid.DurabilityRefuse, nil)
	var de *workerid.DurabilityError
	if !errors.As(err, &de) || len(de.Findings) != 2 || !strings.Contains(err.Error(), "StoreDurability=warn") {
		t.Fatalf("StoreDurability=refuse: %v; want a *DurabilityError with the two settings", err)
	}
}
