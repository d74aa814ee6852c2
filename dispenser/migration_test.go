package dispenser

import (
	"context"
	"database/sql"
	"errors"
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
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE WORKER_NODE (ID BIGINT NOT NULL AUTO_INCREMENT, HOST_NAME VARCHAR(64) NOT NULL, PORT VARCHAR(64) NOT NULL,
			TYPE INT NOT NULL, LAUNCH_DATE DATE NOT NULL, MODIFIED TIMESTAMP NOT NULL, CREATED TIMESTAMP NOT NULL, PRIMARY KEY(ID)) ENGINE=InnoDB`,
		`INSERT INTO WORKER_NODE (ID, HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) VALUES (2000, '10.0.0.1', '1700000000000-1', 2, CURDATE(), NOW(), NOW())`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
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
