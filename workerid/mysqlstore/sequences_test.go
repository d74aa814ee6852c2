package mysqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
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
		return sequencetest.Store{Addr: c.Addr, New: func(t testing.TB, addr string) sequence.SegmentStore {
			return mysqlSequenceStore(t, withAddr(t, dsn, addr))
		}, SetCounter: func(t testing.TB, name string, v uint64) {
			if _, err := openDB(t, dsn).Exec("UPDATE UID_SEQUENCE SET MAX_ID = ? WHERE BIZ_TAG = ?", v, name); err != nil {
				t.Fatalf("put %s back to %d: %v", name, v, err)
			}
		}}
	})
}
