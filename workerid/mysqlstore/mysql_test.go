package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/uid-dispenser/uid-dispenser/internal/faultproxy"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
	"github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore"
	"github.com/uid-dispenser/uid-dispenser/workerid/workeridtest"
)

func TestMain(m *testing.M) {
	// The driver logs cut connections; the outage tests cut them on purpose.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	goleak.VerifyTestMain(m)
}

// testLogger discards the package's logs unless UID_TEST_LOG=1: leases log
// from their own goroutines, which t.Log does not allow after a test ends.
func testLogger() *slog.Logger {
	if os.Getenv("UID_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func withTestLogger(cfg mysqlstore.Config) mysqlstore.Config {
	cfg.Logger = testLogger()
	return cfg
}

// withAddr returns dsn pointing at addr instead.
func withAddr(t testing.TB, dsn, addr string) string {
	t.Helper()
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	c.Addr = addr
	return c.FormatDSN()
}

func newMySQLAssigner(t testing.TB, cfg mysqlstore.Config) *mysqlstore.Assigner {
	t.Helper()
	if cfg.Mode == workerid.ModeDisposable && cfg.WithDefaults().StoreLossWindow == workerid.DefaultConfig().StoreLossWindow {
		// The durable-row wait is disposable_test.go's, on a test clock:
		// elsewhere a disposable start would wait the default W of 2m.
		cfg.StoreLossWindow = -1
	}
	return openMySQLAssigner(t, cfg)
}

// openMySQLAssigner is newMySQLAssigner with cfg's loss window as it is.
func openMySQLAssigner(t testing.TB, cfg mysqlstore.Config) *mysqlstore.Assigner {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := mysqlstore.NewAssigner(ctx, withTestLogger(cfg))
	if err != nil {
		t.Fatalf("NewAssigner: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func mysqlStore(t *testing.T) workeridtest.Store {
	dsn := testenv.MySQL(t)
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, dsn)
	return workeridtest.Store{
		Addr: c.Addr,
		New: func(t testing.TB, common workerid.Config, addr string) uidcore.Assigner {
			cfg := mysqlstore.DefaultConfig()
			cfg.Config, cfg.DSN = common, withAddr(t, dsn, addr)
			return openMySQLAssigner(t, cfg)
		},
		// The row's owner, expiry and reservation: what a failover to a
		// replica that lacked the last transactions puts back.
		LeaseRecord: func(t testing.TB, workerID uint64) []byte {
			var owner, expiry string
			var reserved int64
			if err := openDB(t, dsn).QueryRow("SELECT OWNER_TOKEN, CAST(LEASE_EXPIRY AS CHAR), RESERVED_SECOND FROM WORKER_LEASE WHERE WORKER_ID = ?", workerID).Scan(&owner, &expiry, &reserved); err != nil {
				t.Fatalf("read lease %d: %v", workerID, err)
			}
			return []byte(owner + "|" + expiry + "|" + strconv.FormatInt(reserved, 10))
		},
		PutLeaseRecord: func(t testing.TB, workerID uint64, record []byte) {
			f := strings.SplitN(string(record), "|", 3)
			if _, err := openDB(t, dsn).Exec("UPDATE WORKER_LEASE SET OWNER_TOKEN = ?, LEASE_EXPIRY = ?, RESERVED_SECOND = ? WHERE WORKER_ID = ?", f[0], f[1], f[2], workerID); err != nil {
				t.Fatalf("write lease %d back: %v", workerID, err)
			}
		},
		SetLossWait: func(a uidcore.Assigner, wait func(context.Context, time.Duration) error) {
			mysqlstore.SetLossWait(a.(*mysqlstore.Assigner), wait)
		},
		Starts: func(t testing.TB) map[uint64]string {
			rows, err := db.Query("SELECT ID, HOST_NAME FROM WORKER_NODE")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			starts := map[uint64]string{}
			for rows.Next() {
				var id uint64
				var host string
				if err := rows.Scan(&id, &host); err != nil {
					t.Fatal(err)
				}
				starts[id] = host
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return starts
		},
		// A failover to a replica that lacks the last transactions, as a
		// restored dump: the row deleted, the auto-increment counter and
		// the fleet record's maximum put back to the rows left (InnoDB
		// sets MAX(ID)+1).
		ForgetStart: func(t testing.TB, workerID uint64) {
			for _, q := range []struct {
				sql  string
				args []any
			}{
				{"DELETE FROM WORKER_NODE WHERE ID = ?", []any{workerID}},
				{"ALTER TABLE WORKER_NODE AUTO_INCREMENT = 1", nil},
				{"UPDATE UID_FLEET SET MAX_WORKER_ID = (SELECT COALESCE(MAX(ID), 0) FROM WORKER_NODE) WHERE ID = 1", nil},
			} {
				if _, err := db.Exec(q.sql, q.args...); err != nil {
					t.Fatalf("%s: %v", q.sql, err)
				}
			}
		},
		// UidGenerator sharing the table.
		OtherWriter: func() (uint64, error) { return insertOtherRow(db, "uidgenerator") },
		FleetMax:    func(t testing.TB) uint64 { return uint64(fleetMax(t, db)) },
	}
}

// insertOtherRow inserts a WORKER_NODE row of host as UidGenerator does
// and returns its ID: another writer sharing the table.
func insertOtherRow(db *sql.DB, host string) (uint64, error) {
	res, err := db.Exec(`INSERT INTO WORKER_NODE (HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) VALUES (?, 'x', 2, CURDATE(), NOW(), NOW())`, host)
	if err != nil {
		return 0, err
	}
	id, err := res.LastInsertId()
	return uint64(id), err
}

func TestMySQLConformance(t *testing.T) {
	workeridtest.Run(t, mysqlStore)
}

func openDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestWorkerNodeSharedWithAnotherWriter: a WORKER_NODE table that another
// writer (UidGenerator) created and filled keeps working: worker IDs
// continue from its auto-increment, also while that writer keeps
// inserting, and rows are filled as UidGenerator fills them.
func TestWorkerNodeSharedWithAnotherWriter(t *testing.T) {
	dsn := testenv.MySQL(t)
	db := openDB(t, dsn)
	// The other writer's own DDL and rows.
	for _, q := range []string{
		`CREATE TABLE WORKER_NODE (ID BIGINT NOT NULL AUTO_INCREMENT, HOST_NAME VARCHAR(64) NOT NULL, PORT VARCHAR(64) NOT NULL,
			TYPE INT NOT NULL, LAUNCH_DATE DATE NOT NULL, MODIFIED TIMESTAMP NOT NULL, CREATED TIMESTAMP NOT NULL, PRIMARY KEY(ID)) ENGINE=InnoDB`,
		`INSERT INTO WORKER_NODE (HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) VALUES ('10.0.0.1', '1700000000000-12345', 2, CURDATE(), NOW(), NOW())`,
		`INSERT INTO WORKER_NODE (HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) VALUES ('10.0.0.2', '1700000000001-54321', 2, CURDATE(), NOW(), NOW())`,
		`ALTER TABLE WORKER_NODE AUTO_INCREMENT = 1000`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cfg := mysqlstore.DefaultConfig()
	cfg.DSN = dsn
	cfg.Mode = workerid.ModeDisposable
	a := newMySQLAssigner(t, cfg)
	// A table shared with UidGenerator outgrows the default's 1,024 worker IDs.
	layout := uidcore.Layout{TimeBits: 31, WorkerBits: 16, SeqBits: 16, Epoch: uidcore.DefaultEpoch}
	first := claimOK(t, a, layout)
	if first.WorkerID() != 1000 {
		t.Fatalf("first worker ID %d, want 1000 (the table's auto-increment)", first.WorkerID())
	}
	var host, port string
	var typ int
	var launchedToday bool
	err := db.QueryRow("SELECT HOST_NAME, PORT, TYPE, LAUNCH_DATE = CURDATE() FROM WORKER_NODE WHERE ID = 1000").Scan(&host, &port, &typ, &launchedToday)
	if err != nil {
		t.Fatal(err)
	}
	if host == "" || port == "" || (typ != 1 && typ != 2) || !launchedToday {
		t.Errorf("row 1000: HOST_NAME %q PORT %q TYPE %d launched today %v", host, port, typ, launchedToday)
	}

	// The other writer keeps inserting while instances claim.
	ids := workeridtest.ClaimAtOnce(t, layout, []uidcore.Assigner{a, a, a, a}, 25,
		func() (uint64, error) { return insertOtherRow(db, "10.0.0.9") }, 100)
	if who, dup := ids[first.WorkerID()]; dup {
		t.Errorf("worker ID %d handed to the dispenser and %s", first.WorkerID(), who)
	}
	for id, who := range ids {
		if who != workeridtest.OtherWriterName && id < 1000 {
			t.Errorf("worker ID %d below the table's auto-increment", id)
		}
	}
	if n := len(ids) + 1; n != 201 { // and the first
		t.Errorf("%d distinct worker IDs, want 201", n)
	}
}

func claimOK(t testing.TB, a uidcore.Assigner, layout uidcore.Layout) uidcore.Claim {
	t.Helper()
	c, err := a.Claim(context.Background(), layout)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return c
}

// TestMySQLSchema: the tables created at start-up have UidGenerator's
// columns (WORKER_NODE) and the configured names, and the shipped
// schema.sql runs as it is.
func TestMySQLSchema(t *testing.T) {
	dsn := testenv.MySQL(t)
	db := openDB(t, dsn)
	cfg := mysqlstore.DefaultConfig()
	cfg.DSN = dsn
	cfg.WorkerNodeTable = "uid_nodes"
	cfg.WorkerLeaseTable = "uid_leases"
	for _, mode := range []workerid.Mode{workerid.ModeDisposable, workerid.ModeLeased} {
		cfg.Mode = mode
		newMySQLAssigner(t, cfg)
	}
	columns := func(table string) string {
		rows, err := db.Query(`SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, EXTRA FROM information_schema.COLUMNS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, table)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var cols []string
		for rows.Next() {
			var name, typ, null, extra string
			if err := rows.Scan(&name, &typ, &null, &extra); err != nil {
				t.Fatal(err)
			}
			cols = append(cols, strings.TrimSpace(strings.Join([]string{name, typ, null, extra}, " ")))
		}
		return strings.Join(cols, ", ")
	}
	const uidGeneratorNode = "ID bigint(20) NO auto_increment, HOST_NAME varchar(64) NO, PORT varchar(64) NO, TYPE int(11) NO, " +
		"LAUNCH_DATE date NO, MODIFIED timestamp NO, CREATED timestamp NO"
	if got := columns("uid_nodes"); got != uidGeneratorNode {
		t.Errorf("uid_nodes columns:\n got %s\nwant %s", got, uidGeneratorNode)
	}
	if got := columns("uid_leases"); !strings.HasPrefix(got, "WORKER_ID bigint(20) NO, OWNER_TOKEN varchar(64) NO, LEASE_EXPIRY datetime(6) NO, RESERVED_SECOND bigint(20) NO") {
		t.Errorf("uid_leases columns: %s", got)
	}
	if got := columns("WORKER_NODE"); got != "" {
		t.Errorf("a WORKER_NODE table exists although the names were configured: %s", got)
	}
	// The fleet record sits beside UidGenerator's table, which it leaves
	// as it is (checked above).
	const fleet = "ID tinyint(4) NO, GENERATION int(11) NO, LAYOUT varchar(64) NO, WORKER_MODE varchar(16) NO, SUBJECT_PREFIX varchar(255) NO, STARTS_AFTER bigint(20) NO, REGIONS varchar(1024) NO, MODIFIED datetime(6) NO, MAX_WORKER_ID bigint(20) NO"
	if got := columns("UID_FLEET"); got != fleet {
		t.Errorf("UID_FLEET columns:\n got %s\nwant %s", got, fleet)
	}

	// schema.sql as an operator would run it.
	ddl, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := mysql.ParseDSN(dsn)
	c.MultiStatements = true
	if _, err := openDB(t, c.FormatDSN()).Exec(string(ddl)); err != nil {
		t.Fatalf("schema.sql: %v", err)
	}
	if got := columns("WORKER_NODE"); got != uidGeneratorNode {
		t.Errorf("schema.sql WORKER_NODE columns: %s", got)
	}
	if got := columns("WORKER_LEASE"); got != columns("uid_leases") {
		t.Errorf("schema.sql WORKER_LEASE columns %s differ from the created table's", got)
	}
}

// A fleet table made before regions existed (no REGIONS column) keeps
// working for a fleet without regions, and gets the column from the
// first instance that records a map; with TablesByHand that instance
// fails, naming the statement to run.
func TestMySQLFleetTableBeforeRegions(t *testing.T) {
	dsn := testenv.MySQL(t)
	db := openDB(t, dsn)
	if _, err := db.Exec("CREATE TABLE old_fleet (ID TINYINT NOT NULL, GENERATION INT NOT NULL, LAYOUT VARCHAR(64) NOT NULL, WORKER_MODE VARCHAR(16) NOT NULL, " +
		"SUBJECT_PREFIX VARCHAR(255) NOT NULL, STARTS_AFTER BIGINT NOT NULL, MODIFIED DATETIME(6) NOT NULL, PRIMARY KEY (ID))"); err != nil {
		t.Fatal(err)
	}
	cfg := mysqlstore.DefaultConfig()
	cfg.DSN, cfg.FleetTable, cfg.TablesByHand = dsn, "old_fleet", true
	if _, err := db.Exec("CREATE TABLE IF NOT EXISTS WORKER_LEASE (WORKER_ID BIGINT NOT NULL PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	plain := workerid.Fleet{Generation: 1, Layout: uidcore.DefaultLayout().String(), WorkerMode: workerid.ModeLeased, SubjectPrefix: "uid"}
	got, err := newMySQLAssigner(t, cfg).RecordFleet(ctx, plain)
	if err != nil || got != plain {
		t.Fatalf("a fleet without regions on the old table: %+v, %v", got, err)
	}
	withMap := plain
	withMap.Regions = "east=0-511,west=512-1023"
	err = newMySQLAssigner(t, cfg).ReplaceFleet(ctx, plain, withMap)
	if err == nil || !strings.Contains(err.Error(), "ALTER TABLE `old_fleet` ADD COLUMN REGIONS") || !strings.Contains(err.Error(), "drop TablesByHand") {
		t.Fatalf("a map on the old table with TablesByHand: %v, want the ALTER TABLE to run and TablesByHand named", err)
	}
	cfg.TablesByHand = false
	a := newMySQLAssigner(t, cfg)
	if err := a.ReplaceFleet(ctx, plain, withMap); err != nil {
		t.Fatalf("a map on the old table, tables created by start-up: %v", err)
	}
	if got, err := a.RecordFleet(ctx, plain); err != nil || got != withMap {
		t.Fatalf("the old table now holds %+v, %v; want %+v", got, err, withMap)
	}
}

func TestMySQLMissingTableWithoutCreate(t *testing.T) {
	cfg := mysqlstore.DefaultConfig()
	cfg.DSN = testenv.MySQL(t)
	cfg.TablesByHand = true
	var log testenv.LogBuffer
	cfg.Logger = log.Logger(slog.LevelInfo)
	_, err := mysqlstore.NewAssigner(context.Background(), cfg)
	if err == nil {
		t.Fatal("no error for a missing WORKER_LEASE table")
	}
	if !strings.Contains(err.Error(), "WORKER_LEASE") || !strings.Contains(err.Error(), "drop TablesByHand") {
		t.Errorf("error does not name the table and the setting: %v", err)
	}
	// Not retried: counted by the retry's log line, not by the time taken.
	if strings.Contains(log.String(), "retrying") {
		t.Errorf("a missing table was retried:\n%s", log.String())
	}
}

// TestMySQLUnreachable: start-up retries up to the deadline, then fails
// naming the server but never the password.
func TestMySQLUnreachable(t *testing.T) {
	const password = "pa55-Secret-xyzzy"
	addr := testenv.RefusedAddr(t)
	cfg := mysqlstore.DefaultConfig()
	cfg.DSN = "dispenser:" + password + "@tcp(" + addr + ")/uids"
	cfg.StoreStartupDeadline = time.Second
	begin := time.Now()
	_, err := mysqlstore.NewAssigner(context.Background(), withTestLogger(cfg))
	took := time.Since(begin)
	if !errors.Is(err, workerid.ErrStoreUnavailable) {
		t.Fatalf("err = %v, want ErrStoreUnavailable", err)
	}
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("error does not name %s: %v", addr, err)
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("error shows the password: %v", err)
	}
	// Retried until the deadline, then given up: not before it, and the
	// error counts the attempts. The upper bound is a safety net (an
	// attempt may run 2 s past the deadline), not a bound on speed.
	if took < cfg.StoreStartupDeadline || took > cfg.StoreStartupDeadline+30*time.Second || !strings.Contains(err.Error(), "attempts)") {
		t.Errorf("gave up after %s, deadline %s: %v", took, cfg.StoreStartupDeadline, err)
	}
	t.Log(err)
}

// TestMySQLWrongPassword: refused credentials fail at once, without the
// password in the error.
func TestMySQLWrongPassword(t *testing.T) {
	c, err := mysql.ParseDSN(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	const password = "not-the-Password-42"
	c.User = "uid_no_such_user"
	c.Passwd = password
	cfg := mysqlstore.DefaultConfig()
	cfg.DSN = c.FormatDSN()
	var log testenv.LogBuffer
	cfg.Logger = log.Logger(slog.LevelInfo)
	_, err = mysqlstore.NewAssigner(context.Background(), cfg)
	if err == nil {
		t.Fatal("no error for a wrong password")
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("error shows the password: %v", err)
	}
	if !strings.Contains(err.Error(), c.Addr) {
		t.Errorf("error does not name %s: %v", c.Addr, err)
	}
	if strings.Contains(log.String(), "retrying") {
		t.Errorf("refused credentials were retried:\n%s", log.String())
	}
	t.Log(err)
}

// TestMySQLStartupWaitsForServer: a server that comes up within the
// deadline is used.
func TestMySQLStartupWaitsForServer(t *testing.T) {
	dsn := testenv.MySQL(t)
	c, _ := mysql.ParseDSN(dsn)
	proxy := faultproxy.NewProxy(t, c.Addr)
	proxy.Cut()
	time.AfterFunc(time.Second, proxy.Restore)
	cfg := mysqlstore.DefaultConfig()
	cfg.DSN = withAddr(t, dsn, proxy.Addr())
	cfg.StoreStartupDeadline = 15 * time.Second
	begin := time.Now()
	a := newMySQLAssigner(t, cfg)
	if took := time.Since(begin); took < time.Second {
		t.Errorf("ready after %s, before the server was reachable", took)
	}
	release(t, claimOK(t, a, uidcore.DefaultLayout()))
}

func release(t testing.TB, c uidcore.Claim) {
	t.Helper()
	if err := c.Release(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestMySQLLeaseRows: the lease row says who holds the worker ID, and a
// release frees it while keeping the reserved second.
func TestMySQLLeaseRows(t *testing.T) {
	dsn := testenv.MySQL(t)
	db := openDB(t, dsn)
	cfg := mysqlstore.DefaultConfig()
	cfg.DSN = dsn
	a := newMySQLAssigner(t, cfg)
	l := claimOK(t, a, uidcore.DefaultLayout()).(*workerid.Lease)
	reserved := l.Status().Reserved // acknowledged (Until is the durable part)
	var owner, host string
	var stored int64
	var live bool
	q := "SELECT OWNER_TOKEN, HOST_NAME, RESERVED_SECOND, LEASE_EXPIRY > UTC_TIMESTAMP(6) FROM WORKER_LEASE WHERE WORKER_ID = ?"
	if err := db.QueryRow(q, l.WorkerID()).Scan(&owner, &host, &stored, &live); err != nil {
		t.Fatal(err)
	}
	if owner == "" || host == "" || stored != reserved || !live {
		t.Errorf("lease row: owner %q host %q reserved %d (want %d) live %v", owner, host, stored, reserved, live)
	}
	release(t, l)
	if err := db.QueryRow(q, l.WorkerID()).Scan(&owner, &host, &stored, &live); err != nil {
		t.Fatal(err)
	}
	if owner != "" || live || stored != reserved {
		t.Errorf("released row: owner %q live %v reserved %d (want %d kept)", owner, live, stored, reserved)
	}
}

// TestMySQLLeastPrivileges: the grants docs/worker-ids.md lists are enough for
// both modes once the tables exist.
func TestMySQLLeastPrivileges(t *testing.T) {
	dsn := testenv.MySQL(t)
	root := openDB(t, dsn)
	c, _ := mysql.ParseDSN(dsn)
	user, password := c.DBName+"_u", "Least-priv-9"
	for _, q := range []string{
		"CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + password + "'",
		"CREATE USER '" + user + "'@'localhost' IDENTIFIED BY '" + password + "'",
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		root.Exec("DROP USER IF EXISTS '" + user + "'@'%'")
		root.Exec("DROP USER IF EXISTS '" + user + "'@'localhost'")
	})
	// The tables, as an operator creates them from schema.sql.
	ddl, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	multi := c.Clone()
	multi.MultiStatements = true
	if _, err := openDB(t, multi.FormatDSN()).Exec(string(ddl)); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"%", "localhost"} {
		for _, q := range []string{
			"GRANT SELECT, INSERT, UPDATE ON " + c.DBName + ".WORKER_LEASE TO '" + user + "'@'" + host + "'",
			"GRANT SELECT, INSERT ON " + c.DBName + ".WORKER_NODE TO '" + user + "'@'" + host + "'",
			"GRANT SELECT, INSERT, UPDATE ON " + c.DBName + ".UID_FLEET TO '" + user + "'@'" + host + "'",
		} {
			if _, err := root.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	c.User, c.Passwd = user, password
	for _, mode := range []workerid.Mode{workerid.ModeLeased, workerid.ModeDisposable} {
		cfg := mysqlstore.DefaultConfig()
		cfg.DSN = c.FormatDSN()
		cfg.Mode = mode
		cfg.TablesByHand = true
		a := newMySQLAssigner(t, cfg)
		fleet := workerid.Fleet{Generation: 1, Layout: uidcore.DefaultLayout().String(), WorkerMode: mode, SubjectPrefix: "uid"}
		if _, err := a.RecordFleet(context.Background(), fleet); err != nil {
			t.Fatalf("%s: record the fleet: %v", mode, err)
		}
		claim := claimOK(t, a, uidcore.DefaultLayout())
		if l, ok := claim.(*workerid.Lease); ok {
			// A renewal too: reserve well ahead.
			u := l.Status().Reserved
			l.Reserve(u + 1)
			testenv.WaitFor(t, 5*time.Second, "the lease extends its reservation", func() bool { return l.Err() == nil && l.Status().Reserved > u })
		}
		release(t, claim)
	}
	// With the tables created by start-up (the default), the missing
	// privilege is a clear error naming TablesByHand.
	cfg := mysqlstore.DefaultConfig()
	cfg.DSN = c.FormatDSN()
	_, err = mysqlstore.NewAssigner(context.Background(), withTestLogger(cfg))
	if err == nil || !strings.Contains(err.Error(), "set TablesByHand") || strings.Contains(err.Error(), password) {
		t.Errorf("CREATE_TABLES without the privilege: %v", err)
	}
}

// The lease logs carry unix seconds and their RFC 3339 times, and the
// release says the second the store keeps (what the generator used, not
// the whole reservation), which the next owner starts after.
func TestLeaseLogsSecondsWithTimes(t *testing.T) {
	cfg := mysqlstore.DefaultConfig()
	cfg.DSN = testenv.MySQL(t)
	cfg.StoreLossWindow = -1 // no margin: the next owner takes worker ID 0 again, right after
	var log testenv.LogBuffer
	cfg.Logger = log.Logger(slog.LevelInfo)
	a, err := mysqlstore.NewAssigner(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	lease := claimOK(t, a, uidcore.DefaultLayout()).(*workerid.Lease)
	used := time.Now().Unix() + 1
	lease.Retire(used)
	release(t, lease)
	next := claimOK(t, a, uidcore.DefaultLayout())
	defer release(t, next)
	out := log.String()
	kept := fmt.Sprintf("kept=%d kept_time=%s", used, time.Unix(used, 0).UTC().Format(time.RFC3339))
	if !strings.Contains(out, kept) || next.After() != used {
		t.Fatalf("release log lacks %q or the next owner starts after %d, not %d:\n%s", kept, next.After(), used, out)
	}
	after := fmt.Sprintf("after=%d after_time=%s", used, time.Unix(used, 0).UTC().Format(time.RFC3339))
	if !strings.Contains(out, after) || !strings.Contains(out, "reserved_time=20") {
		t.Fatalf("claim log lacks %q or reserved_time:\n%s", after, out)
	}
}

// TestWorkerNodePastTheLayoutsRange: a WORKER_NODE table whose IDs have
// passed the layout's worker range refuses a disposable start before the
// insert (no row burnt, the message is the disposable one), and a layout
// with UidGenerator's worker and sequence widths and a later epoch shares
// the table: its worker ID is a fresh row, a worker field no old ID has.
func TestWorkerNodePastTheLayoutsRange(t *testing.T) {
	dsn := testenv.MySQL(t)
	db := openDB(t, dsn)
	for _, q := range []string{
		`CREATE TABLE WORKER_NODE (ID BIGINT NOT NULL AUTO_INCREMENT, HOST_NAME VARCHAR(64) NOT NULL, PORT VARCHAR(64) NOT NULL,
			TYPE INT NOT NULL, LAUNCH_DATE DATE NOT NULL, MODIFIED TIMESTAMP NOT NULL, CREATED TIMESTAMP NOT NULL, PRIMARY KEY(ID)) ENGINE=InnoDB`,
		`INSERT INTO WORKER_NODE (ID, HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) VALUES (5000, '10.0.0.1', '1700000000000-12345', 2, CURDATE(), NOW(), NOW())`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows := func() (n, maxID int64) {
		t.Helper()
		if err := db.QueryRow("SELECT COUNT(*), MAX(ID) FROM WORKER_NODE").Scan(&n, &maxID); err != nil {
			t.Fatal(err)
		}
		return n, maxID
	}
	cfg := mysqlstore.DefaultConfig()
	cfg.DSN = dsn
	cfg.Mode = workerid.ModeDisposable
	a := newMySQLAssigner(t, cfg)
	for range 3 {
		_, err := a.Claim(context.Background(), uidcore.DefaultLayout())
		var re *workerid.DisposableRangeError
		if !errors.As(err, &re) || !re.Before || re.WorkerID != 5001 || !errors.Is(err, workerid.ErrWorkerIDsExhausted) || !errors.Is(err, uidcore.ErrWorkerRange) {
			t.Fatalf("claim past the range: %v, want a *DisposableRangeError before the insert", err)
		}
		if msg := err.Error(); strings.Contains(msg, "no free worker ID") || !strings.Contains(msg, "nothing taken") || !strings.Contains(msg, "28/22/13@") {
			t.Errorf("message %q", msg)
		}
	}
	if n, maxID := rows(); n != 1 || maxID != 5000 {
		t.Fatalf("refused starts left %d rows up to %d: a row was burnt", n, maxID)
	}

	later, err := uidcore.ParseLayout("28/22/13@2026-01-01T00:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	c := claimOK(t, a, later)
	if c.WorkerID() != 5001 {
		t.Fatalf("worker ID %d, want 5001 (the next row)", c.WorkerID())
	}
	// Every new ID's worker field is the fresh row; every old ID's is a
	// row up to 5000, wrapped ones included (the overflow runs into the
	// sign, above the worker field).
	id, err := later.Compose(time.Now().Unix(), c.WorkerID(), 77)
	if err != nil {
		t.Fatal(err)
	}
	if w := uidcore.UidGeneratorLayout().ParseUID(id).WorkerID; w != "5001" {
		t.Fatalf("a new ID read as UidGenerator's has worker %s, want 5001", w)
	}
	if n, _ := rows(); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
}

// A fleet record sealed by an earlier version (STARTS_AFTER below zero,
// no other mark) reads as sealed with its StartsAfter, and a record
// sealed now is stored the same way, so earlier versions see the seal.
func TestMySQLFleetSealedBelowZero(t *testing.T) {
	dsn := testenv.MySQL(t)
	cfg := mysqlstore.DefaultConfig()
	cfg.DSN = dsn
	a := newMySQLAssigner(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	plain := workerid.Fleet{Generation: 1, Layout: uidcore.DefaultLayout().String(), WorkerMode: workerid.ModeLeased, SubjectPrefix: "uid"}
	if _, err := a.RecordFleet(ctx, plain); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, dsn)
	if _, err := db.Exec("UPDATE " + cfg.FleetTable + " SET STARTS_AFTER = -1800000001 WHERE ID = 1"); err != nil {
		t.Fatal(err)
	}
	old := plain
	old.StartsAfter, old.Sealed = 1_800_000_000, true
	if got, err := a.RecordFleet(ctx, plain); err != nil || got != old {
		t.Fatalf("the record an earlier version sealed reads %+v, %v; want %+v", got, err, old)
	}
	unsealed := old
	unsealed.Sealed = false
	if err := a.ReplaceFleet(ctx, old, unsealed); err != nil {
		t.Fatal(err)
	}
	if err := a.ReplaceFleet(ctx, unsealed, old); err != nil {
		t.Fatal(err)
	}
	var stored int64
	if err := db.QueryRow("SELECT STARTS_AFTER FROM " + cfg.FleetTable + " WHERE ID = 1").Scan(&stored); err != nil || stored != -1_800_000_001 {
		t.Fatalf("a record sealed now stores STARTS_AFTER %d (%v), want -1800000001", stored, err)
	}
}

// leaseTestLayout is the layout of the lease tests: 1,024 worker IDs.
var leaseTestLayout = uidcore.Layout{TimeBits: 41, WorkerBits: 10, SeqBits: 12, Epoch: uidcore.DefaultEpoch}

// proxiedAssigner is a leased assigner on a fresh database that it
// reaches through a fault proxy, with leases of ttl reserving chunk ahead
// (0: the suite's), logging JSON at debug level to logs; it closes when
// the test ends.
func proxiedAssigner(t *testing.T, ttl, chunk time.Duration) (a *mysqlstore.Assigner, proxy *faultproxy.Proxy, logs *testenv.LogBuffer, dsn string) {
	t.Helper()
	dsn = testenv.MySQL(t)
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy = faultproxy.NewProxy(t, c.Addr)
	logs = &testenv.LogBuffer{}
	cfg := mysqlstore.DefaultConfig()
	cfg.Config, cfg.DSN = workeridtest.Config(workerid.ModeLeased), withAddr(t, dsn, proxy.Addr())
	cfg.LeaseTTL = ttl
	if chunk > 0 {
		cfg.ReserveChunk = chunk
	}
	cfg.Logger = logs.JSONLogger(slog.LevelDebug)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err = mysqlstore.NewAssigner(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a, proxy, logs, dsn
}

// TestLeaseRenewalsSpreadAfterAnOutage: leases claimed together, whose
// store then goes away, retry their renewals each on its own jittered
// pauses, so that when the store is back they do not come back in
// lockstep. The check is on the pauses they drew (distinct at every
// step), which load cannot change; the spread of their first successful
// renewals after the outage, which load can, is logged for the record.
func TestLeaseRenewalsSpreadAfterAnOutage(t *testing.T) {
	const leases, steps = 16, 4
	// Retries at most a second apart; the outage stays well within the TTL.
	a, proxy, logs, _ := proxiedAssigner(t, 10*time.Second, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	claims := make([]uidcore.Claim, leases)
	errs := make([]error, leases)
	var wg sync.WaitGroup
	for i := range claims {
		wg.Go(func() { claims[i], errs[i] = a.Claim(ctx, leaseTestLayout) })
	}
	wg.Wait()
	for i, cl := range claims {
		if errs[i] != nil {
			t.Fatalf("a claim failed: %v", errs[i])
		}
		defer release(t, cl)
	}

	// Per worker ID: the pauses drawn after failed renewals, in order, and
	// when renewals worked again.
	type history struct {
		pauses    []float64
		recovered time.Time
	}
	read := func() map[float64]*history {
		h := map[float64]*history{}
		for _, rec := range logs.Records(t) {
			w, ok := rec["worker_id"].(float64)
			if !ok {
				continue
			}
			if h[w] == nil {
				h[w] = &history{}
			}
			msg, _ := rec["msg"].(string)
			switch {
			case strings.HasPrefix(msg, "workerid: lease renewal failed"):
				h[w].pauses = append(h[w].pauses, rec["in"].(float64))
			case msg == "workerid: lease renewal works again" && h[w].recovered.IsZero():
				h[w].recovered, _ = time.Parse(time.RFC3339Nano, rec["time"].(string))
			}
		}
		return h
	}
	proxy.Cut()
	testenv.WaitFor(t, 20*time.Second, fmt.Sprintf("every lease retried its renewal %d times", steps), func() bool {
		h := read()
		n := 0
		for _, x := range h {
			if len(x.pauses) >= steps {
				n++
			}
		}
		return n == leases
	})
	proxy.Restore()
	testenv.WaitFor(t, 20*time.Second, "every lease renewed again", func() bool {
		n := 0
		for _, x := range read() {
			if !x.recovered.IsZero() {
				n++
			}
		}
		return n == leases
	})
	h := read()
	var first, last time.Time
	for _, x := range h {
		if first.IsZero() || x.recovered.Before(first) {
			first = x.recovered
		}
		if x.recovered.After(last) {
			last = x.recovered
		}
	}
	t.Logf("%d leases renewed again over %v after the store came back", leases, last.Sub(first))
	for step := range steps {
		seen := map[float64]bool{}
		for _, x := range h {
			seen[x.pauses[step]] = true
		}
		if len(seen) != leases {
			t.Fatalf("pause %d after the outage began: %d distinct among %d leases: they retry in lockstep", step+1, len(seen), leases)
		}
	}
}

// TestLeaseLogsItsLifecycleEvents: a lease on the real store logs each
// step of its life with the event name and attributes of package event,
// the contract the soak and the fault harness read: acquired (with after
// and reserved), each extension of its reservation (debug), expired when
// the store is cut off past the TTL, recovered when it is back, lost when
// its lease is revoked, and for another lease released (reserved, kept).
// Every event of a lease names the same owner; two leases, two owners.
func TestLeaseLogsItsLifecycleEvents(t *testing.T) {
	a, proxy, logs, dsn := proxiedAssigner(t, time.Second, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first, err := a.Claim(ctx, leaseTestLayout)
	if err != nil {
		t.Fatal(err)
	}
	lease := first.(*workerid.Lease)
	defer release(t, lease)

	// events are the records of one event for the worker ID.
	events := func(name string, worker uint64) []map[string]any {
		var out []map[string]any
		for _, rec := range logs.Records(t) {
			if rec[event.Key] == name && rec[event.AttrWorker] == float64(worker) {
				out = append(out, rec)
			}
		}
		return out
	}
	waitEvent := func(name string, worker uint64) map[string]any {
		t.Helper()
		testenv.WaitFor(t, 30*time.Second, name+" logged", func() bool { return len(events(name, worker)) > 0 })
		return events(name, worker)[0]
	}
	w := lease.WorkerID()
	var token string
	if err := openDB(t, dsn).QueryRow("SELECT OWNER_TOKEN FROM "+mysqlstore.DefaultConfig().WorkerLeaseTable+" WHERE WORKER_ID = ?", w).Scan(&token); err != nil || token == "" {
		t.Fatalf("the lease's token: %q, %v", token, err)
	}
	acquired := waitEvent(event.LeaseAcquired, w)
	owner, _ := acquired[event.AttrOwner].(string)
	if owner == "" || acquired[event.AttrAfter] != float64(lease.After()) || acquired[event.AttrReserved] == nil {
		t.Fatalf("%s: %v, want %s, %s and %s", event.LeaseAcquired, acquired, event.AttrOwner, event.AttrAfter, event.AttrReserved)
	}
	// The clock passes half the chunk within a second or two, and the
	// reservation moves past the one acquired.
	testenv.WaitFor(t, 30*time.Second, "the reservation extended", func() bool {
		recs := events(event.LeaseReserved, w)
		last := recs[len(recs)-1]
		return last["level"] == "DEBUG" && last[event.AttrReserved].(float64) > acquired[event.AttrReserved].(float64)
	})
	proxy.Cut()
	waitEvent(event.LeaseExpired, w)
	proxy.Restore()
	waitEvent(event.LeaseRecovered, w)
	if _, err := a.RevokeLeases(ctx); err != nil {
		t.Fatal(err)
	}
	waitEvent(event.LeaseLost, w)
	for _, name := range []string{event.LeaseAcquired, event.LeaseReserved, event.LeaseExpired, event.LeaseRecovered, event.LeaseLost} {
		for _, rec := range events(name, w) {
			if rec[event.AttrOwner] != owner {
				t.Fatalf("%s names owner %v, the lease's is %s", name, rec[event.AttrOwner], owner)
			}
		}
	}

	second, err := a.Claim(ctx, leaseTestLayout)
	if err != nil {
		t.Fatal(err)
	}
	release(t, second)
	released := waitEvent(event.LeaseReleased, second.WorkerID())
	if released[event.AttrReserved] == nil || released[event.AttrKept] == nil || released[event.AttrOwner] == owner {
		t.Fatalf("%s: %v, want %s and %s, and another owner than %s", event.LeaseReleased, released, event.AttrReserved, event.AttrKept, owner)
	}
	if strings.Contains(logs.String(), token) {
		t.Fatal("the log holds the lease's token")
	}
}
