package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// Disposable worker IDs (issue 31's D5, verify/disposable.pml): a start
// INSERTs a WORKER_NODE row and takes its AUTO_INCREMENT ID, which two
// things can hand out again:
//
//   - the counter falling back with no loss of rows (the newest rows
//     deleted, then MySQL before 8.0 restarting): the fleet max. The
//     INSERT and the fleet record's MAX_WORKER_ID are read and written in
//     one transaction holding the fleet row; an ID not above the recorded
//     one is refused, the next attempt inserts MAX_WORKER_ID+1 explicitly;
//   - a failover or power loss that forgets the INSERT and the fleet
//     record together (both within W): the durable row. The start issues
//     nothing until W after its INSERT, then reads its row back at the
//     primary (the DSN's server); a row that is not its own (host, port,
//     type, launch date and creation time) means the store forgot the
//     INSERT and another start got the ID: refused.
//
// A refused worker ID is never used: the start claims again, up to
// disposableAttempts times.

// disposableAttempts bounds the claims of one start: each refusal is a
// store regression (or a start racing past the fleet max), so more than a
// few in a row means the store keeps losing writes.
const disposableAttempts = 4

// workerRow is what a start wrote in its WORKER_NODE row, as read back in
// the INSERT's transaction: what it must find there again after W.
type workerRow struct {
	host, port string
	typ        int
	launched   string // LAUNCH_DATE
	created    int64  // UNIX_TIMESTAMP(CREATED)
}

// errRowNotDurable: the row read back W after the INSERT was not this
// start's (or was gone): the store forgot the INSERT.
var errRowNotDurable = errors.New("the store forgot the WORKER_NODE row it had acknowledged")

// claimDisposable claims a disposable worker ID: insertWorkerNode, then
// the durable-row check, again with a fresh row when either refuses.
func (a *Assigner) claimDisposable(ctx context.Context, layout uidcore.Layout) (uidcore.Claim, error) {
	table := quoteIdent(a.cfg.WorkerNodeTable)
	if err := a.checkNextWorkerNode(ctx, table, layout); err != nil {
		return nil, err
	}
	var above int64 // 0: the auto-increment; else insert this ID
	var lastRefusal error
	for range disposableAttempts {
		id, row, fleetMax, err := a.insertWorkerNode(ctx, table, above)
		if err != nil {
			return nil, fmt.Errorf("workerid: disposable worker ID from %s: %w", a.storeName, err)
		}
		claim, err := a.cfg.DisposableClaim(uint64(id), layout, a.storeName+" table "+a.cfg.WorkerNodeTable)
		if err != nil {
			return nil, err
		}
		if fleetMax.Valid && id <= fleetMax.Int64 {
			// Rolled back: the row is gone, the ID is never used.
			lastRefusal = a.refuse(id, "fleet_max", fmt.Errorf("worker ID %d is not above the fleet's highest recorded one, %d: the auto-increment counter fell back", id, fleetMax.Int64))
			above = fleetMax.Int64 + 1
			continue
		}
		above = 0
		if err := a.awaitDurableRow(ctx, table, id, row); err != nil {
			if !errors.Is(err, errRowNotDurable) {
				return nil, fmt.Errorf("workerid: disposable worker ID %d from %s: %w", id, a.storeName, err)
			}
			lastRefusal = a.refuse(id, "row", err)
			continue
		}
		a.log.Info("workerid: disposable worker ID", event.AttrWorker, id, "store", a.storeName, "host", a.host.Name, "port", a.host.Port)
		return claim, nil
	}
	return nil, fmt.Errorf("workerid: disposable worker ID from %s: refused %d times in a row, the last: %w", a.storeName, disposableAttempts, lastRefusal)
}

// refuse counts and logs a refused worker ID (a store regression) and
// returns why.
func (a *Assigner) refuse(id int64, why string, err error) error {
	a.refusedRows.Add(1)
	a.log.Error("workerid: disposable worker ID refused, claiming another: "+err.Error(),
		event.Key, event.StoreRegression, "record", "worker_node", "check", why, event.AttrWorker, id, "store", a.storeName)
	return err
}

// insertWorkerNode inserts this start's WORKER_NODE row (with the ID
// explicit when explicitID > 0) in one transaction with the fleet
// record's MAX_WORKER_ID, read FOR UPDATE: concurrent starts queue on the
// fleet row, so the maximum read is every committed start's. It returns
// the row's ID, what it holds, and the maximum read before it (invalid
// without a fleet record: a library use without RecordFleet). The
// maximum is raised to the ID, unless the ID is not above it: then the
// transaction is rolled back and the caller refuses the ID.
func (a *Assigner) insertWorkerNode(ctx context.Context, table string, explicitID int64) (id int64, row workerRow, fleetMax sql.NullInt64, err error) {
	fleet := quoteIdent(a.cfg.FleetTable)
	err = workerid.RetryStore(ctx, a.cfg.StoreStartupDeadline, a.log, "insert into "+a.cfg.WorkerNodeTable+" of "+a.storeName, func(ctx context.Context) error {
		tx, err := a.db.BeginTx(ctx, nil)
		if err != nil {
			return a.classify(err, "")
		}
		defer tx.Rollback() //nolint:errcheck // after Commit: ErrTxDone
		fleetMax = sql.NullInt64{}
		err = tx.QueryRowContext(ctx, "SELECT MAX_WORKER_ID FROM "+fleet+" WHERE ID = 1 FOR UPDATE").Scan(&fleetMax)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return a.classify(err, "read the fleet's highest worker ID from table "+a.cfg.FleetTable)
		}
		columns, values, args := "", "", []any{a.host.Name, a.host.Port, int(a.host.Type)}
		if explicitID > 0 {
			columns, values, args = "ID, ", "?, ", append([]any{explicitID}, args...)
		}
		res, err := tx.ExecContext(ctx, "INSERT INTO "+table+" ("+columns+"HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) VALUES ("+values+"?, ?, ?, CURDATE(), NOW(), NOW())", args...)
		if err != nil {
			return a.classify(err, "")
		}
		if id, err = res.LastInsertId(); err != nil {
			return err
		}
		if row, err = readWorkerRow(ctx, tx, table, id); err != nil {
			return a.classify(err, "read back the row inserted")
		}
		if fleetMax.Valid && id <= fleetMax.Int64 {
			return nil // refused: rolled back by the defer
		}
		if fleetMax.Valid {
			if _, err := tx.ExecContext(ctx, "UPDATE "+fleet+" SET MAX_WORKER_ID = ? WHERE ID = 1", id); err != nil {
				return a.classify(err, "record the fleet's highest worker ID in table "+a.cfg.FleetTable)
			}
		}
		if err := tx.Commit(); err != nil {
			return a.classify(err, "")
		}
		return nil
	})
	return id, row, fleetMax, err
}

// readWorkerRow reads row id of table through q (the INSERT's transaction,
// or the pool: the primary).
func readWorkerRow(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, table string, id int64) (workerRow, error) {
	var r workerRow
	err := q.QueryRowContext(ctx, "SELECT HOST_NAME, PORT, TYPE, CAST(LAUNCH_DATE AS CHAR), UNIX_TIMESTAMP(CREATED) FROM "+table+" WHERE ID = ?", id).
		Scan(&r.host, &r.port, &r.typ, &r.launched, &r.created)
	return r, err
}

// awaitDurableRow waits W (the store has made the INSERT durable since,
// or lost it) and reads row id back at the primary: errRowNotDurable
// unless it is still row. With W = 0 nothing waits and nothing is read.
func (a *Assigner) awaitDurableRow(ctx context.Context, table string, id int64, row workerRow) error {
	w, err := a.cfg.AwaitLossWindow(ctx, a.log, a.waitLoss, uint64(id), "the row")
	if w == 0 || err != nil {
		return err
	}
	var got workerRow
	err = workerid.RetryStore(ctx, a.cfg.StoreStartupDeadline, a.log, "read back row "+fmt.Sprint(id)+" of "+a.cfg.WorkerNodeTable+" of "+a.storeName, func(ctx context.Context) error {
		var err error
		got, err = readWorkerRow(ctx, a.db, table, id)
		if err == nil || errors.Is(err, sql.ErrNoRows) {
			return nil // no row: not this start's
		}
		return a.classify(err, "")
	})
	switch {
	case err != nil:
		return err
	case got != row:
		return fmt.Errorf("%w: row %d read back W (%s) after the INSERT holds host %q port %q, not this start's %q %q (or is gone)",
			errRowNotDurable, id, w, got.host, got.port, row.host, row.port)
	}
	return nil
}

// fleetMaxColumn makes sure the fleet table has MAX_WORKER_ID, the
// fleet's highest disposable worker ID (a table made before it gets the
// column here, or by hand with TablesByHand).
func (a *Assigner) fleetMaxColumn(ctx context.Context) error {
	var n int
	err := a.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'MAX_WORKER_ID'", a.cfg.FleetTable).Scan(&n)
	if err != nil {
		return fmt.Errorf("workerid: %s: %w", a.storeName, a.classify(err, "look up the columns of table "+a.cfg.FleetTable))
	}
	if n > 0 {
		return nil
	}
	alter := "ALTER TABLE " + quoteIdent(a.cfg.FleetTable) + " ADD COLUMN MAX_WORKER_ID BIGINT NOT NULL DEFAULT 0"
	if a.cfg.TablesByHand {
		return fmt.Errorf("workerid: table %s has no MAX_WORKER_ID column for the fleet's highest disposable worker ID: run %s (workerid/mysqlstore/schema.sql)%s", a.cfg.FleetTable, alter, a.cfg.orLetStartUpCreate())
	}
	if _, err := a.db.ExecContext(ctx, alter); err != nil && mysqlErrorNumber(err) != mysqlDuplicateColumn {
		return fmt.Errorf("workerid: %s: %w", a.storeName, a.classify(err, "add the MAX_WORKER_ID column to table "+a.cfg.FleetTable))
	}
	a.log.Info("workerid: added the MAX_WORKER_ID column to the fleet table", "table", a.cfg.FleetTable)
	return nil
}
