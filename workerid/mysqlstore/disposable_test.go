package mysqlstore_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
	"github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore"
)

// disposableAssigner is a disposable assigner on dsn whose starts are
// told apart by host, with the default loss window W (2 minutes) and the
// fleet recorded as the dispenser records it before claiming. Its wait
// of W is wait (a test clock); nil: no wait.
func disposableAssigner(t *testing.T, dsn, host string, wait func(context.Context, time.Duration) error) *mysqlstore.Assigner {
	t.Helper()
	cfg := mysqlstore.DefaultConfig()
	cfg.DSN, cfg.Mode = dsn, workerid.ModeDisposable
	cfg.Host = workerid.Host{Name: host, Port: "7000", Type: workerid.HostContainer}
	cfg.StoreLossWindow = workerid.DefaultConfig().StoreLossWindow
	a := openMySQLAssigner(t, cfg)
	if wait == nil {
		wait = func(context.Context, time.Duration) error { return nil }
	}
	mysqlstore.SetLossWait(a, wait)
	f := workerid.Fleet{Generation: 1, Layout: uidcore.DefaultLayout().String(), WorkerMode: workerid.ModeDisposable, SubjectPrefix: "uid"}
	if _, err := a.RecordFleet(context.Background(), f); err != nil {
		t.Fatalf("RecordFleet: %v", err)
	}
	return a
}

func fleetMax(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var m int64
	if err := db.QueryRow("SELECT MAX_WORKER_ID FROM UID_FLEET WHERE ID = 1").Scan(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDisposableRowForgottenByFailoverIsRefused reproduces issue 31's
// disposable hole (disposable.pml, MUTANT_NO_DURABLE_ROW): start A
// inserts its WORKER_NODE row; a failover to a replica that lacks the
// last transactions forgets the row and the fleet record's maximum
// together (as a restored dump would: the row deleted, the maximum and
// the auto-increment counter put back); start B then gets A's worker ID.
// A, which reads its row back W after the INSERT, finds B's there and
// claims another: the two never share a worker ID. Before the read-back
// A issued under the ID at once, and B did too.
func TestDisposableRowForgottenByFailoverIsRefused(t *testing.T) {
	dsn := testenv.MySQL(t)
	db := openDB(t, dsn)
	layout := uidcore.DefaultLayout()
	release := make(chan struct{})
	a := disposableAssigner(t, dsn, "host-a", func(ctx context.Context, w time.Duration) error {
		if w != 2*time.Minute {
			t.Errorf("waited %s, want W (the default 2m)", w)
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	b := disposableAssigner(t, dsn, "host-b", nil)
	before := fleetMax(t, db)

	type result struct {
		c   uidcore.Claim
		err error
	}
	claimedA := make(chan result, 1)
	go func() {
		c, err := a.Claim(context.Background(), layout)
		claimedA <- result{c, err}
	}()
	var idA int64
	testwait.WaitFor(t, 5*time.Second, "start A's WORKER_NODE row", func() bool {
		return db.QueryRow("SELECT ID FROM WORKER_NODE WHERE HOST_NAME = 'host-a'").Scan(&idA) == nil
	})

	// The failover: the primary's last transactions are gone.
	for _, q := range []string{
		"DELETE FROM WORKER_NODE WHERE ID = ?",
		"ALTER TABLE WORKER_NODE AUTO_INCREMENT = 1", // InnoDB sets MAX(ID)+1
	} {
		args := []any{}
		if q[0] == 'D' {
			args = append(args, idA)
		}
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := db.Exec("UPDATE UID_FLEET SET MAX_WORKER_ID = ? WHERE ID = 1", before); err != nil {
		t.Fatal(err)
	}

	cb, err := b.Claim(context.Background(), layout)
	if err != nil {
		t.Fatalf("start B: %v", err)
	}
	if int64(cb.WorkerID()) != idA {
		t.Fatalf("start B got worker ID %d, not A's %d: the test's loss did not reproduce the failover", cb.WorkerID(), idA)
	}
	close(release)
	r := <-claimedA
	if r.err != nil {
		t.Fatalf("start A after the loss: %v", r.err)
	}
	if r.c.WorkerID() == cb.WorkerID() {
		t.Fatalf("starts A and B both use worker ID %d: the forgotten row was not seen", cb.WorkerID())
	}
	if n := a.Regressions(); n != 1 {
		t.Errorf("start A counted %d regressions, want 1 (the forgotten row)", n)
	}
	var host string
	if err := db.QueryRow("SELECT HOST_NAME FROM WORKER_NODE WHERE ID = ?", r.c.WorkerID()).Scan(&host); err != nil || host != "host-a" {
		t.Errorf("row %d of A's final worker ID: host %q, %v", r.c.WorkerID(), host, err)
	}
	t.Logf("A inserted %d, lost it to B, claimed %d instead", idA, r.c.WorkerID())
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
	a := disposableAssigner(t, dsn, "host-a", nil)
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

// TestDisposableConcurrentStartsUnique: starts on eight hosts claim at
// once, each through the full check (the fleet maximum, the row read
// back after its wait), while another writer (UidGenerator) inserts rows
// of its own: no worker ID is handed out twice, none is refused (no
// loss), and the fleet's maximum is the highest worker ID taken.
func TestDisposableConcurrentStartsUnique(t *testing.T) {
	dsn := testenv.MySQL(t)
	db := openDB(t, dsn)
	layout := uidcore.DefaultLayout()
	const hosts, starts = 8, 5
	assigners := make([]*mysqlstore.Assigner, hosts)
	for i := range assigners {
		assigners[i] = disposableAssigner(t, dsn, "host-"+string(rune('a'+i)), nil)
	}
	var mu sync.Mutex
	seen := map[uint64]string{}
	record := func(id uint64, who string) {
		mu.Lock()
		defer mu.Unlock()
		if prev, dup := seen[id]; dup {
			t.Errorf("worker ID %d handed to %s and %s", id, prev, who)
		}
		seen[id] = who
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 20 {
			res, err := db.Exec(`INSERT INTO WORKER_NODE (HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) VALUES ('uidgenerator', 'x', 2, CURDATE(), NOW(), NOW())`)
			if err != nil {
				t.Error(err)
				return
			}
			id, _ := res.LastInsertId()
			record(uint64(id), "the other writer")
		}
	})
	for i, a := range assigners {
		wg.Go(func() {
			for range starts {
				c, err := a.Claim(context.Background(), layout)
				if err != nil {
					t.Error(err)
					return
				}
				record(c.WorkerID(), "host "+string(rune('a'+i)))
			}
		})
	}
	wg.Wait()
	if len(seen) != hosts*starts+20 {
		t.Errorf("%d distinct worker IDs, want %d", len(seen), hosts*starts+20)
	}
	var highest uint64
	for id, who := range seen {
		if who != "the other writer" {
			highest = max(highest, id)
		}
	}
	if m := fleetMax(t, db); m != int64(highest) {
		t.Errorf("fleet maximum %d, want the highest worker ID taken, %d", m, highest)
	}
	for i, a := range assigners {
		if n := a.Regressions(); n != 0 {
			t.Errorf("host %d counted %d regressions with no loss", i, n)
		}
	}
}
