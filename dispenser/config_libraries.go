package dispenser

// The library configuration structs, built from Config in one place.

import (
	"errors"
	"log/slog"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
	"github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore"
)

// BlocksConfig is the block publisher's part of Config: the fields of
// natsio.BlocksConfig, named alike, with their variables.
type BlocksConfig struct {
	BlocksStream          string        `envconfig:"DISPENSER_BLOCKS_STREAM" desc:"blocks: JetStream stream name (created or updated at start-up)"`
	BlocksSubject         string        `envconfig:"DISPENSER_BLOCKS_SUBJECT" desc:"blocks: subject the blocks are published on (no wildcards)"`
	BlockSize             int           `envconfig:"DISPENSER_BLOCKS_BLOCK_SIZE" desc:"blocks: IDs per block (8 bytes each), 1..131072"`
	BlocksTargetDepth     int           `envconfig:"DISPENSER_BLOCKS_TARGET_DEPTH" desc:"blocks: blocks kept in the stream (its message cap, discard-new)"`
	BlocksStorage         string        `envconfig:"DISPENSER_BLOCKS_STORAGE" desc:"blocks: stream storage, file or memory"`
	BlocksReplicas        int           `envconfig:"DISPENSER_BLOCKS_REPLICAS" desc:"blocks: stream replicas (3 on a cluster), 1..5"`
	BlocksDuplicateWindow time.Duration `envconfig:"DISPENSER_BLOCKS_DUPLICATE_WINDOW" desc:"blocks: the stream's duplicate window (a retried publish within it is stored once)"`
	BlocksPollInterval    time.Duration `envconfig:"DISPENSER_BLOCKS_POLL_INTERVAL" desc:"blocks: longest wait between checks of the stream depth while it stays full (checks are faster just after consumers drained it)"`
}

// WorkerIDConfig is the worker-ID stores' part of Config: the fields of
// workerid.Config and of the stores' own configs (mysqlstore.Config,
// kvstore.Config), named alike, with their variables (workerIDConfig,
// mysqlConfig and kvConfig build the libraries' structs from it, and
// errors naming a library's field name this one's variable).
type WorkerIDConfig struct {
	MySQLDSN             string           `envconfig:"DISPENSER_MYSQL_DSN" desc:"MySQL DSN (go-sql-driver form, user:password@tcp(host:3306)/db) of the worker-ID store; empty: the JetStream KV bucket"`
	WorkerMode           workerid.Mode    `envconfig:"DISPENSER_WORKER_MODE" desc:"leased (recyclable worker IDs with time reservations) or disposable (a new worker ID on every start, UidGenerator's WORKER_NODE)"`
	LeaseTTL             time.Duration    `envconfig:"DISPENSER_LEASE_TTL" desc:"leased: how long a worker-ID lease lasts without renewal (renewed every third of it); at least 1s"`
	ReserveChunk         time.Duration    `envconfig:"DISPENSER_RESERVE_CHUNK" desc:"leased: how far ahead seconds are reserved in the store at a time; at least 1s"`
	WorkerNodeTable      string           `envconfig:"DISPENSER_WORKER_NODE_TABLE" desc:"disposable on MySQL: UidGenerator's worker-node table"`
	WorkerLeaseTable     string           `envconfig:"DISPENSER_WORKER_LEASE_TABLE" desc:"leased on MySQL: the lease table"`
	CreateTables         bool             `envconfig:"DISPENSER_CREATE_TABLES" desc:"MySQL: create the table of the mode at start-up when missing (needs the CREATE privilege)"`
	FleetTable           string           `envconfig:"DISPENSER_FLEET_TABLE" desc:"MySQL: the table holding the fleet's layout, worker mode and subject prefix (one row), compared by every instance"`
	SequenceTable        string           `envconfig:"DISPENSER_SEQUENCE_TABLE" desc:"MySQL: the table of the named sequences (one row per name, like Leaf's leaf_alloc), created with DISPENSER_CREATE_TABLES"`
	WorkerKVBucket       string           `envconfig:"DISPENSER_WORKER_KV_BUCKET" desc:"JetStream KV bucket of the worker-ID store when no MySQL DSN is set"`
	WorkerKVReplicas     int              `envconfig:"DISPENSER_WORKER_KV_REPLICAS" desc:"replicas of the KV bucket when the dispenser creates it, 1..5; 0: 3 in a clustered JetStream (fewer on a smaller cluster), 1 on a single server"`
	StoreStartupDeadline time.Duration    `envconfig:"DISPENSER_STORE_STARTUP_DEADLINE" desc:"how long start-up (and a claim) retries an unreachable store before it fails (negative: one attempt)"`
	Region               string           `envconfig:"DISPENSER_REGION" desc:"this instance's region, one of DISPENSER_REGIONS, named like its NATS cluster (empty: no regions)"`
	Regions              workerid.Regions `envconfig:"DISPENSER_REGIONS" desc:"the fleet's map of regions to worker-ID ranges, the same everywhere, e.g. east=0-511,west=512-1023; each region claims worker IDs only in its range, from a store of its own (docs/operations.md, Across regions); empty: no regions"`
}

// workerIDConfig is the stores' configuration; their messages name
// settings by this configuration's variables.
func (c Config) workerIDConfig(log *slog.Logger) workerid.Config {
	return workerid.Config{
		WorkerMode:           c.WorkerMode,
		LeaseTTL:             c.LeaseTTL,
		ReserveChunk:         c.ReserveChunk,
		StoreStartupDeadline: c.StoreStartupDeadline,
		Region:               c.Region,
		Regions:              c.Regions,
		Logger:               log,
		SettingName:          storeSettingName,
	}
}

// mysqlConfig is the MySQL store's configuration on top of common, the
// stores' shared one (workerIDConfig's).
func (c Config) mysqlConfig(common workerid.Config) mysqlstore.Config {
	return mysqlstore.Config{
		Config:           common,
		MySQLDSN:         c.MySQLDSN,
		WorkerNodeTable:  c.WorkerNodeTable,
		WorkerLeaseTable: c.WorkerLeaseTable,
		TablesByHand:     !c.CreateTables,
		FleetTable:       c.FleetTable,
		SequenceTable:    c.SequenceTable,
	}
}

// kvConfig is the KV store's configuration on top of common, the stores'
// shared one (workerIDConfig's).
func (c Config) kvConfig(common workerid.Config) kvstore.Config {
	return kvstore.Config{
		Config:           common,
		WorkerKVBucket:   c.WorkerKVBucket,
		WorkerKVReplicas: c.WorkerKVReplicas,
	}
}

// workerIDDefaults is WorkerIDConfig holding the stores' defaults.
func workerIDDefaults() WorkerIDConfig {
	d, m, k := workerid.DefaultConfig(), mysqlstore.DefaultConfig(), kvstore.DefaultConfig()
	return WorkerIDConfig{
		MySQLDSN:             m.MySQLDSN,
		WorkerMode:           d.WorkerMode,
		LeaseTTL:             d.LeaseTTL,
		ReserveChunk:         d.ReserveChunk,
		WorkerNodeTable:      m.WorkerNodeTable,
		WorkerLeaseTable:     m.WorkerLeaseTable,
		CreateTables:         !m.TablesByHand,
		FleetTable:           m.FleetTable,
		SequenceTable:        m.SequenceTable,
		WorkerKVBucket:       k.WorkerKVBucket,
		WorkerKVReplicas:     k.WorkerKVReplicas,
		StoreStartupDeadline: d.StoreStartupDeadline,
		Region:               d.Region,
		Regions:              d.Regions,
	}
}

// blocksConfig is the block publisher's configuration.
func (c Config) blocksConfig(log *slog.Logger) natsio.BlocksConfig {
	return natsio.BlocksConfig{
		BlocksStream:          c.BlocksStream,
		BlocksSubject:         c.BlocksSubject,
		BlockSize:             c.BlockSize,
		BlocksTargetDepth:     c.BlocksTargetDepth,
		BlocksStorage:         c.BlocksStorage,
		BlocksReplicas:        c.BlocksReplicas,
		BlocksDuplicateWindow: c.BlocksDuplicateWindow,
		BlocksPollInterval:    c.BlocksPollInterval,
		Region:                c.blocksRegion(),
		Logger:                log,
	}
}

// blocksDefaults is BlocksConfig holding the block publisher's defaults.
func blocksDefaults() BlocksConfig {
	d := natsio.DefaultBlocksConfig()
	return BlocksConfig{
		BlocksStream:          d.BlocksStream,
		BlocksSubject:         d.BlocksSubject,
		BlockSize:             d.BlockSize,
		BlocksTargetDepth:     d.BlocksTargetDepth,
		BlocksStorage:         d.BlocksStorage,
		BlocksReplicas:        d.BlocksReplicas,
		BlocksDuplicateWindow: d.BlocksDuplicateWindow,
		BlocksPollInterval:    d.BlocksPollInterval,
	}
}

// fieldVar is the variable of the Config field with that name, as the
// libraries' messages name it: DISPENSER_LEASE_TTL for LeaseTTL. Config's
// fields carry the names of the library fields they map to (the mapping
// functions above), so a library's field name finds our variable; a name
// Config lacks is returned as it is.
func fieldVar(field string) string {
	if v, ok := variableOf(field); ok {
		return v
	}
	return field
}

// storeSettingName names the stores' settings in their messages: by
// fieldVar, and mysqlstore's TablesByHand, which DISPENSER_CREATE_TABLES
// (true by default, as the variable predates the library's zero-value
// convention) sets when false.
func storeSettingName(field string) string {
	if field == "TablesByHand" {
		return fieldVar("CreateTables") + "=false"
	}
	return fieldVar(field)
}

// namedError turns a library's error about one of its settings, which
// names the field, into a *ConfigError naming the variable; other errors
// are returned as they are.
func namedError(err error) error {
	var se *setting.Error // every library's setting error
	if errors.As(err, &se) {
		return &ConfigError{Var: fieldVar(se.Field), Reason: se.Detail()}
	}
	return err
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
		RingSeconds:      1 << c.BoostPower, // UidGenerator's boostPower: 2^boost seconds
		PaddingFactor:    c.PaddingFactor,
		ScheduleInterval: c.ScheduleInterval,
		MaxAhead:         c.MaxAhead, // negative: no bound, for uidcore too
		TakeWait:         c.TakeWait,
		MaxLag:           c.MaxLag,
		Observer:         observer,
	}
}

// connConfig is how to reach NATS; url is the resolved URL.
func (c Config) connConfig(url, name string, log *slog.Logger) natsconn.Config {
	return natsconn.Config{
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
