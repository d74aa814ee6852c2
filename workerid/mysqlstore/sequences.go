package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uid-dispenser/uid-dispenser/sequence"
)

const defaultSequenceTable = "UID_SEQUENCE"

// SequenceStore is sequence.SegmentStore on one table of the assigner's
// database (schema.sql's UID_SEQUENCE, Leaf's leaf_alloc): a row per
// name whose MAX_ID is the end of the last segment taken.
type SequenceStore struct {
	db    *sql.DB
	table string // quoted
	name  string // for messages
	a     *Assigner
}

// Sequences implements sequence.Keeper: the sequence store in the table
// cfg.SequenceTable on the assigner's database, creating the table unless
// cfg.TablesByHand is set. It shares the assigner's connections: close the
// assigner after the allocator on it.
func (a *Assigner) Sequences(ctx context.Context) (sequence.SegmentStore, error) {
	table := a.cfg.SequenceTable
	s := &SequenceStore{db: a.db, table: quoteIdent(table), name: a.storeName + " table " + table, a: a}
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
	err = tx.QueryRowContext(ctx, "SELECT MAX_ID FROM "+s.table+" WHERE BIZ_TAG = ? FOR UPDATE", name).Scan(&maxID)
	if errors.Is(err, sql.ErrNoRows) {
		return sequence.Segment{}, &sequence.UnknownError{Name: name}
	}
	if err != nil {
		return sequence.Segment{}, s.a.classify(err, "")
	}
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
