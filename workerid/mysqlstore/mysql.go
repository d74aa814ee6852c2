package mysqlstore

import (
	"cmp"
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/uid-dispenser/uid-dispenser/internal/retry"
	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// schemaSQL is the DDL of both tables, shipped as schema.sql for operators
// and run from here with the configured table names.
//
//go:embed schema.sql
var schemaSQL string

// Default table names as schema.sql spells them (quoted there).
const (
	defaultNodeTable  = "WORKER_NODE"
	defaultLeaseTable = "WORKER_LEASE"
	defaultFleetTable = "UID_FLEET"
)

// createStatement returns schema.sql's CREATE TABLE statement of the
// table named def there, with the name replaced by table.
func createStatement(def, table string) (string, error) {
	var body strings.Builder
	for line := range strings.Lines(schemaSQL) {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			body.WriteString(line)
		}
	}
	// Statements end with a semicolon at the end of a line.
	for stmt := range strings.SplitSeq(body.String(), ";\n") {
		if strings.Contains(stmt, "CREATE TABLE IF NOT EXISTS `"+def+"`") {
			return strings.TrimSpace(strings.ReplaceAll(stmt, "`"+def+"`", quoteIdent(table))), nil
		}
	}
	return "", fmt.Errorf("workerid: schema.sql has no CREATE TABLE for %s", def)
}

// quoteIdent quotes an identifier already checked by Config.Validate.
func quoteIdent(name string) string { return "`" + name + "`" }

// MySQL error numbers the assigner branches on.
const (
	mysqlAccessDenied       = 1045
	mysqlDBAccessDenied     = 1044
	mysqlUnknownDatabase    = 1049
	mysqlTableAccessDenied  = 1142
	mysqlNoSuchTable        = 1146
	mysqlDuplicateKey       = 1062
	mysqlDeadlock           = 1213
	mysqlLockWaitTimeout    = 1205
	mysqlCommandDeniedToUse = 1227
	mysqlSyntaxError        = 1064
	mysqlDuplicateColumn    = 1060
)

func mysqlErrorNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// Assigner hands out worker IDs from MySQL: disposable IDs from
// UidGenerator's WORKER_NODE table, or leases from the WORKER_LEASE table.
// It implements uidcore.Assigner. Close it when done.
type Assigner struct {
	db        *sql.DB
	cfg       Config
	host      workerid.Host
	log       *slog.Logger
	storeName string                  // "MySQL at host:port", for messages
	leases    *workerid.LeaseAssigner // leased mode
	store     *mysqlLeaseStore        // leased mode

	// disposable mode: refused worker IDs (a store regression), and the
	// wait of W before a row is read back (a clock: tests replace it)
	refusedRows atomic.Uint64
	waitLoss    func(ctx context.Context, w time.Duration) error
}

// NewAssigner connects to cfg.DSN, retrying with back-off up to
// cfg.StoreStartupDeadline, creates the table of cfg.Mode when
// cfg.TablesByHand is not set, and checks that it is usable. Errors name the
// server's address, never the password.
func NewAssigner(ctx context.Context, cfg Config) (*Assigner, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DSN == "" {
		return nil, &setting.Error{Field: "DSN", Reason: "not set"}
	}
	logger := cmp.Or(cfg.Logger, slog.Default())
	dsn, err := mysql.ParseDSN(cfg.DSN)
	if err != nil { // Validate parsed it already
		return nil, &setting.Error{Field: "DSN", Reason: "not a valid DSN"}
	}
	if dsn.Timeout == 0 {
		dsn.Timeout = 5 * time.Second
	}
	host, err := cfg.InstanceHost()
	if err != nil {
		return nil, err
	}
	// The driver prints its own plain-text lines to stderr (say, a
	// connection cut mid-packet); route them through the instance's log so
	// a JSON log stays JSON.
	dsn.Logger = driverLogger{logger.With("component", "mysql driver", "addr", dsn.Addr), dsn.Passwd}
	connector, err := mysql.NewConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("workerid: MySQL at %s: %s", dsn.Addr, redactPassword(err.Error(), dsn.Passwd))
	}
	db := sql.OpenDB(connector)
	db.SetConnMaxLifetime(3 * time.Minute)
	a := &Assigner{db: db, cfg: cfg, host: host, log: logger, storeName: "MySQL at " + dsn.Addr, waitLoss: retry.Sleep}
	table := cfg.WorkerNodeTable
	def := defaultNodeTable
	if cfg.Mode == workerid.ModeLeased {
		table, def = cfg.WorkerLeaseTable, defaultLeaseTable
	}
	create, err := createStatement(def, table)
	if err != nil {
		db.Close()
		return nil, err
	}
	createFleet, err := createStatement(defaultFleetTable, cfg.FleetTable)
	if err != nil {
		db.Close()
		return nil, err
	}
	where := fmt.Sprintf("MySQL at %s (user %q, database %q)", dsn.Addr, dsn.User, dsn.DBName)
	err = workerid.RetryStore(ctx, cfg.StoreStartupDeadline, logger, "connect to "+where, func(ctx context.Context) error {
		if err := db.PingContext(ctx); err != nil {
			return a.classify(err, "")
		}
		for _, t := range []struct{ name, create string }{{table, create}, {cfg.FleetTable, createFleet}} {
			if !cfg.TablesByHand {
				if _, err := db.ExecContext(ctx, t.create); err != nil {
					return a.classify(err, fmt.Sprintf("create table %s (set %s and run workerid/mysqlstore/schema.sql by hand when the user may not create tables)", t.name, cfg.byHand()))
				}
			}
			if _, err := db.ExecContext(ctx, "SELECT 1 FROM "+quoteIdent(t.name)+" LIMIT 0"); err != nil {
				return a.classify(err, fmt.Sprintf("table %s (create it with workerid/mysqlstore/schema.sql%s)", t.name, cfg.orLetStartUpCreate()))
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, startupError(cfg, where, dsn.DBName, err)
	}
	if err := a.checkDurability(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if cfg.Mode == workerid.ModeDisposable {
		if err := a.fleetMaxColumn(ctx); err != nil {
			db.Close()
			return nil, err
		}
	}
	if cfg.Mode == workerid.ModeLeased {
		a.store = &mysqlLeaseStore{db: db, table: quoteIdent(table)}
		a.leases, err = workerid.NewLeaseAssigner(a.store, workerid.LeaseConfigFrom(cfg.Config, host, a.storeName+" table "+table))
		if err != nil {
			db.Close()
			return nil, err
		}
	}
	logger.Info("workerid: MySQL worker-ID store ready", "store", a.storeName, "mode", cfg.Mode, "table", table)
	return a, nil
}

// startupError is the error of a store that start-up could not open,
// saying what to change by the settings' names (cfg.Name: the dispenser's
// variables), and "workerid:" once: RetryStore's error after the
// deadline already carries it (ErrStoreUnavailable) and where.
func startupError(cfg Config, where, database string, err error) error {
	if errors.Is(err, workerid.ErrStoreUnavailable) {
		return fmt.Errorf("%w; check %s and that the server is up (start-up waited %s=%s for it)",
			err, cfg.Name("DSN"), cfg.Name("StoreStartupDeadline"), cfg.StoreStartupDeadline)
	}
	switch mysqlErrorNumber(err) {
	case mysqlUnknownDatabase:
		return fmt.Errorf("workerid: %s: %w; the database does not exist: create it (CREATE DATABASE %s) or name an existing one in %s",
			where, err, quoteIdent(database), cfg.Name("DSN"))
	case mysqlAccessDenied:
		return fmt.Errorf("workerid: %s: %w; check the user and password in %s", where, err, cfg.Name("DSN"))
	}
	return fmt.Errorf("workerid: %s: %w", where, err)
}

// classify redacts err and marks the errors that retrying cannot cure
// (bad credentials, missing database, table or privilege) as permanent.
func (a *Assigner) classify(err error, doing string) error {
	msg := err.Error()
	if dsn, perr := mysql.ParseDSN(a.cfg.DSN); perr == nil {
		msg = redactPassword(msg, dsn.Passwd)
	}
	if doing != "" {
		msg = doing + ": " + msg
	}
	out := &redactedError{msg: msg, err: err}
	switch mysqlErrorNumber(err) {
	case mysqlAccessDenied, mysqlDBAccessDenied, mysqlUnknownDatabase, mysqlTableAccessDenied,
		mysqlNoSuchTable, mysqlCommandDeniedToUse, mysqlSyntaxError:
		return workerid.Permanent(out)
	}
	return out
}

// redactedError carries an error whose message had a secret removed; it
// still unwraps to the original for errors.Is/As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func redactPassword(msg, password string) string {
	if password == "" {
		return msg
	}
	return strings.ReplaceAll(msg, password, "***")
}

// Regressions is how many times a lease found its record older than what
// the store had acknowledged to it (workerid.LeaseAssigner.Regressions),
// or in disposable mode how many worker IDs were refused because their
// row, read back W after the INSERT, was not this start's, or the
// auto-increment handed out one not above the fleet's highest
// (claimDisposable).
func (a *Assigner) Regressions() uint64 {
	if a.leases == nil {
		return a.refusedRows.Load()
	}
	return a.leases.Regressions()
}

// Claim implements uidcore.Assigner. Leased mode returns a *Lease;
// disposable mode inserts a WORKER_NODE row and returns a claim on its
// auto-increment ID once that row is durable (claimDisposable), or an
// error wrapping ErrWorkerIDsExhausted when that ID is beyond the
// layout's range.
func (a *Assigner) Claim(ctx context.Context, layout uidcore.Layout) (uidcore.Claim, error) {
	if a.leases != nil {
		return a.leases.Claim(ctx, layout)
	}
	if err := layout.Validate(); err != nil {
		return nil, err
	}
	return a.claimDisposable(ctx, layout)
}

// CheckRange implements workerid.RangeChecker: in disposable mode, a
// WORKER_NODE whose next row is past the layout's worker range.
func (a *Assigner) CheckRange(ctx context.Context, layout uidcore.Layout) error {
	if a.leases != nil || layout.Validate() != nil {
		return nil
	}
	return a.checkNextWorkerNode(ctx, quoteIdent(a.cfg.WorkerNodeTable), layout)
}

// checkNextWorkerNode refuses, without inserting, a claim whose row
// would get an ID beyond the layout's worker range: the auto-increment
// hands out at least MAX(ID)+1, and at least the table's AUTO_INCREMENT
// (above MAX(ID)+1 after deleted rows), so such a start would only burn
// a row and, before it, record the fleet with the refused layout. MySQL
// 8 may show AUTO_INCREMENT from its statistics cache
// (information_schema_stats_expiry), which is never above the counter:
// a stale value lets the insert catch the rest, as before. A failing
// query is left to the insert, which retries and reports store errors.
func (a *Assigner) checkNextWorkerNode(ctx context.Context, table string, layout uidcore.Layout) error {
	var maxID sql.NullInt64
	if err := a.db.QueryRowContext(ctx, "SELECT MAX(ID) FROM "+table).Scan(&maxID); err != nil || maxID.Int64 < 0 {
		return nil
	}
	next := uint64(maxID.Int64) + 1
	var autoIncrement sql.NullInt64
	err := a.db.QueryRowContext(ctx, "SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
		a.cfg.WorkerNodeTable).Scan(&autoIncrement)
	if err == nil && autoIncrement.Int64 > 0 {
		next = max(next, uint64(autoIncrement.Int64))
	}
	if next > layout.MaxWorkerID() {
		return &workerid.DisposableRangeError{Source: a.storeName + " table " + a.cfg.WorkerNodeTable, WorkerID: next, Layout: layout,
			ModeVar: a.cfg.Name("Mode"), Before: true}
	}
	return nil
}

// Close closes the database handle. Release leases first.
func (a *Assigner) Close() error { return a.db.Close() }

// mysqlLeaseStore is the LeaseStore on the WORKER_LEASE table. Expiry is
// compared on the database server's clock (UTC_TIMESTAMP), so the clocks
// of the instances do not matter for it.
type mysqlLeaseStore struct {
	db    *sql.DB
	table string // quoted
}

// Acquire implements LeaseStore: first the lowest expired or released
// row, updated in one statement under READ COMMITTED (InnoDB re-checks
// the condition on rows another claimer just updated, so concurrent
// claimers move on to the next row); else the lowest unused ID, inserted
// with its primary key deciding races.
func (s *mysqlLeaseStore) Acquire(ctx context.Context, req workerid.LeaseRequest) (workerid.Grant, error) {
	for {
		if err := ctx.Err(); err != nil {
			return workerid.Grant{}, err
		}
		// A worker ID whose reservation has (nearly) passed serves at once;
		// one reserved further into the future (its owner died holding a
		// reserve chunk) only from then on: take it only when nothing
		// better is left, not even a never-used one.
		g, ok, err := s.recycle(ctx, req, true)
		if retryableRace(err) {
			continue
		}
		if err != nil || ok {
			return g, err
		}
		var next sql.NullInt64
		// The lowest unused worker ID of the range: its first, or the one
		// after the lowest row of the range whose successor has no row.
		err = s.db.QueryRowContext(ctx, "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM "+s.table+" WHERE WORKER_ID = ?) THEN ? ELSE "+
			"(SELECT MIN(a.WORKER_ID) + 1 FROM "+s.table+" a LEFT JOIN "+s.table+" b ON b.WORKER_ID = a.WORKER_ID + 1 WHERE b.WORKER_ID IS NULL AND a.WORKER_ID >= ?) END",
			req.MinWorkerID, req.MinWorkerID, req.MinWorkerID).Scan(&next)
		if err != nil {
			return workerid.Grant{}, err
		}
		if !next.Valid || next.Int64 < 0 || uint64(next.Int64) < req.MinWorkerID || uint64(next.Int64) > req.MaxWorkerID {
			g, ok, err := s.recycle(ctx, req, false)
			if retryableRace(err) {
				continue
			}
			if err != nil || ok {
				return g, err
			}
			return workerid.Grant{}, fmt.Errorf("%w: every worker ID from %d to %d has a live lease", workerid.ErrWorkerIDsExhausted, req.MinWorkerID, req.MaxWorkerID)
		}
		_, err = s.db.ExecContext(ctx, "INSERT INTO "+s.table+" (WORKER_ID, OWNER_TOKEN, LEASE_EXPIRY, RESERVED_SECOND, HOST_NAME, PORT, TYPE, CREATED, MODIFIED) "+
			"VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, 0, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
			next.Int64, req.Token, req.TTL.Microseconds(), req.Host.Name, req.Host.Port, int(req.Host.Type))
		if retryableRace(err) {
			continue // another claimer inserted it first
		}
		if err != nil {
			return workerid.Grant{}, err
		}
		return workerid.Grant{WorkerID: uint64(next.Int64), Token: req.Token}, nil
	}
}

// retryableRace: lost a race with another claimer; try again.
func retryableRace(err error) bool {
	switch mysqlErrorNumber(err) {
	case mysqlDuplicateKey, mysqlDeadlock, mysqlLockWaitTimeout:
		return true
	}
	return false
}

// recycle takes the lowest expired or released lease of the range, with
// pastOnly only one whose reservation is at most a second beyond the
// database's clock (what a generator may run ahead anyway).
func (s *mysqlLeaseStore) recycle(ctx context.Context, req workerid.LeaseRequest, pastOnly bool) (g workerid.Grant, ok bool, err error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return workerid.Grant{}, false, err
	}
	defer func() {
		if err != nil || !ok {
			_ = tx.Rollback()
		}
	}()
	res, err := tx.ExecContext(ctx, "UPDATE "+s.table+" SET OWNER_TOKEN = ?, LEASE_EXPIRY = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, "+
		"HOST_NAME = ?, PORT = ?, TYPE = ?, MODIFIED = UTC_TIMESTAMP(6) "+
		"WHERE LEASE_EXPIRY < UTC_TIMESTAMP(6) AND WORKER_ID BETWEEN ? AND ? AND (? = 0 OR RESERVED_SECOND <= UNIX_TIMESTAMP() + 1) ORDER BY WORKER_ID LIMIT 1",
		req.Token, req.TTL.Microseconds(), req.Host.Name, req.Host.Port, int(req.Host.Type), req.MinWorkerID, req.MaxWorkerID, pastOnly)
	if err != nil {
		return workerid.Grant{}, false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return workerid.Grant{}, false, err
	}
	var id, reserved int64
	if err := tx.QueryRowContext(ctx, "SELECT WORKER_ID, RESERVED_SECOND FROM "+s.table+" WHERE OWNER_TOKEN = ?", req.Token).Scan(&id, &reserved); err != nil {
		return workerid.Grant{}, false, err
	}
	if err := tx.Commit(); err != nil {
		return workerid.Grant{}, false, err
	}
	return workerid.Grant{WorkerID: uint64(id), Token: req.Token, PrevReserved: reserved}, true, nil
}

// Renew implements LeaseStore: one UPDATE that matches only token's row
// still reserving at least verified, so that a row the database forgot
// writes of (a failover to a replica that lacked them) is never extended.
func (s *mysqlLeaseStore) Renew(ctx context.Context, workerID uint64, token string, ttl time.Duration, reserved, verified int64) error {
	res, err := s.db.ExecContext(ctx, "UPDATE "+s.table+" SET LEASE_EXPIRY = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, "+
		"RESERVED_SECOND = GREATEST(RESERVED_SECOND, ?), MODIFIED = UTC_TIMESTAMP(6) WHERE WORKER_ID = ? AND OWNER_TOKEN = ? AND RESERVED_SECOND >= ?",
		ttl.Microseconds(), reserved, workerID, token, verified)
	if err != nil {
		return err
	}
	return s.checkOwner(ctx, res, workerID, token, verified)
}

// Release implements LeaseStore.
func (s *mysqlLeaseStore) Release(ctx context.Context, workerID uint64, token string, usedUpTo, verified int64) error {
	res, err := s.db.ExecContext(ctx, "UPDATE "+s.table+" SET OWNER_TOKEN = '', LEASE_EXPIRY = '1970-01-01 00:00:00', "+
		"RESERVED_SECOND = LEAST(GREATEST(RESERVED_SECOND, ?), ?), MODIFIED = UTC_TIMESTAMP(6) WHERE WORKER_ID = ? AND OWNER_TOKEN = ?", verified, usedUpTo, workerID, token)
	if err != nil {
		return err
	}
	return s.checkOwner(ctx, res, workerID, token, math.MinInt64)
}

// checkOwner turns an update that matched no row into ErrLeaseTaken
// (another owner), ErrLeaseRegression (no row, or token's row reserving
// less than verified: the database forgot token's writes), or nil (the
// row is token's and the update changed nothing).
func (s *mysqlLeaseStore) checkOwner(ctx context.Context, res sql.Result, workerID uint64, token string, verified int64) error {
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return err
	}
	var (
		owner    string
		reserved int64
	)
	err := s.db.QueryRowContext(ctx, "SELECT OWNER_TOKEN, RESERVED_SECOND FROM "+s.table+" WHERE WORKER_ID = ?", workerID).Scan(&owner, &reserved)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: worker ID %d has no lease row", workerid.ErrLeaseRegression, workerID)
	case err != nil:
		return err
	case owner != token:
		return fmt.Errorf("%w: worker ID %d", workerid.ErrLeaseTaken, workerID)
	case reserved < verified:
		return fmt.Errorf("%w: worker ID %d reserves up to second %d, the database had acknowledged %d to this owner", workerid.ErrLeaseRegression, workerID, reserved, verified)
	}
	return nil
}

// driverLogger hands the MySQL driver's messages to slog, at warning level,
// with the password taken out should the driver ever quote it.
type driverLogger struct {
	log      *slog.Logger
	password string
}

func (l driverLogger) Print(v ...any) {
	l.log.Warn(redactPassword(strings.TrimSpace(fmt.Sprint(v...)), l.password))
}
