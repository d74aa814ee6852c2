package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
)

const defaultSequenceTable = "UID_SEQUENCE"

// serverIdentity is the SQL expression naming the server that answers: a
// replica must have a server_id of its own (MySQL's and MariaDB's
// replication refuse to run otherwise), so a promoted one answers with
// another.
const serverIdentity = "@@server_id"

// SequenceStore is sequence.SegmentStore on one table of the assigner's
// database (schema.sql's UID_SEQUENCE, Leaf's leaf_alloc): a row per
// name whose MAX_ID is the end of the last segment taken.
type SequenceStore struct {
	db    *sql.DB
	table string // quoted
	name  string // for messages
	a     *Assigner
	// identity is serverIdentity (tests replace it: one server cannot
	// change its server_id under the tests of others).
	identity string

	mu     sync.Mutex
	server string // the server that answered last (seen: read at all)
	seen   bool
	epoch  uint64
}

// Sequences implements sequence.Keeper: the sequence store in the table
// cfg.SequenceTable on the assigner's database, creating the table unless
// cfg.TablesByHand is set. It shares the assigner's connections: close the
// assigner after the allocator on it.
func (a *Assigner) Sequences(ctx context.Context) (sequence.SegmentStore, error) {
	table := a.cfg.SequenceTable
	s := &SequenceStore{db: a.db, table: quoteIdent(table), name: a.storeName + " table " + table, a: a, identity: serverIdentity}
	if !a.cfg.TablesByHand {
		create, err := createStatement(defaultSequenceTable, table)
		if err != nil {
			return nil, err
		}
		if _, err := a.db.ExecContext(ctx, create); err != nil {
			return nil, fmt.Errorf("workerid: %s: %w", s.name, a.classify(err, fmt.Sprintf("create the sequence table (set %s and run workerid/mysqlstore/schema.sql by hand when the user may not create tables)", a.cfg.byHand())))
		}
	}
	if _, err := a.db.ExecContext(ctx, "SELECT 1 FROM "+s.table+" LIMIT 0"); err != nil {
		return nil, fmt.Errorf("workerid: %s: %w", s.name, a.classify(err, "create it with workerid/mysqlstore/schema.sql"+a.cfg.orLetStartUpCreate()))
	}
	return s, nil
}

var _ sequence.Keeper = (*Assigner)(nil)

func (s *SequenceStore) String() string { return s.name }

// Take implements sequence.SegmentStore: the row read with FOR UPDATE
// (its lock orders concurrent takers) and MAX_ID advanced from it, or
// from floor when it is below, in one transaction.
func (s *SequenceStore) Take(ctx context.Context, name string, step, floor uint64) (sequence.Segment, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return sequence.Segment{}, s.a.classify(err, "")
	}
	defer func() { _ = tx.Rollback() }()
	var maxID int64
	var server string
	err = tx.QueryRowContext(ctx, "SELECT MAX_ID, "+s.identity+" FROM "+s.table+" WHERE BIZ_TAG = ? FOR UPDATE", name).Scan(&maxID, &server)
	if errors.Is(err, sql.ErrNoRows) {
		return sequence.Segment{}, &sequence.UnknownError{Name: name}
	}
	if err != nil {
		return sequence.Segment{}, s.a.classify(err, "")
	}
	// The server that gave this segment, read on the take's own
	// connection: another pooled connection may still reach the old one.
	s.answeredBy(server)
	if maxID < 0 {
		return sequence.Segment{}, fmt.Errorf("workerid: %s: %q holds MAX_ID %d, not a sequence's end: restore it (never lower it)", s.name, name, maxID)
	}
	seg := sequence.TakeFrom(uint64(maxID), floor, step)
	if step > sequence.MaxValue-seg.From {
		return sequence.Segment{}, fmt.Errorf("%w: %q is at %d", sequence.ErrExhausted, name, seg.From)
	}
	if seg.To == uint64(maxID) {
		return seg, nil // a check (step 0) that found the counter in place
	}
	set := "MAX_ID = ?"
	args := []any{seg.To}
	if step > 0 {
		set += ", STEP = ?"
		args = append(args, step)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE "+s.table+" SET "+set+", MODIFIED = UTC_TIMESTAMP(6) WHERE BIZ_TAG = ?", append(args, name)...); err != nil {
		return sequence.Segment{}, s.a.classify(err, "")
	}
	if err := tx.Commit(); err != nil {
		return sequence.Segment{}, s.a.classify(err, "")
	}
	return seg, nil
}

// GiveBack implements sequence.SegmentStore: MAX_ID goes back to
// seg.From only WHERE it is still seg.To.
func (s *SequenceStore) GiveBack(ctx context.Context, name string, seg sequence.Segment) (bool, error) {
	res, err := s.db.ExecContext(ctx, "UPDATE "+s.table+" SET MAX_ID = ?, MODIFIED = UTC_TIMESTAMP(6) WHERE BIZ_TAG = ? AND MAX_ID = ?", seg.From, name, seg.To)
	if err != nil {
		return false, s.a.classify(err, "")
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Declare implements sequence.SegmentStore; an existing row is left as
// it is.
func (s *SequenceStore) Declare(ctx context.Context, name string, first uint64) (bool, error) {
	res, err := s.db.ExecContext(ctx, "INSERT INTO "+s.table+" (BIZ_TAG, MAX_ID, STEP, CREATED, MODIFIED) VALUES (?, ?, 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)) "+
		"ON DUPLICATE KEY UPDATE BIZ_TAG = BIZ_TAG", name, first)
	if err != nil {
		return false, s.a.classify(err, "")
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// List implements sequence.SegmentStore.
func (s *SequenceStore) List(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT BIZ_TAG FROM "+s.table+" ORDER BY BIZ_TAG")
	if err != nil {
		return nil, s.a.classify(err, "")
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, rows.Err()
}

// A failover to a replica that missed the primary's last commits (a
// semi-synchronous replication that fell back to asynchronous) forgets
// segments it acknowledged, and no request need fail: database/sql
// retries a statement on a new connection when a pooled one turns out
// broken before anything was sent (the driver's "closing bad idle
// connection"), and the floating address now reaches the promoted
// replica. The fault harness saw an instance take another's forgotten
// segment that way 0.8 s after the failover, with no error and no
// settle. The server's identity tells it: a new server_id starts a new
// epoch (sequence.LossWatcher, D7), read with every take and at every
// check, so the segment taken across it is not handed out and the
// instance settles while the survivors' checks raise the counters.

// Epoch implements sequence.LossWatcher: how many times the server
// answering changed.
func (s *SequenceStore) Epoch(ctx context.Context) (sequence.Epoch, error) {
	var server string
	if err := s.db.QueryRowContext(ctx, "SELECT "+s.identity).Scan(&server); err != nil {
		return sequence.Epoch{}, fmt.Errorf("workerid: %s: read the server's identity: %w", s.name, s.a.classify(err, ""))
	}
	s.answeredBy(server)
	s.mu.Lock()
	defer s.mu.Unlock()
	return sequence.Epoch{N: s.epoch}, nil
}

// answeredBy records that server answered; another server than the last
// one starts a new epoch.
func (s *SequenceStore) answeredBy(server string) {
	s.mu.Lock()
	previous, changed := s.server, s.seen && server != s.server
	s.server, s.seen = server, true
	if changed {
		s.epoch++
	}
	s.mu.Unlock()
	if changed {
		s.a.log.Warn("workerid: another MySQL server answers the sequences (a failover): it may have forgotten segments it acknowledged; sequences settle",
			event.Key, event.StoreEpochChanged, "store", s.name, "server_id", server, "previous_server_id", previous)
	}
}

var _ sequence.LossWatcher = (*SequenceStore)(nil)
