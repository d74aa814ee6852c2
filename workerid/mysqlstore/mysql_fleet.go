package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// RecordFleet implements workerid.FleetStore: the row with ID 1 of the fleet
// table, inserted when missing (INSERT IGNORE: the first writer wins).
func (a *Assigner) RecordFleet(ctx context.Context, f workerid.Fleet) (workerid.Fleet, error) {
	table := quoteIdent(a.cfg.FleetTable)
	var got workerid.Fleet
	err := workerid.RetryStore(ctx, a.cfg.StoreStartupDeadline, a.log, "record the fleet in "+a.storeName, func(ctx context.Context) error {
		regions, err := a.regionsColumn(ctx, f)
		if err != nil {
			return err
		}
		_, err = a.db.ExecContext(ctx, "INSERT IGNORE INTO "+table+" (ID, GENERATION, LAYOUT, WORKER_MODE, SUBJECT_PREFIX, STARTS_AFTER, "+regions+"MODIFIED) "+
			"VALUES (1, ?, ?, ?, ?, ?, "+placeholder(regions)+"UTC_TIMESTAMP(6))", fleetArgs(f, regions)...)
		if err != nil {
			return a.classify(err, "record the fleet in table "+a.cfg.FleetTable)
		}
		got, err = a.readFleet(ctx, regions)
		if errors.Is(err, sql.ErrNoRows) {
			return a.classify(err, "read the fleet from table "+a.cfg.FleetTable)
		}
		return err
	})
	return got, err
}

// readFleet reads the row with ID 1 (sql.ErrNoRows when there is none);
// regions is regionsColumn's answer.
func (a *Assigner) readFleet(ctx context.Context, regions string) (workerid.Fleet, error) {
	var got workerid.Fleet
	var mode string
	var startsAfter int64
	dst := []any{&got.Generation, &got.Layout, &mode, &got.SubjectPrefix, &startsAfter}
	if regions != "" {
		dst = append(dst, &got.Regions)
	}
	err := a.db.QueryRowContext(ctx, "SELECT GENERATION, LAYOUT, WORKER_MODE, SUBJECT_PREFIX, STARTS_AFTER"+strings.TrimSuffix(", "+regions, ", ")+" FROM "+quoteIdent(a.cfg.FleetTable)+" WHERE ID = 1").
		Scan(dst...)
	if errors.Is(err, sql.ErrNoRows) {
		return workerid.Fleet{}, err
	}
	if err != nil {
		return workerid.Fleet{}, a.classify(err, "read the fleet from table "+a.cfg.FleetTable)
	}
	got.WorkerMode = workerid.Mode(mode)
	got.SetStoredStartsAfter(startsAfter) // a seal is in STARTS_AFTER
	return got, nil
}

// ReadFleet implements workerid.FleetRemover: the row as the primary
// holds it (the DSN's server; a read-splitting proxy in front of it is
// not supported).
func (a *Assigner) ReadFleet(ctx context.Context) (workerid.Fleet, bool, error) {
	regions, err := a.regionsColumn(ctx, workerid.Fleet{})
	if err != nil {
		return workerid.Fleet{}, false, err
	}
	f, err := a.readFleet(ctx, regions)
	if errors.Is(err, sql.ErrNoRows) {
		return workerid.Fleet{}, false, nil
	}
	return f, err == nil, err
}

// RemoveFleet implements workerid.FleetRemover: a DELETE that matches
// only the record read.
func (a *Assigner) RemoveFleet(ctx context.Context, old workerid.Fleet) error {
	regions, err := a.regionsColumn(ctx, old)
	if err != nil {
		return err
	}
	where := ""
	if regions != "" {
		where = " AND REGIONS = ?"
	}
	res, err := a.db.ExecContext(ctx, "DELETE FROM "+quoteIdent(a.cfg.FleetTable)+
		" WHERE ID = 1 AND GENERATION = ? AND LAYOUT = ? AND WORKER_MODE = ? AND SUBJECT_PREFIX = ? AND STARTS_AFTER = ?"+where, fleetArgs(old, regions)...)
	if err != nil {
		return a.classify(err, "remove the fleet from table "+a.cfg.FleetTable)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%w (table %s)", workerid.ErrFleetChanged, a.cfg.FleetTable)
	}
	return nil
}

// ReplaceFleet implements workerid.FleetStore: an UPDATE that matches only the
// record read.
func (a *Assigner) ReplaceFleet(ctx context.Context, old, next workerid.Fleet) error {
	regions, err := a.regionsColumn(ctx, next)
	if err != nil {
		return err
	}
	set, where := "", ""
	if regions != "" {
		set, where = ", REGIONS = ?", " AND REGIONS = ?"
	}
	args := append(fleetArgs(next, regions), fleetArgs(old, regions)...)
	res, err := a.db.ExecContext(ctx, "UPDATE "+quoteIdent(a.cfg.FleetTable)+" SET GENERATION = ?, LAYOUT = ?, WORKER_MODE = ?, SUBJECT_PREFIX = ?, STARTS_AFTER = ?"+set+", MODIFIED = UTC_TIMESTAMP(6) "+
		"WHERE ID = 1 AND GENERATION = ? AND LAYOUT = ? AND WORKER_MODE = ? AND SUBJECT_PREFIX = ? AND STARTS_AFTER = ?"+where, args...)
	if err != nil {
		return a.classify(err, "replace the fleet in table "+a.cfg.FleetTable)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%w (table %s)", workerid.ErrFleetChanged, a.cfg.FleetTable)
	}
	return nil
}

// fleetArgs are f's values in the order the statements list the columns;
// the map of regions only when the table has its column.
func fleetArgs(f workerid.Fleet, regions string) []any {
	args := []any{f.Generation, f.Layout, string(f.WorkerMode), f.SubjectPrefix, f.StoredStartsAfter()}
	if regions != "" {
		args = append(args, f.Regions)
	}
	return args
}

func placeholder(column string) string {
	if column == "" {
		return ""
	}
	return "?, "
}

// regionsColumn is "REGIONS, " when the fleet table has the REGIONS
// column, and "" when it is a table made before regions existed, which
// then holds a fleet without regions. Writing a map into such a table
// adds the column first (unless TablesByHand) or fails, naming the statement.
func (a *Assigner) regionsColumn(ctx context.Context, f workerid.Fleet) (string, error) {
	var n int
	err := a.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'REGIONS'", a.cfg.FleetTable).Scan(&n)
	if err != nil {
		return "", a.classify(err, "look up the columns of table "+a.cfg.FleetTable)
	}
	if n > 0 {
		return "REGIONS, ", nil
	}
	if f.Regions == "" {
		return "", nil
	}
	alter := "ALTER TABLE " + quoteIdent(a.cfg.FleetTable) + " ADD COLUMN REGIONS VARCHAR(1024) NOT NULL DEFAULT '' AFTER STARTS_AFTER"
	if a.cfg.TablesByHand {
		return "", workerid.Permanent(fmt.Errorf("workerid: table %s has no REGIONS column for the map of regions: run %s (workerid/mysqlstore/schema.sql)%s", a.cfg.FleetTable, alter, a.cfg.orLetStartUpCreate()))
	}
	if _, err := a.db.ExecContext(ctx, alter); err != nil && mysqlErrorNumber(err) != mysqlDuplicateColumn {
		return "", a.classify(err, "add the REGIONS column to table "+a.cfg.FleetTable)
	}
	a.log.Info("workerid: added the REGIONS column to the fleet table", "table", a.cfg.FleetTable)
	return "REGIONS, ", nil
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
