package dispenser

// The library configuration structs, built from Config in one place.

import (
	"errors"
	"log/slog"
	"reflect"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/telemetry"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
	"github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore"
)

// BlocksConfig is the block publisher's part of Config: the variables of
// natsio.BlocksConfig's fields (settingVars maps the fields to them).
type BlocksConfig struct {
	BlocksStream          string        `envconfig:"DISPENSER_BLOCKS_STREAM" desc:"blocks: JetStream stream name (created or updated at start-up)"`
	BlocksSubject         string        `envconfig:"DISPENSER_BLOCKS_SUBJECT" desc:"blocks: subject the blocks are published on (no wildcards)"`
	BlockSize             int           `envconfig:"DISPENSER_BLOCKS_BLOCK_SIZE" desc:"blocks: IDs per block, 1..4194304 (runs of consecutive IDs, 16 bytes each); 1..131072 with DISPENSER_BLOCKS_BINARY (8 bytes each)"`
	BlocksBinary          bool          `envconfig:"DISPENSER_BLOCKS_BINARY" desc:"blocks: publish the binary form (8 bytes per ID) for consumers older than ranges; upgrade the consumers, then turn it off"`
	BlocksTargetDepth     int           `envconfig:"DISPENSER_BLOCKS_TARGET_DEPTH" desc:"blocks: blocks kept in the stream (its message cap, discard-new)"`
	BlocksStorage         string        `envconfig:"DISPENSER_BLOCKS_STORAGE" desc:"blocks: stream storage, file or memory"`
	BlocksReplicas        int           `envconfig:"DISPENSER_BLOCKS_REPLICAS" desc:"blocks: stream replicas (3 on a cluster), 1..5"`
	BlocksDuplicateWindow time.Duration `envconfig:"DISPENSER_BLOCKS_DUPLICATE_WINDOW" desc:"blocks: the stream's duplicate window (a retried publish within it is stored once)"`
	BlocksPollInterval    time.Duration `envconfig:"DISPENSER_BLOCKS_POLL_INTERVAL" desc:"blocks: longest wait between checks of the stream depth while it stays full (checks are faster just after consumers drained it)"`
}

// WorkerIDConfig is the worker-ID stores' part of Config: the variables
// of workerid.Config's fields and of the stores' own configs
// (mysqlstore.Config, kvstore.Config). workerIDConfig, mysqlConfig and
// kvConfig build the libraries' structs from it; settingVars maps their
// fields to the variables.
type WorkerIDConfig struct {
	MySQLDSN             string              `envconfig:"DISPENSER_MYSQL_DSN" desc:"MySQL DSN (go-sql-driver form, user:password@tcp(host:3306)/db) of the worker-ID store; empty: the JetStream KV bucket"`
	WorkerMode           workerid.Mode       `envconfig:"DISPENSER_WORKER_MODE" desc:"leased (recyclable worker IDs with time reservations) or disposable (a new worker ID on every start, UidGenerator's WORKER_NODE)"`
	LeaseTTL             time.Duration       `envconfig:"DISPENSER_LEASE_TTL" desc:"leased: how long a worker-ID lease lasts without renewal (renewed every third of it); at least 1s"`
	ReserveChunk         time.Duration       `envconfig:"DISPENSER_RESERVE_CHUNK" desc:"leased: how far ahead seconds are reserved in the store at a time; at least 1s, and with a loss window more than DISPENSER_STORE_LOSS_WINDOW + DISPENSER_LEASE_TTL/3 + DISPENSER_MAX_AHEAD (IDs come only from the reservation a renewal confirmed W later); 0: 1m plus DISPENSER_STORE_LOSS_WINDOW (3m by default)"`
	WorkerNodeTable      string              `envconfig:"DISPENSER_WORKER_NODE_TABLE" desc:"disposable on MySQL: UidGenerator's worker-node table"`
	WorkerLeaseTable     string              `envconfig:"DISPENSER_WORKER_LEASE_TABLE" desc:"leased on MySQL: the lease table"`
	CreateTables         bool                `envconfig:"DISPENSER_CREATE_TABLES" desc:"MySQL: create the table of the mode at start-up when missing (needs the CREATE privilege)"`
	FleetTable           string              `envconfig:"DISPENSER_FLEET_TABLE" desc:"MySQL: the table holding the fleet's layout, worker mode and subject prefix (one row), compared by every instance"`
	SequenceTable        string              `envconfig:"DISPENSER_SEQUENCE_TABLE" desc:"MySQL: the table of the named sequences (one row per name, like Leaf's leaf_alloc), created with DISPENSER_CREATE_TABLES"`
	WorkerKVBucket       string              `envconfig:"DISPENSER_WORKER_KV_BUCKET" desc:"JetStream KV bucket of the worker-ID store when no MySQL DSN is set"`
	WorkerKVReplicas     int                 `envconfig:"DISPENSER_WORKER_KV_REPLICAS" desc:"replicas of the KV bucket when the dispenser creates it, 1..5; 0: 3 in a clustered JetStream (fewer on a smaller cluster), 1 on a single server"`
	StoreStartupDeadline time.Duration       `envconfig:"DISPENSER_STORE_STARTUP_DEADLINE" desc:"how long start-up (and a claim) retries an unreachable store before it fails (negative: one attempt)"`
	StoreLossWindow      time.Duration       `envconfig:"DISPENSER_STORE_LOSS_WINDOW" desc:"W, the longest window of acknowledged writes the store may forget (a power loss under lazy fsync, a lossy failover): a lease issues only seconds a renewal confirmed W after reserving them, so an instance joins the queue group W and a renewal after its claim, and sequences check their counters and settle a new instance; 0 only when every obligation of docs/operations.md, What the guarantees assume, holds"`
	StoreDurability      workerid.Durability `envconfig:"DISPENSER_STORE_DURABILITY" desc:"warn or refuse: what start-up does when the store's settings let it forget acknowledged writes (MySQL's innodb_flush_log_at_trx_commit, sync_binlog, read_only, semi-sync wait point; JetStream's sync_interval where readable)"`
	Region               string              `envconfig:"DISPENSER_REGION" desc:"this instance's region, one of DISPENSER_REGIONS, named like its NATS cluster (empty: no regions)"`
	Regions              workerid.Regions    `envconfig:"DISPENSER_REGIONS" desc:"the fleet's map of regions to worker-ID ranges, the same everywhere, e.g. east=0-511,west=512-1023; each region claims worker IDs only in its range, from a store of its own (docs/operations.md, Across regions); empty: no regions"`
}

// workerIDConfig is the settings the stores share; mysqlConfig and
// kvConfig add each store's own, and its SettingName, by which the
// store's messages name settings by our variables (settingVars).
func (c Config) workerIDConfig(log *slog.Logger) workerid.Config {
	return workerid.Config{
		Mode:                 c.WorkerMode,
		LeaseTTL:             c.LeaseTTL,
		ReserveChunk:         c.ReserveChunk,
		StoreStartupDeadline: c.StoreStartupDeadline,
		StoreLossWindow:      c.lossWindow(),
		StoreDurability:      c.StoreDurability,
		Region:               c.Region,
		Regions:              c.Regions,
		Logger:               log,
	}
}

// mysqlConfig is the MySQL store's configuration on top of common, the
// stores' shared one (workerIDConfig's).
func (c Config) mysqlConfig(common workerid.Config) mysqlstore.Config {
	common.SettingName = settingVar[mysqlstore.Config]
	return mysqlstore.Config{
		Config:           common,
		DSN:              c.MySQLDSN,
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
	common.SettingName = settingVar[kvstore.Config]
	return kvstore.Config{
		Config:   common,
		Bucket:   c.WorkerKVBucket,
		Replicas: c.WorkerKVReplicas,
	}
}

// workerIDDefaults is WorkerIDConfig holding the stores' defaults.
func workerIDDefaults() WorkerIDConfig {
	d, m, k := workerid.DefaultConfig(), mysqlstore.DefaultConfig(), kvstore.DefaultConfig()
	return WorkerIDConfig{
		MySQLDSN:             m.DSN,
		WorkerMode:           d.Mode,
		LeaseTTL:             d.LeaseTTL,
		ReserveChunk:         0, // workerid's default follows the loss window: ReserveChunkFor
		WorkerNodeTable:      m.WorkerNodeTable,
		WorkerLeaseTable:     m.WorkerLeaseTable,
		CreateTables:         !m.TablesByHand,
		FleetTable:           m.FleetTable,
		SequenceTable:        m.SequenceTable,
		WorkerKVBucket:       k.Bucket,
		WorkerKVReplicas:     k.Replicas,
		StoreStartupDeadline: d.StoreStartupDeadline,
		StoreLossWindow:      d.StoreLossWindow,
		StoreDurability:      d.StoreDurability,
		Region:               d.Region,
		Regions:              d.Regions,
	}
}

// blocksConfig is the block publisher's configuration.
func (c Config) blocksConfig(log *slog.Logger) natsio.BlocksConfig {
	return natsio.BlocksConfig{
		Stream:          c.BlocksStream,
		Subject:         c.BlocksSubject,
		BlockSize:       c.BlockSize,
		BinaryBlocks:    c.BlocksBinary,
		TargetDepth:     c.BlocksTargetDepth,
		Storage:         c.BlocksStorage,
		Replicas:        c.BlocksReplicas,
		DuplicateWindow: c.BlocksDuplicateWindow,
		PollInterval:    c.BlocksPollInterval,
		Region:          c.blocksRegion(),
		Logger:          log,
	}
}

// blocksDefaults is BlocksConfig holding the block publisher's defaults.
func blocksDefaults() BlocksConfig {
	d := natsio.DefaultBlocksConfig()
	return BlocksConfig{
		BlocksStream:          d.Stream,
		BlocksSubject:         d.Subject,
		BlockSize:             d.BlockSize,
		BlocksTargetDepth:     d.TargetDepth,
		BlocksStorage:         d.Storage,
		BlocksReplicas:        d.Replicas,
		BlocksDuplicateWindow: d.DuplicateWindow,
		BlocksPollInterval:    d.PollInterval,
	}
}

// settingVars is the one table from the libraries' settings to the
// variables that set them, by the library's configuration struct and its
// field. A library names its fields, never a variable (only the dispenser
// reads the environment), so this table is how a *setting.Error becomes a
// *ConfigError naming the variable (namedError), and how the stores'
// messages name a setting to change (workerid.Config.SettingName). It is
// keyed by struct because fields of different structs share a name
// (Replicas). A struct's embedded struct (workerid.Config in the stores'
// Config) is looked up under its own type. TestSettingVarsCoverTheLibraries
// holds it to every setting of each struct and to Variables.
var settingVars = map[reflect.Type]map[string]string{
	reflect.TypeFor[uidcore.Layout](): {
		"TimeBits":   "DISPENSER_TIME_BITS",
		"WorkerBits": "DISPENSER_WORKER_BITS",
		"SeqBits":    "DISPENSER_SEQ_BITS",
		"Epoch":      "DISPENSER_EPOCH",
		"Layout":     "DISPENSER_TIME_BITS/WORKER_BITS/SEQ_BITS", // their sum
	},
	reflect.TypeFor[uidcore.CachedOptions](): {
		"Layout":           "DISPENSER_LAYOUT",
		"MaxLanes":         "DISPENSER_MAX_LANES",
		"LaneIdle":         "DISPENSER_LANE_IDLE",
		"RingMemory":       "DISPENSER_RING_MEMORY",
		"RingSeconds":      "DISPENSER_BOOST_POWER", // 2^boost power seconds
		"PaddingFactor":    "DISPENSER_PADDING_FACTOR",
		"ScheduleInterval": "DISPENSER_SCHEDULE_INTERVAL",
		"MaxAhead":         "DISPENSER_MAX_AHEAD",
		"TakeWait":         "DISPENSER_TAKE_WAIT",
		"MaxLag":           "DISPENSER_MAX_LAG",
	},
	reflect.TypeFor[workerid.Config](): {
		"Mode":                 "DISPENSER_WORKER_MODE",
		"LeaseTTL":             "DISPENSER_LEASE_TTL",
		"ReserveChunk":         "DISPENSER_RESERVE_CHUNK",
		"StoreStartupDeadline": "DISPENSER_STORE_STARTUP_DEADLINE",
		"StoreLossWindow":      "DISPENSER_STORE_LOSS_WINDOW",
		"StoreDurability":      "DISPENSER_STORE_DURABILITY",
		"Region":               "DISPENSER_REGION",
		"Regions":              "DISPENSER_REGIONS",
	},
	reflect.TypeFor[mysqlstore.Config](): {
		"DSN":              "DISPENSER_MYSQL_DSN",
		"WorkerNodeTable":  "DISPENSER_WORKER_NODE_TABLE",
		"WorkerLeaseTable": "DISPENSER_WORKER_LEASE_TABLE",
		// DISPENSER_CREATE_TABLES, true by default, predates the
		// library's zero-value convention: it is the field's opposite.
		"TablesByHand":  "DISPENSER_CREATE_TABLES=false",
		"FleetTable":    "DISPENSER_FLEET_TABLE",
		"SequenceTable": "DISPENSER_SEQUENCE_TABLE",
	},
	reflect.TypeFor[kvstore.Config](): {
		"Bucket":   "DISPENSER_WORKER_KV_BUCKET",
		"Replicas": "DISPENSER_WORKER_KV_REPLICAS",
	},
	reflect.TypeFor[natsio.BlocksConfig](): {
		"Stream":          "DISPENSER_BLOCKS_STREAM",
		"Subject":         "DISPENSER_BLOCKS_SUBJECT",
		"BlockSize":       "DISPENSER_BLOCKS_BLOCK_SIZE",
		"BinaryBlocks":    "DISPENSER_BLOCKS_BINARY",
		"TargetDepth":     "DISPENSER_BLOCKS_TARGET_DEPTH",
		"Storage":         "DISPENSER_BLOCKS_STORAGE",
		"Replicas":        "DISPENSER_BLOCKS_REPLICAS",
		"DuplicateWindow": "DISPENSER_BLOCKS_DUPLICATE_WINDOW",
		"PollInterval":    "DISPENSER_BLOCKS_POLL_INTERVAL",
		"Region":          "DISPENSER_REGION",
	},
	reflect.TypeFor[natsio.ServiceConfig](): {
		"QueueGroup":    "DISPENSER_QUEUE_GROUP",
		"SubjectPrefix": "DISPENSER_SUBJECT_PREFIX",
		"MaxBatch":      "DISPENSER_MAX_BATCH",
		"CapacityWait":  "DISPENSER_TAKE_WAIT",
		"Region":        "DISPENSER_REGION",
		"Regions":       "DISPENSER_REGIONS",
	},
	reflect.TypeFor[sequence.Config](): {
		"MinStep": "DISPENSER_SEQUENCE_STEP",
		"MaxStep": "DISPENSER_SEQUENCE_MAX_STEP",
		"Target":  "DISPENSER_SEQUENCE_TARGET",
	},
	reflect.TypeFor[telemetry.Config](): {
		"Region":        "DISPENSER_REGION",
		"MetricsAddr":   "DISPENSER_METRICS_ADDR",
		"RunwayWarning": "DISPENSER_RUNWAY_WARNING",
	},
	reflect.TypeFor[natsconn.Config](): {
		"URL":            "DISPENSER_NATS_URL",
		"User":           "DISPENSER_NATS_USER",
		"Password":       "DISPENSER_NATS_PASSWORD",
		"Token":          "DISPENSER_NATS_TOKEN",
		"NKeySeedFile":   "DISPENSER_NATS_NKEY_SEED_FILE",
		"CredsFile":      "DISPENSER_NATS_CREDS_FILE",
		"TLSCAFile":      "DISPENSER_NATS_TLS_CA",
		"TLSCertFile":    "DISPENSER_NATS_TLS_CERT",
		"TLSKeyFile":     "DISPENSER_NATS_TLS_KEY",
		"ConnectTimeout": "DISPENSER_NATS_CONNECT_TIMEOUT",
		"PingInterval":   "DISPENSER_NATS_PING_INTERVAL",
		"DrainTimeout":   "DISPENSER_SHUTDOWN_TIMEOUT",
	},
}

// settingVar is the variable that sets field of the library struct L, or
// of a struct L embeds; a field the table lacks is returned as it is.
func settingVar[L any](field string) string {
	if v, ok := lookupSettingVar(reflect.TypeFor[L](), field); ok {
		return v
	}
	return field
}

func lookupSettingVar(t reflect.Type, field string) (string, bool) {
	if v, ok := settingVars[t][field]; ok {
		return v, true
	}
	if t == reflect.TypeFor[Config]() {
		// Config's own fields carry their variables in their tags.
		if f, ok := t.FieldByName(field); ok && f.Tag.Get("envconfig") != "" {
			return f.Tag.Get("envconfig"), true
		}
		return "", false
	}
	for i := range t.NumField() {
		if f := t.Field(i); f.Anonymous && f.Type.Kind() == reflect.Struct {
			if v, ok := lookupSettingVar(f.Type, field); ok {
				return v, true
			}
		}
	}
	return "", false
}

// namedError turns the library struct L's error about one of its
// settings, which names the field, into a *ConfigError naming the
// variable; other errors are returned as they are.
func namedError[L any](err error) error {
	if err == nil {
		return nil // without errors.As, whose target would escape: Validate allocates nothing
	}
	var se *setting.Error
	if errors.As(err, &se) {
		return &ConfigError{Var: settingVar[L](se.Field), Reason: se.Detail()}
	}
	return err
}

// lossWindow is W for the stores: 0 (no loss) reads as negative there,
// where zero means the default.
func (c Config) lossWindow() time.Duration {
	if c.StoreLossWindow <= 0 {
		return -1
	}
	return c.StoreLossWindow
}

// sequenceConfig is the allocator's configuration: with a loss window, a
// new instance settles before its first segment.
func (c Config) sequenceConfig(log *slog.Logger) sequence.Config {
	cfg := sequence.DefaultConfig()
	cfg.MinStep, cfg.MaxStep, cfg.Target, cfg.Logger = c.SequenceStep, c.SequenceMaxStep, c.SequenceTarget, log
	cfg.Settle = sequence.SettleFor(c.StoreLossWindow, cfg.CheckInterval)
	cfg.SettingName = settingVar[sequence.Config]
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

// serviceConfig is the service's settings; Start adds what it builds
// (the sources, telemetry, the claim's status).
func (c Config) serviceConfig() natsio.ServiceConfig {
	return natsio.ServiceConfig{
		QueueGroup:    c.QueueGroup,
		SubjectPrefix: c.SubjectPrefix,
		MaxBatch:      c.MaxBatch,
		CapacityWait:  c.TakeWait, // bulk batches wait as long as the generator's takes
		Region:        c.Region,
		Regions:       c.Regions.String(),
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
		PingInterval:   c.NATSPingInterval,
		DrainTimeout:   c.ShutdownTimeout,
		Logger:         log,
		SettingName:    settingVar[natsconn.Config],
	}
}
