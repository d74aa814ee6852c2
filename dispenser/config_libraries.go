package dispenser

// The library configuration structs, built from Config in one place.

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// BlocksConfig is the block publisher's part of Config: the fields of
// natsio.BlocksConfig, named alike, with their variables.
type BlocksConfig struct {
	BlocksStream          string        `envconfig:"BLOCKS_STREAM" desc:"blocks: JetStream stream name (created or updated at start-up)"`
	BlocksSubject         string        `envconfig:"BLOCKS_SUBJECT" desc:"blocks: subject the blocks are published on (no wildcards)"`
	BlockSize             int           `envconfig:"BLOCKS_BLOCK_SIZE" desc:"blocks: IDs per block (8 bytes each), 1..131072"`
	BlocksTargetDepth     int           `envconfig:"BLOCKS_TARGET_DEPTH" desc:"blocks: blocks kept in the stream (its message cap, discard-new)"`
	BlocksStorage         string        `envconfig:"BLOCKS_STORAGE" desc:"blocks: stream storage, file or memory"`
	BlocksReplicas        int           `envconfig:"BLOCKS_REPLICAS" desc:"blocks: stream replicas (3 on a cluster), 1..5"`
	BlocksDuplicateWindow time.Duration `envconfig:"BLOCKS_DUPLICATE_WINDOW" desc:"blocks: the stream's duplicate window (a retried publish within it is stored once)"`
	BlocksPollInterval    time.Duration `envconfig:"BLOCKS_POLL_INTERVAL" desc:"blocks: longest wait between checks of the stream depth while it stays full (checks are faster just after consumers drained it)"`
}

// WorkerIDConfig is the worker-ID store's part of Config: the fields of
// workerid.Config, named alike, with their variables (workerIDConfig
// builds the library's struct from it, and errors naming a workerid
// field name this one's variable).
type WorkerIDConfig struct {
	MySQLDSN             string           `envconfig:"MYSQL_DSN" desc:"MySQL DSN (go-sql-driver form, user:password@tcp(host:3306)/db) of the worker-ID store; empty: the JetStream KV bucket"`
	WorkerMode           workerid.Mode    `envconfig:"WORKER_MODE" desc:"leased (recyclable worker IDs with time reservations) or disposable (a new worker ID on every start, UidGenerator's WORKER_NODE)"`
	LeaseTTL             time.Duration    `envconfig:"LEASE_TTL" desc:"leased: how long a worker-ID lease lasts without renewal (renewed every third of it); at least 1s"`
	ReserveChunk         time.Duration    `envconfig:"RESERVE_CHUNK" desc:"leased: how far ahead seconds are reserved in the store at a time; at least 1s"`
	WorkerNodeTable      string           `envconfig:"WORKER_NODE_TABLE" desc:"disposable on MySQL: UidGenerator's worker-node table"`
	WorkerLeaseTable     string           `envconfig:"WORKER_LEASE_TABLE" desc:"leased on MySQL: the lease table"`
	CreateTables         bool             `envconfig:"CREATE_TABLES" desc:"MySQL: create the table of the mode at start-up when missing (needs the CREATE privilege)"`
	FleetTable           string           `envconfig:"FLEET_TABLE" desc:"MySQL: the table holding the fleet's layout, worker mode and subject prefix (one row), compared by every instance"`
	SequenceTable        string           `envconfig:"SEQUENCE_TABLE" desc:"MySQL: the table of the named sequences (one row per name, like Leaf's leaf_alloc), created with DISPENSER_CREATE_TABLES"`
	WorkerKVBucket       string           `envconfig:"WORKER_KV_BUCKET" desc:"JetStream KV bucket of the worker-ID store when no MySQL DSN is set"`
	WorkerKVReplicas     int              `envconfig:"WORKER_KV_REPLICAS" desc:"replicas of the KV bucket when the dispenser creates it (3 on a cluster), 1..5"`
	StoreStartupDeadline time.Duration    `envconfig:"STORE_STARTUP_DEADLINE" desc:"how long start-up (and a claim) retries an unreachable store before it fails"`
	Region               string           `envconfig:"REGION" desc:"this instance's region, one of DISPENSER_REGIONS (empty: no regions)"`
	Regions              workerid.Regions `envconfig:"REGIONS" desc:"the fleet's map of regions to worker-ID ranges, the same everywhere, e.g. east=0-511,west=512-1023; each region claims worker IDs only in its range, from a store of its own (docs/operations.md, Across regions); empty: no regions"`
}

// workerIDConfig is the stores' configuration; their messages name
// settings by this configuration's variables.
func (c Config) workerIDConfig(log *slog.Logger) workerid.Config {
	w := workerid.Config{Logger: log, SettingName: fieldVar}
	copyFields(&w, c.WorkerIDConfig, reflect.TypeFor[WorkerIDConfig]())
	return w
}

// copyFields copies the fields of ours, one of Config's nested structs,
// from the struct src to the fields of the same name in *dst, one of
// them being ours and the other the library's struct it stands for. The nested
// structs carry the libraries' field names and types, so that neither
// this copy (both ways) nor fieldVar's naming needs a list of its own; a
// field the library lacks is a programming error every test meets.
func copyFields(dst, src any, ours reflect.Type) {
	d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src)
	for _, f := range reflect.VisibleFields(ours) {
		from, to := s.FieldByName(f.Name), d.FieldByName(f.Name)
		if !from.IsValid() || !to.IsValid() || from.Type() != to.Type() {
			panic(fmt.Sprintf("dispenser: %s.%s has no counterpart in %s", ours.Name(), f.Name, d.Type()))
		}
		to.Set(from)
	}
}

// blocksConfig is the block publisher's configuration.
func (c Config) blocksConfig(log *slog.Logger) natsio.BlocksConfig {
	b := natsio.BlocksConfig{Logger: log}
	copyFields(&b, c.BlocksConfig, reflect.TypeFor[BlocksConfig]())
	if !c.Regions.IsZero() {
		b.Region = c.Region // a stream per region, in its cluster
	}
	return b
}

// fieldVar is the variable of the Config field with that name (a
// promoted one included), as errors name it: DISPENSER_LEASE_TTL for
// LeaseTTL. The libraries name their settings by field, and Config's
// fields carry the libraries' names, so this is the one mapping; a name
// Config lacks is returned as it is.
func fieldVar(field string) string {
	if v, ok := lookupVar(field); ok {
		return v
	}
	return field
}

// lookupVar is fieldVar that says whether Config has the field.
func lookupVar(field string) (string, bool) {
	f, ok := reflect.TypeFor[Config]().FieldByName(field)
	if !ok || f.Tag.Get("envconfig") == "" {
		return "", false
	}
	return EnvPrefix + "_" + f.Tag.Get("envconfig"), true
}

// namedError turns a library's error about one of its settings, which
// names the field, into a *ConfigError naming the variable; other errors
// are returned as they are.
func namedError(err error) error {
	var se *setting.Error // every library's SettingError
	if errors.As(err, &se) {
		return &ConfigError{Var: fieldVar(se.Field), Reason: se.Detail()}
	}
	return err
}

// defaultsOf is one of Config's nested structs filled from the defaults
// of the library's struct it stands for.
func defaultsOf[T any](library any) T {
	var ours T
	copyFields(&ours, library, reflect.TypeFor[T]())
	return ours
}

// sequenceConfig is the allocator's configuration.
func (c Config) sequenceConfig(log *slog.Logger) sequence.Config {
	cfg := sequence.DefaultConfig()
	cfg.MinStep, cfg.MaxStep, cfg.Target, cfg.Logger = c.SequenceStep, c.SequenceMaxStep, c.SequenceTarget, log
	return cfg
}

// cachedOptions are the ring-buffer settings for uidcore. lanes claims
// extra worker IDs; it is used in leased mode only, where worker IDs are
// recycled (a disposable claim burns a WORKER_NODE row for good).
func (c Config) cachedOptions(claim uidcore.Claim, lanes uidcore.Assigner, observer uidcore.Observer) uidcore.CachedOptions {
	boost := c.BoostPower
	if boost == 0 {
		boost = -1 // uidcore reads 0 as "default"
	}
	maxAhead, maxLag := c.MaxAhead, c.MaxLag
	if maxAhead < 0 {
		maxAhead = uidcore.NoAheadBound
	}
	if maxLag < 0 {
		maxLag = uidcore.NoLagBound
	}
	maxLanes := c.MaxLanes
	if c.WorkerMode == workerid.ModeDisposable || maxLanes <= 1 {
		lanes, maxLanes = nil, 1
	}
	return uidcore.CachedOptions{
		Layout:           c.Layout(),
		Claim:            claim,
		Lanes:            lanes,
		MaxLanes:         maxLanes,
		LaneIdle:         c.LaneIdle,
		RingMemory:       c.RingMemory,
		BoostPower:       boost,
		PaddingFactor:    c.PaddingFactor,
		ScheduleInterval: c.ScheduleInterval,
		MaxAhead:         maxAhead,
		TakeWait:         c.TakeWait,
		MaxLag:           maxLag,
		Observer:         observer,
	}
}

// connConfig is how to reach NATS; url is the resolved URL.
func (c Config) connConfig(url, name string, log *slog.Logger) natsio.ConnConfig {
	return natsio.ConnConfig{
		URL:            url,
		Name:           name,
		User:           c.NATSUser,
		Password:       c.NATSPassword,
		Token:          c.NATSToken,
		NKeySeedFile:   c.NATSNKeySeedFile,
		CredsFile:      c.NATSCredsFile,
		TLSCAFile:      c.NATSTLSCA,
		TLSCertFile:    c.NATSTLSCert,
		TLSKeyFile:     c.NATSTLSKey,
		ConnectTimeout: c.NATSConnectTimeout,
		DrainTimeout:   c.ShutdownTimeout,
		Logger:         log,
	}
}
