package mysqlstore

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// Config configures the MySQL store: the settings every store shares
// (workerid.Config) and the database's own. Zero values take
// DefaultConfig's (WithDefaults fills them in).
type Config struct {
	workerid.Config

	// DSN is the database's DSN (go-sql-driver form,
	// user:password@tcp(host:3306)/db); required.
	DSN              string
	WorkerNodeTable  string // disposable: UidGenerator's WORKER_NODE
	WorkerLeaseTable string // leased: the lease table
	// TablesByHand leaves the tables to the operator (schema.sql), for a
	// user without the CREATE privilege: start-up only checks that they
	// are there. Zero: start-up creates the tables that are missing.
	TablesByHand  bool
	FleetTable    string // the fleet record (one row)
	SequenceTable string // the named sequences (one row per name)
}

// DefaultConfig is the configuration with every default: workerid's, and
// the table names of schema.sql (UidGenerator's WORKER_NODE). It has no
// DSN.
func DefaultConfig() Config {
	return Config{
		Config:           workerid.DefaultConfig(),
		WorkerNodeTable:  defaultNodeTable,
		WorkerLeaseTable: defaultLeaseTable,
		FleetTable:       defaultFleetTable,
		SequenceTable:    defaultSequenceTable,
	}
}

// WithDefaults is c with every zero setting set to DefaultConfig's.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	c.Config = c.Config.WithDefaults()
	c.WorkerNodeTable = cmp.Or(c.WorkerNodeTable, d.WorkerNodeTable)
	c.WorkerLeaseTable = cmp.Or(c.WorkerLeaseTable, d.WorkerLeaseTable)
	c.FleetTable = cmp.Or(c.FleetTable, d.FleetTable)
	c.SequenceTable = cmp.Or(c.SequenceTable, d.SequenceTable)
	return c
}

// byHand names TablesByHand in the words of SettingName, for the messages
// that tell the operator to set it or to drop it.
func (c Config) byHand() string { return c.Name("TablesByHand") }

// orLetStartUpCreate ends a message about a missing table or column: with
// TablesByHand set, start-up would have created it.
func (c Config) orLetStartUpCreate() string {
	if !c.TablesByHand {
		return ""
	}
	return ", or drop " + c.byHand() + " and start-up creates it"
}

var identifierPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// Validate reports the first invalid setting as a *setting.Error,
// zero settings read as their defaults: workerid.Config's, the table
// names, and the DSN when set (one the driver reads; the error never
// echoes its password). NewAssigner also requires a DSN.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if err := c.Config.Validate(); err != nil {
		return err
	}
	bad := func(field, format string, args ...any) error {
		return &setting.Error{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	for _, t := range []struct{ field, name string }{{"WorkerNodeTable", c.WorkerNodeTable}, {"WorkerLeaseTable", c.WorkerLeaseTable}, {"FleetTable", c.FleetTable}, {"SequenceTable", c.SequenceTable}} {
		if !identifierPattern.MatchString(t.name) {
			return bad(t.field, "%q is not a plain SQL identifier (letters, digits and _, not starting with a digit, at most 64)", t.name)
		}
	}
	if strings.EqualFold(c.WorkerNodeTable, c.WorkerLeaseTable) {
		return bad("WorkerLeaseTable", "%q is also the worker-node table", c.WorkerLeaseTable)
	}
	if strings.EqualFold(c.FleetTable, c.WorkerNodeTable) || strings.EqualFold(c.FleetTable, c.WorkerLeaseTable) {
		return bad("FleetTable", "%q is also a worker-ID table", c.FleetTable)
	}
	for _, other := range []string{c.WorkerNodeTable, c.WorkerLeaseTable, c.FleetTable} {
		if strings.EqualFold(c.SequenceTable, other) {
			return bad("SequenceTable", "%q is also the table %s", c.SequenceTable, other)
		}
	}
	if c.DSN != "" {
		if _, err := mysql.ParseDSN(c.DSN); err != nil {
			return bad("DSN", "not a valid DSN: %s", redactDSN(err.Error(), c.DSN))
		}
	}
	return nil
}

// redactDSN removes from msg anything that could be the DSN's credentials
// (everything before its last '@').
func redactDSN(msg, dsn string) string {
	at := strings.LastIndex(dsn, "@")
	if at <= 0 {
		return msg
	}
	msg = strings.ReplaceAll(msg, dsn, "***")
	creds := dsn[:at]
	if i := strings.Index(creds, ":"); i >= 0 && i+1 < len(creds) {
		msg = strings.ReplaceAll(msg, creds[i+1:], "***")
	}
	return strings.ReplaceAll(msg, creds, "***")
}
