package workerid

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Mode is how worker IDs are handed out.
type Mode string

const (
	// ModeLeased leases recyclable worker IDs with time reservations.
	ModeLeased Mode = "leased"
	// ModeDisposable takes a fresh worker ID on every start (UidGenerator).
	ModeDisposable Mode = "disposable"
)

// EnvPrefix is the prefix the dispenser processes its configuration with
// (envconfig.Process("DISPENSER", ...)); Config's errors name variables
// with it.
const EnvPrefix = "DISPENSER_"

// Config configures worker-ID assignment. It is meant to be embedded
// anonymously in the dispenser's configuration, processed by envconfig with
// the prefix DISPENSER, so the tag MYSQL_DSN is read from
// DISPENSER_MYSQL_DSN. The default tags are the only place defaults live;
// DefaultConfig reads them.
type Config struct {
	MySQLDSN             string        `envconfig:"MYSQL_DSN" desc:"MySQL DSN (go-sql-driver form, user:password@tcp(host:3306)/db) of the worker-ID store; empty: the JetStream KV bucket"`
	WorkerMode           Mode          `envconfig:"WORKER_MODE" default:"leased" desc:"leased (recyclable worker IDs with time reservations) or disposable (a new worker ID on every start, UidGenerator's WORKER_NODE)"`
	LeaseTTL             time.Duration `envconfig:"LEASE_TTL" default:"30s" desc:"leased: how long a worker-ID lease lasts without renewal (renewed every third of it); at least 1s"`
	ReserveChunk         time.Duration `envconfig:"RESERVE_CHUNK" default:"60s" desc:"leased: how far ahead seconds are reserved in the store at a time; at least 1s"`
	WorkerNodeTable      string        `envconfig:"WORKER_NODE_TABLE" default:"WORKER_NODE" desc:"disposable on MySQL: UidGenerator's worker-node table"`
	WorkerLeaseTable     string        `envconfig:"WORKER_LEASE_TABLE" default:"WORKER_LEASE" desc:"leased on MySQL: the lease table"`
	CreateTables         bool          `envconfig:"CREATE_TABLES" default:"true" desc:"MySQL: create the table of the mode at start-up when missing (needs the CREATE privilege)"`
	FleetTable           string        `envconfig:"FLEET_TABLE" default:"UID_FLEET" desc:"MySQL: the table holding the fleet's layout, worker mode and subject prefix (one row), compared by every instance"`
	SequenceTable        string        `envconfig:"SEQUENCE_TABLE" default:"UID_SEQUENCE" desc:"MySQL: the table of the named sequences (one row per name, like Leaf's leaf_alloc), created with DISPENSER_CREATE_TABLES"`
	WorkerKVBucket       string        `envconfig:"WORKER_KV_BUCKET" default:"uid_workers" desc:"JetStream KV bucket of the worker-ID store when no MySQL DSN is set"`
	WorkerKVReplicas     int           `envconfig:"WORKER_KV_REPLICAS" default:"1" desc:"replicas of the KV bucket when the dispenser creates it (3 on a cluster), 1..5"`
	StoreStartupDeadline time.Duration `envconfig:"STORE_STARTUP_DEADLINE" default:"30s" desc:"how long start-up (and a claim) retries an unreachable store before it fails"`
}

// DefaultConfig is the configuration with every field at its default tag.
func DefaultConfig() Config {
	var c Config
	v := reflect.ValueOf(&c).Elem()
	for i := range v.NumField() {
		def, ok := v.Type().Field(i).Tag.Lookup("default")
		if !ok {
			continue
		}
		f := v.Field(i)
		switch {
		case f.Type() == reflect.TypeFor[time.Duration]():
			d, err := time.ParseDuration(def)
			if err != nil {
				panic(err) // a broken tag in this file
			}
			f.SetInt(int64(d))
		case f.Kind() == reflect.String:
			f.SetString(def)
		case f.Kind() == reflect.Int:
			n, err := strconv.Atoi(def)
			if err != nil {
				panic(err)
			}
			f.SetInt(int64(n))
		case f.Kind() == reflect.Bool:
			b, err := strconv.ParseBool(def)
			if err != nil {
				panic(err)
			}
			f.SetBool(b)
		default:
			panic("workerid: no default parser for " + f.Type().String())
		}
	}
	return c
}

// ConfigError is an invalid setting, named by its environment variable.
type ConfigError struct {
	Var    string // e.g. DISPENSER_LEASE_TTL
	Reason string
}

func (e *ConfigError) Error() string { return "workerid: " + e.Var + ": " + e.Reason }

// envVar is the environment variable of the Config field with that name.
func envVar(field string) string {
	f, ok := reflect.TypeFor[Config]().FieldByName(field)
	if !ok {
		panic("workerid: no Config field " + field)
	}
	return EnvPrefix + f.Tag.Get("envconfig")
}

var (
	identifierPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	bucketPattern     = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// Validate reports the first invalid setting as a *ConfigError. The DSN
// is the MySQL store's to check (mysqlstore.Validate checks it too).
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Var: envVar(field), Reason: fmt.Sprintf(format, args...)}
	}
	if c.WorkerMode != ModeLeased && c.WorkerMode != ModeDisposable {
		return bad("WorkerMode", "%q is neither %q nor %q", c.WorkerMode, ModeLeased, ModeDisposable)
	}
	if c.LeaseTTL < time.Second {
		return bad("LeaseTTL", "%s is shorter than 1s", c.LeaseTTL)
	}
	if c.ReserveChunk < time.Second {
		return bad("ReserveChunk", "%s is shorter than 1s", c.ReserveChunk)
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
	if !bucketPattern.MatchString(c.WorkerKVBucket) {
		return bad("WorkerKVBucket", "%q is not a valid bucket name (letters, digits, _ and -)", c.WorkerKVBucket)
	}
	if c.WorkerKVReplicas < 1 || c.WorkerKVReplicas > 5 {
		return bad("WorkerKVReplicas", "%d is outside 1..5", c.WorkerKVReplicas)
	}
	if c.StoreStartupDeadline < 0 {
		return bad("StoreStartupDeadline", "%s is negative", c.StoreStartupDeadline)
	}
	return nil
}
