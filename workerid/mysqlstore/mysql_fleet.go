package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// RecordFleet implements workerid.FleetStore: the row with ID 1 of the fleet
// table, inserted when missing (INSERT IGNORE: the first writer wins).
func (a *Assigner) RecordFleet(ctx context.Context, f workerid.Fleet) (workerid.Fleet, error) {
	table := quoteIdent(a.cfg.FleetTable)
	var got workerid.Fleet
	err := workerid.RetryStore(ctx, a.cfg.StoreStartupDeadline, a.log, "record the fleet in "+a.storeName, func(ctx context.Context) error {
		_, err := a.db.ExecContext(ctx, "INSERT IGNORE INTO "+table+" (ID, GENERATION, LAYOUT, WORKER_MODE, SUBJECT_PREFIX, STARTS_AFTER, MODIFIED) "+
			"VALUES (1, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6))", f.Generation, f.Layout, string(f.WorkerMode), f.SubjectPrefix, f.StartsAfter)
		if err != nil {
			return a.classify(err, "record the fleet in table "+a.cfg.FleetTable)
		}
		var mode string
		err = a.db.QueryRowContext(ctx, "SELECT GENERATION, LAYOUT, WORKER_MODE, SUBJECT_PREFIX, STARTS_AFTER FROM "+table+" WHERE ID = 1").
			Scan(&got.Generation, &got.Layout, &mode, &got.SubjectPrefix, &got.StartsAfter)
		if err != nil {
			return a.classify(err, "read the fleet from table "+a.cfg.FleetTable)
		}
		got.WorkerMode = workerid.Mode(mode)
		return nil
	})
	return got, err
}

// ReplaceFleet implements workerid.FleetStore: an UPDATE that matches only the
// record read.
func (a *Assigner) ReplaceFleet(ctx context.Context, old, next workerid.Fleet) error {
	res, err := a.db.ExecContext(ctx, "UPDATE "+quoteIdent(a.cfg.FleetTable)+" SET GENERATION = ?, LAYOUT = ?, WORKER_MODE = ?, SUBJECT_PREFIX = ?, STARTS_AFTER = ?, MODIFIED = UTC_TIMESTAMP(6) "+
		"WHERE ID = 1 AND GENERATION = ? AND LAYOUT = ? AND WORKER_MODE = ? AND SUBJECT_PREFIX = ? AND STARTS_AFTER = ?",
		next.Generation, next.Layout, string(next.WorkerMode), next.SubjectPrefix, next.StartsAfter,
		old.Generation, old.Layout, string(old.WorkerMode), old.SubjectPrefix, old.StartsAfter)
	if err != nil {
		return a.classify(err, "replace the fleet in table "+a.cfg.FleetTable)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%w (table %s)", workerid.ErrFleetChanged, a.cfg.FleetTable)
	}
	return nil
}

// workerid.LeaseHorizon implements workerid.FleetStore from the lease table, whichever the
// instance's mode: a fleet moving from leased to disposable must still
// start after the leases. Without a lease table there are no leases.
func (a *Assigner) LeaseHorizon(ctx context.Context) (int64, int, error) {
	var last, live sql.NullInt64
	err := a.db.QueryRowContext(ctx, "SELECT MAX(RESERVED_SECOND), SUM(OWNER_TOKEN <> '' AND LEASE_EXPIRY >= UTC_TIMESTAMP(6)) FROM "+quoteIdent(a.cfg.WorkerLeaseTable)).Scan(&last, &live)
	if mysqlErrorNumber(err) == mysqlNoSuchTable {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, a.classify(err, "read the leases of table "+a.cfg.WorkerLeaseTable)
	}
	return last.Int64, int(live.Int64), nil
}

// RevokeLeases implements workerid.FleetStore: one UPDATE frees every
// owned lease row, keeping RESERVED_SECOND; a renewal (UPDATE … WHERE
// OWNER_TOKEN = its token) runs before it or matches no row after it.
// Without a lease table there are no leases.
func (a *Assigner) RevokeLeases(ctx context.Context) (int, error) {
	res, err := a.db.ExecContext(ctx, "UPDATE "+quoteIdent(a.cfg.WorkerLeaseTable)+" SET OWNER_TOKEN = '', LEASE_EXPIRY = '1970-01-01 00:00:00', "+
		"MODIFIED = UTC_TIMESTAMP(6) WHERE OWNER_TOKEN <> ''")
	if mysqlErrorNumber(err) == mysqlNoSuchTable {
		return 0, nil
	}
	if err != nil {
		return 0, a.classify(err, "revoke the leases of table "+a.cfg.WorkerLeaseTable)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
