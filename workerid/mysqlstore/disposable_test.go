package mysqlstore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
	"github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore"
)

// disposableAssigner is a disposable assigner on dsn with the default
// loss window W (2 minutes), its wait of W replaced by none, and the fleet
// recorded as the dispenser records it before claiming.
func disposableAssigner(t *testing.T, dsn, host string) *mysqlstore.Assigner {
	t.Helper()
	cfg := mysqlstore.DefaultConfig()
	cfg.DSN, cfg.Mode = dsn, workerid.ModeDisposable
	cfg.Host = workerid.Host{Name: host, Port: "7000", Type: workerid.HostContainer}
	cfg.StoreLossWindow = workerid.DefaultConfig().StoreLossWindow
	a := openMySQLAssigner(t, cfg)
	mysqlstore.SetLossWait(a, func(context.Context, time.Duration) error { return nil })
	f := workerid.Fleet{Generation: 1, Layout: uidcore.DefaultLayout().String(), WorkerMode: workerid.ModeDisposable, SubjectPrefix: "uid"}
	if _, err := a.RecordFleet(context.Background(), f); err != nil {
		t.Fatalf("RecordFleet: %v", err)
	}
	return a
}

func fleetMax(t testing.TB, db *sql.DB) int64 {
	t.Helper()
	var m int64
	if err := db.QueryRow("SELECT MAX_WORKER_ID FROM UID_FLEET WHERE ID = 1").Scan(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDisposableCounterFallBackIsRefused: the auto-increment counter
// falls back with no loss of rows (the newest rows deleted by an
// operator, then MySQL before 8.0 restarting: MAX(ID)+1); the next start
// is handed a dead start's worker ID, not above the fleet's highest
// recorded one, refuses it and takes the one after that maximum
// (disposable.pml, MUTANT_ACCEPT_REUSED).
func TestDisposableCounterFallBackIsRefused(t *testing.T) {
	dsn := testenv.MySQL(t)
	db := openDB(t, dsn)
	a := disposableAssigner(t, dsn, "host-a")
	layout := uidcore.DefaultLayout()
	var last uint64
	for range 3 {
		last = claimOK(t, a, layout).WorkerID()
	}
	if m := fleetMax(t, db); m != int64(last) {
		t.Fatalf("fleet maximum %d after three starts, want the last worker ID %d", m, last)
	}
	for _, q := range []string{"DELETE FROM WORKER_NODE WHERE ID > 1", "ALTER TABLE WORKER_NODE AUTO_INCREMENT = 1"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var next int64
	if err := db.QueryRow("SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'WORKER_NODE'").Scan(&next); err != nil || next > int64(last) {
		t.Fatalf("the counter is at %d (%v): it did not fall back below %d, the test shows nothing", next, err, last)
	}
	c := claimOK(t, a, layout)
	if c.WorkerID() != last+1 {
		t.Fatalf("after the counter fell back the start got worker ID %d, want %d (the one after the fleet's highest)", c.WorkerID(), last+1)
	}
	if n := a.Regressions(); n != 1 {
		t.Errorf("%d regressions counted, want 1 (the reused worker ID refused)", n)
	}
	if m := fleetMax(t, db); m != int64(last+1) {
		t.Errorf("fleet maximum %d, want %d", m, last+1)
	}
}
