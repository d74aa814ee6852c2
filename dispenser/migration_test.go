package dispenser

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// TestMigrationOffUidGeneratorsWorkerNode runs docs/operations.md's
// migration on MariaDB: a WORKER_NODE past the default layout's worker
// range refuses a disposable start with the default layout before
// anything is written (no row, no fleet record), and the layout keeping
// UidGenerator's widths with a later epoch then starts on the same table,
// beside UidGenerator inserting rows of its own, and its IDs have worker
// fields no old ID has; uid.parse reads old IDs with Uid-Layout.
func TestMigrationOffUidGeneratorsWorkerNode(t *testing.T) {
	dsn := testenv.MySQL(t)
	url := testenv.NATS(t, nil).ClientURL()
	db := uidGeneratorWorkerNode(t, dsn, "", 2000)
	count := func(q string) int {
		t.Helper()
		var n int
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	cfg := testConfig(url, dsn)
	cfg.WorkerMode = workerid.ModeDisposable
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := Start(ctx, cfg, WithLogger(testLogger()))
		cancel()
		var re *workerid.DisposableRangeError
		if !errors.As(err, &re) || !re.Before || !strings.Contains(err.Error(), "would hand out worker ID 2001 or above (nothing taken)") {
			t.Fatalf("default layout on a WORKER_NODE at 2000: %v", err)
		}
	}
	if n := count("SELECT COUNT(*) FROM WORKER_NODE"); n != 1 {
		t.Fatalf("refused starts left %d rows: a row was burnt", n)
	}
	if n := count("SELECT COUNT(*) FROM " + cfg.FleetTable); n != 0 {
		t.Fatalf("a refused start recorded the fleet (%d rows): its layout would bind every later start", n)
	}

	// UidGenerator keeps starting JVMs beside the dispenser.
	if _, err := db.Exec(`INSERT INTO WORKER_NODE (HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) VALUES ('10.0.0.2', '1700000000000-2', 2, CURDATE(), NOW(), NOW())`); err != nil {
		t.Fatal(err)
	}
	later, err := uidcore.ParseLayout("28/22/13@2026-12-01T00:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	cfg.LayoutName = "28/22/13@2026-12-01T00:00:00Z"
	cfg.TimeBits, cfg.WorkerBits, cfg.SeqBits, cfg.Epoch = later.TimeBits, later.WorkerBits, later.SeqBits, Instant{later.Epoch}
	if later.Epoch.After(time.Now()) {
		t.Skip("the documented epoch is in the future on this clock")
	}
	d := start(t, cfg)
	if d.WorkerID() != 2002 {
		t.Fatalf("worker ID %d, want 2002: the row after UidGenerator's", d.WorkerID())
	}
	c := client(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ids, err := c.Batch(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	old := uidcore.UidGeneratorLayout()
	for _, id := range ids {
		// Read as UidGenerator's IDs (the same widths), every new ID has a
		// worker field above every row UidGenerator took.
		if w := old.ParseUID(id).WorkerID; w != "2002" {
			t.Fatalf("ID %d has worker field %s as UidGenerator reads it, want 2002", id, w)
		}
	}
	for _, tc := range []struct {
		id   uint64
		want uidcore.ParsedJSON
	}{
		{9223372002495045632, uidcore.ParsedJSON{UID: "9223372002495045632", Timestamp: "2024-11-20 13:24:15", WorkerID: "1", Sequence: "0"}},
	} {
		got, err := c.ParseWithLayout(ctx, tc.id, uidcore.PresetUidGenerator)
		if err != nil || got != tc.want {
			t.Fatalf("uid.parse %d with Uid-Layout uidgenerator: %+v, %v; want %+v", tc.id, got, err, tc.want)
		}
	}
	wrapped, err := c.ParseWithLayout(ctx, uint64(1<<64-7024218214296920064), uidcore.PresetUidGenerator)
	if err != nil || wrapped.UID != "-7024218214296920064" || wrapped.Timestamp != "2026-12-01 08:14:16" || wrapped.WorkerID != "7" || wrapped.Wrapped == "" {
		t.Fatalf("a wrapped ID: %+v, %v", wrapped, err)
	}
}

// TestRefusedStartPastTheAutoIncrementRecordsNothing: a WORKER_NODE
// whose auto-increment is past the layout's worker range while MAX(ID)
// is not (rows deleted) refuses a disposable start before anything is
// written, like one whose MAX(ID) is past it: no row burnt, no fleet
// record (which would bind every later start to the refused layout).
func TestRefusedStartPastTheAutoIncrementRecordsNothing(t *testing.T) {
	dsn := testenv.MySQL(t)
	db := uidGeneratorWorkerNode(t, dsn, "AUTO_INCREMENT=3000", 500)
	cfg := testConfig(testenv.NATS(t, nil).ClientURL(), dsn)
	cfg.WorkerMode = workerid.ModeDisposable
	var re *workerid.DisposableRangeError
	if err := startErr(cfg); !errors.As(err, &re) || !re.Before || re.WorkerID != 3000 {
		t.Fatalf("default layout on a WORKER_NODE whose auto-increment is 3000: %v; want a refusal before the insert, naming 3000", err)
	}
	var rows, records int
	if err := db.QueryRow("SELECT (SELECT COUNT(*) FROM WORKER_NODE), (SELECT COUNT(*) FROM "+cfg.FleetTable+")").Scan(&rows, &records); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || records != 0 {
		t.Fatalf("the refused start left %d WORKER_NODE rows (want 1) and %d fleet records (want 0)", rows, records)
	}
}

// TestResetFleetAfterAStrayRecord: a fleet record written by a start
// that should never have written it (here the default layout's, written
// as a start of that configuration records it and then stopped before it
// served) binds every later start on the store: the migration's layout
// is refused as a fleet mismatch. dispenser -reset-fleet (ResetFleet)
// removes it, and the migration's layout starts. Without it the only way
// out was editing UID_FLEET by hand.
func TestResetFleetAfterAStrayRecord(t *testing.T) {
	dsn := testenv.MySQL(t)
	url := testenv.NATS(t, nil).ClientURL()
	db := uidGeneratorWorkerNode(t, dsn, "", 500)
	cfg := testConfig(url, dsn)
	cfg.WorkerMode = workerid.ModeDisposable
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	recordFleet(ctx, t, cfg)
	var stray string
	if err := db.QueryRow("SELECT LAYOUT FROM " + cfg.FleetTable).Scan(&stray); err != nil || stray != cfg.Layout().String() {
		t.Fatalf("the stray fleet record: %q, %v; want the default layout", stray, err)
	}

	later, err := uidcore.ParseLayout("28/22/13@2026-12-01T00:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	if later.Epoch.After(time.Now()) {
		t.Skip("the documented epoch is in the future on this clock")
	}
	next := cfg
	next.LayoutName = "28/22/13@2026-12-01T00:00:00Z"
	next.TimeBits, next.WorkerBits, next.SeqBits, next.Epoch = later.TimeBits, later.WorkerBits, later.SeqBits, Instant{later.Epoch}
	var ce *ConfigError
	if err := startErr(next); !errors.As(err, &ce) {
		t.Fatalf("the migration's layout after the stray record: %v; want the fleet mismatch", err)
	}
	removed, found, err := ResetFleet(ctx, next, testLogger())
	if err != nil || !found || removed.Layout != stray {
		t.Fatalf("ResetFleet: removed %+v, found %v, %v; want the stray record", removed, found, err)
	}
	d := start(t, next)
	if d.WorkerID() <= 500 {
		t.Fatalf("worker ID %d, want one above the table's rows", d.WorkerID())
	}
	var layout string
	if err := db.QueryRow("SELECT LAYOUT FROM " + cfg.FleetTable).Scan(&layout); err != nil || layout != later.String() {
		t.Fatalf("the fleet record after the reset and a start: %q, %v; want %s", layout, err, later)
	}
}

// recordFleet writes cfg's fleet record to its worker-ID store, as a
// start of cfg does before it claims a worker ID.
func recordFleet(ctx context.Context, t *testing.T, cfg Config) {
	t.Helper()
	d := &Dispenser{cfg: cfg, log: testLogger()}
	url, closeNATS, err := d.connectNATS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closeNATS()
	closeAssigner, err := d.openAssigner(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAssigner()
	if _, err := d.assigner.(workerid.FleetStore).RecordFleet(ctx, cfg.fleet()); err != nil {
		t.Fatal(err)
	}
}

// uidGeneratorWorkerNode creates UidGenerator's WORKER_NODE in dsn's
// database (options after ENGINE=InnoDB, e.g. an AUTO_INCREMENT) with
// one row, rowID, and returns the database.
func uidGeneratorWorkerNode(t *testing.T, dsn, options string, rowID int) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE WORKER_NODE (ID BIGINT NOT NULL AUTO_INCREMENT, HOST_NAME VARCHAR(64) NOT NULL, PORT VARCHAR(64) NOT NULL,
			TYPE INT NOT NULL, LAUNCH_DATE DATE NOT NULL, MODIFIED TIMESTAMP NOT NULL, CREATED TIMESTAMP NOT NULL, PRIMARY KEY(ID)) ENGINE=InnoDB ` + options,
		fmt.Sprintf(`INSERT INTO WORKER_NODE (ID, HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) VALUES (%d, '10.0.0.1', '1700000000000-1', 2, CURDATE(), NOW(), NOW())`, rowID),
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return db
}
