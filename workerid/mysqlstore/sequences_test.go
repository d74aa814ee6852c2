package mysqlstore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/uid-dispenser/uid-dispenser/internal/faultproxy"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/sequence/sequencetest"
	"github.com/uid-dispenser/uid-dispenser/workerid"
	"github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore"
	"github.com/uid-dispenser/uid-dispenser/workerid/workeridtest"
)

func mysqlSequenceStore(t testing.TB, dsn string) sequence.SegmentStore {
	t.Helper()
	cfg := mysqlstore.DefaultConfig()
	cfg.Config, cfg.DSN = workeridtest.Config(workerid.ModeLeased), dsn
	cfg.StoreStartupDeadline = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := newMySQLAssigner(t, cfg).Sequences(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMySQLSequenceConformance runs the sequence suite on the UID_SEQUENCE
// table, each test in a database of its own.
func TestMySQLSequenceConformance(t *testing.T) {
	sequencetest.Run(t, func(t *testing.T) sequencetest.Store {
		dsn := testenv.MySQL(t)
		c, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		// The table is created once, directly: the stores through the
		// proxy would otherwise need it up at start.
		mysqlSequenceStore(t, dsn)
		server := newFailoverServer(t, dsn)
		return sequencetest.Store{Addr: c.Addr, New: func(t testing.TB, addr string) sequence.SegmentStore {
			return server.open(t, dsn, addr)
		}, SetCounter: func(t testing.TB, name string, v uint64) {
			if _, err := openDB(t, dsn).Exec("UPDATE UID_SEQUENCE SET MAX_ID = ? WHERE BIZ_TAG = ?", v, name); err != nil {
				t.Fatalf("put %s back to %d: %v", name, v, err)
			}
		}, Forget: func(t testing.TB, name string, v uint64) {
			// A failover: no request fails, another server_id answers.
			server.failover(name, v)
		}}
	})
}

// failoverServer makes the stores of the test database read their
// server's identity from a table (one row, ID), which failover changes:
// a new primary, as @@server_id would tell, without changing the shared
// server's.
type failoverServer struct {
	t  testing.TB
	db *sql.DB
}

func newFailoverServer(t testing.TB, dsn string) failoverServer {
	t.Helper()
	db := openDB(t, dsn)
	for _, q := range []string{"CREATE TABLE FAKE_SERVER (ID INT NOT NULL)", "INSERT INTO FAKE_SERVER VALUES (1)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return failoverServer{t: t, db: db}
}

// open is a sequence store through addr that reads the server's
// identity from FAKE_SERVER.
func (f failoverServer) open(t testing.TB, dsn, addr string) sequence.SegmentStore {
	s := mysqlSequenceStore(t, withAddr(t, dsn, addr))
	mysqlstore.SetServerIdentity(s, "(SELECT ID FROM FAKE_SERVER)")
	return s
}

// failover puts name's counter back to v (the commits the replica never
// acknowledged) and makes another server answer.
func (f failoverServer) failover(name string, v uint64) {
	f.t.Helper()
	for _, q := range []struct {
		sql  string
		args []any
	}{{"UPDATE UID_SEQUENCE SET MAX_ID = ? WHERE BIZ_TAG = ?", []any{v, name}}, {"UPDATE FAKE_SERVER SET ID = ID + 1", nil}} {
		if _, err := f.db.Exec(q.sql, q.args...); err != nil {
			f.t.Fatalf("failover: %v", err)
		}
	}
}

// TestMySQLFailoverHandsOutNoForgottenSegment is the fault run's hole: A
// takes segments and hands out their numbers; the primary fails over to
// a replica that never got those takes (the counter back where it was,
// another server_id), every pooled connection breaks, and B, running and
// settled since before, takes at once: database/sql reconnects without
// an error, so B need not see an outage. B must hand out none of A's
// numbers: the new server starts a new epoch, B's take across it is not
// handed out and B settles, while A, the survivor, checks and raises the
// counter past its segments. A checks only when the test says, once B has
// seen the new epoch (or handed out numbers): before, B's take must meet
// the forgotten counter.
func TestMySQLFailoverHandsOutNoForgottenSegment(t *testing.T) {
	dsn := testenv.MySQL(t)
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	mysqlSequenceStore(t, dsn) // the table
	server := newFailoverServer(t, dsn)
	proxy := faultproxy.NewProxy(t, c.Addr)
	const name = "orders"
	cfg := sequencetest.Config()
	cfg.Settle = 2 * time.Second
	open := func(checkInterval time.Duration) *sequence.Allocator {
		cfg := cfg
		cfg.CheckInterval = checkInterval
		a := sequencetest.NewAllocator(t, server.open(t, dsn, proxy.Addr()), cfg)
		if err := a.Declare(ctxFor(t), []sequence.Declaration{{Name: name, First: 1}}); err != nil {
			t.Fatal(err)
		}
		return a
	}
	a, b := open(-1), open(50*time.Millisecond)
	testwait.WaitFor(t, 2*cfg.Settle, "both instances settled", func() bool {
		return time.Now().After(a.SettledAt()) && time.Now().After(b.SettledAt())
	})
	given := make([]uint64, 25)
	if err := a.Fill(ctxFor(t), name, given); err != nil {
		t.Fatal(err)
	}
	testwait.WaitFor(t, time.Second, "A's prefetched segment", func() bool { return a.Stats()[0].Segments >= 2 })
	server.failover(name, 1)
	proxy.Cut() // every pooled connection breaks
	proxy.Restore()
	got := make([]uint64, 25)
	filled := make(chan error, 1)
	go func() { filled <- b.Fill(ctxFor(t), name, got) }()
	var fillErr error
	done := false
	testwait.WaitFor(t, cfg.Settle, "B to see the new epoch or hand out numbers", func() bool {
		select {
		case fillErr = <-filled:
			done = true
		default:
		}
		return done || b.EpochChanges() > 0
	})
	testwait.WaitFor(t, time.Second, "A's check to raise the counter", func() bool { return a.Check(ctxFor(t)) == nil })
	if !done {
		fillErr = <-filled
	}
	if fillErr != nil {
		t.Fatal(fillErr)
	}
	sequencetest.CheckUnique(t, given, got) // fails on a number of A's from B
	if b.EpochChanges() == 0 {
		t.Error("B did not see the failover as a new epoch")
	}
	t.Logf("A %d..%d, B %d..%d after the failover; B saw %d epoch changes", given[0], given[len(given)-1], got[0], got[len(got)-1], b.EpochChanges())
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
