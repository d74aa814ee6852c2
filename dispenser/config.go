package dispenser

import (
	"fmt"
	"log/slog"
	"math/bits"
	"os"
	"strings"
	"time"

	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// EnvPrefix is the prefix of every configuration variable (an underscore
// joins it to a field's envconfig tag); variables without it are never
// read.
const EnvPrefix = "DISPENSER"

// Config is a dispenser instance's configuration, read from the
// environment by LoadConfig (envconfig): the one table of the variables.
// Each field's tags give its variable, whole (see processEnv), and its
// meaning; the defaults are DefaultConfig's, built from the libraries'
// own; Variables lists all three for -h, docs/configuration.md, the
// unknown-variable warning and the compose test. The functions of
// config_libraries.go build the libraries' structs from it in plain code,
// and its settingVars maps each library field to its variable, which is
// how a library's *setting.Error comes to name our variable.
type Config struct {
	NATSURL            string        `envconfig:"DISPENSER_NATS_URL" desc:"NATS server URL(s), comma-separated. Empty: use the server listening on DISPENSER_EMBEDDED_ADDR, or start an embedded one there"`
	NATSUser           string        `envconfig:"DISPENSER_NATS_USER" desc:"NATS user name (with DISPENSER_NATS_PASSWORD)"`
	NATSPassword       string        `envconfig:"DISPENSER_NATS_PASSWORD" desc:"NATS password"`
	NATSToken          string        `envconfig:"DISPENSER_NATS_TOKEN" desc:"NATS authentication token"`
	NATSNKeySeedFile   string        `envconfig:"DISPENSER_NATS_NKEY_SEED_FILE" desc:"file holding an NKey user seed"`
	NATSCredsFile      string        `envconfig:"DISPENSER_NATS_CREDS_FILE" desc:"NATS credentials file (JWT and seed)"`
	NATSTLSCA          string        `envconfig:"DISPENSER_NATS_TLS_CA" desc:"PEM file of the CA(s) that signed the server certificate"`
	NATSTLSCert        string        `envconfig:"DISPENSER_NATS_TLS_CERT" desc:"PEM client certificate (with DISPENSER_NATS_TLS_KEY)"`
	NATSTLSKey         string        `envconfig:"DISPENSER_NATS_TLS_KEY" desc:"PEM key of the client certificate"`
	NATSConnectTimeout time.Duration `envconfig:"DISPENSER_NATS_CONNECT_TIMEOUT" desc:"how long start-up waits for a NATS server to listen (retrying with back-off) before it fails"`
	NATSPingInterval   time.Duration `envconfig:"DISPENSER_NATS_PING_INTERVAL" desc:"how often the instance pings its NATS server: after 2 unanswered pings (2 to 3 intervals) it takes the link for dead and reconnects to another server of DISPENSER_NATS_URL, so an instance on a server cut off from its cluster leaves it within 3 intervals; 2s where a partition's unavailability matters (docs/operations.md)"`

	EmbeddedAddr    string `envconfig:"DISPENSER_EMBEDDED_ADDR" desc:"with no DISPENSER_NATS_URL: where to look for a NATS server, and where to start the embedded one when none listens"`
	EmbeddedDataDir string `envconfig:"DISPENSER_EMBEDDED_DATA_DIR" desc:"JetStream directory of the embedded server (default: <user cache dir>/uid-dispenser/nats, else ./data/nats)"`

	LayoutName string  `envconfig:"DISPENSER_LAYOUT" desc:"the ID layout by name: default, jssafe (53 bits: every ID a JavaScript Number holds exactly), uidgenerator (for reading old IDs; it can no longer issue any), or time/worker/sequence bits such as 31/16/16, optionally @ an epoch, RFC 3339 or a date (31/10/22@2026-01-01, midnight UTC); set instead of DISPENSER_TIME_BITS, _WORKER_BITS, _SEQ_BITS and DISPENSER_EPOCH"`
	TimeBits   uint    `envconfig:"DISPENSER_TIME_BITS" desc:"bits of delta seconds in an ID (time+worker+seq bits at most 63; 53 or less: JS-safe IDs)"`
	WorkerBits uint    `envconfig:"DISPENSER_WORKER_BITS" desc:"bits of worker ID (2^bits worker IDs; an instance holds one per lane)"`
	SeqBits    uint    `envconfig:"DISPENSER_SEQ_BITS" desc:"bits of sequence per second (2^bits IDs per second per worker ID, a lane, at wall-clock pace)"`
	Epoch      Instant `envconfig:"DISPENSER_EPOCH" desc:"the instant delta seconds count from: RFC 3339 (2026-01-01T00:00:00Z) or a date (2026-01-01, midnight UTC)"`

	BoostPower       int           `envconfig:"DISPENSER_BOOST_POWER" desc:"ring size = 2^seq bits << boost power, capped by DISPENSER_RING_MEMORY"`
	RingMemory       int           `envconfig:"DISPENSER_RING_MEMORY" desc:"bytes of IDs the ring may hold (8 per ID; a power of two of slots at most this)"`
	MaxLanes         int           `envconfig:"DISPENSER_MAX_LANES" desc:"most worker IDs (lanes) an instance holds at once, each sustaining 2^seq bits IDs per second; more are claimed while demand needs them (leased mode only; 1: one worker ID)"`
	LaneIdle         time.Duration `envconfig:"DISPENSER_LANE_IDLE" desc:"an extra lane unused this long is given back"`
	PaddingFactor    int           `envconfig:"DISPENSER_PADDING_FACTOR" desc:"pad the ring when fewer than this percentage of slots hold IDs (1-100)"`
	ScheduleInterval time.Duration `envconfig:"DISPENSER_SCHEDULE_INTERVAL" desc:"also pad on this interval (0: only on demand)"`
	MaxAhead         time.Duration `envconfig:"DISPENSER_MAX_AHEAD" desc:"how far IDs' seconds may run ahead of the clock under load (at least 1s; negative: no bound)"`
	TakeWait         time.Duration `envconfig:"DISPENSER_TAKE_WAIT" desc:"how long a request waits for IDs when the instance is at its capacity, or for the new worker ID after a lost lease, before it gets a 503 (keep it below the clients' attempt timeout, 1s for the Go client)"`
	MaxLag           time.Duration `envconfig:"DISPENSER_MAX_LAG" desc:"IDs waiting in the ring that lag the clock by more than this are discarded and refilled, so IDs carry real time at low load (at least 1s; negative: keep them)"`

	QueueGroup      string        `envconfig:"DISPENSER_QUEUE_GROUP" desc:"NATS queue group of the instances"`
	SubjectPrefix   string        `envconfig:"DISPENSER_SUBJECT_PREFIX" desc:"subjects are <prefix>.next, <prefix>.batch, <prefix>.parse"`
	MaxBatch        int           `envconfig:"DISPENSER_MAX_BATCH" desc:"largest batch count (further capped so a reply fits the NATS max payload)"`
	ShutdownTimeout time.Duration `envconfig:"DISPENSER_SHUTDOWN_TIMEOUT" desc:"bound on a graceful shutdown"`
	LogLevel        string        `envconfig:"DISPENSER_LOG_LEVEL" desc:"debug, info, warn or error"`
	LogFormat       string        `envconfig:"DISPENSER_LOG_FORMAT" desc:"text or json"`

	Sequences       string        `envconfig:"DISPENSER_SEQUENCES" desc:"named sequences to declare in the store: comma-separated name[@home region][=first number] (first default 1), e.g. orders,invoices=1000000; names are letters, digits, - and _. Served on <prefix>.seq.<name>.next and .batch; names other instances declared are served too. With DISPENSER_REGIONS every name needs its home (orders@east, the same value on every instance): only the home region's instances keep and serve it"`
	SequenceStep    uint64        `envconfig:"DISPENSER_SEQUENCE_STEP" desc:"sequences: size of a name's first segment taken from the store, and the smallest the adaptive step halves to"`
	SequenceMaxStep uint64        `envconfig:"DISPENSER_SEQUENCE_MAX_STEP" desc:"sequences: the largest segment; a kill -9 loses at most two segments per name"`
	SequenceTarget  time.Duration `envconfig:"DISPENSER_SEQUENCE_TARGET" desc:"sequences: how long a segment should last; a shorter one doubles the next step, one lasting more than twice as long halves it (the store sees about one write per target per name and instance)"`

	MetricsAddr   string `envconfig:"DISPENSER_METRICS_ADDR" desc:"listen address of the HTTP server with /metrics (Prometheus), /healthz and /readyz, e.g. :9464 (empty: none). Traces and OTLP metrics follow the OTEL_* variables"`
	RunwayWarning string `envconfig:"DISPENSER_RUNWAY_WARNING" desc:"log a warning and set uid_runway_warning when the layout's time field runs out sooner than this: a Go duration, days (90d) or years (2y); 0: never"`

	WorkerIDConfig

	BlocksEnabled bool `envconfig:"DISPENSER_BLOCKS_ENABLED" desc:"publish prefilled blocks of IDs into a JetStream work-queue stream for BlockSource consumers"`
	BlocksConfig       // DISPENSER_BLOCKS_*: the block publisher's settings
}

// DefaultTakeWait is how long a request waits for IDs at the instance's
// capacity, the service's bulk wait: below the Go client's 1s attempt
// timeout, so that the caller gets IDs or a 503 it can act on rather than
// a timeout.
const DefaultTakeWait = natsio.DefaultCapacityWait

// ConfigError is an invalid setting, named by its environment variable.
type ConfigError struct {
	Var    string // e.g. DISPENSER_TIME_BITS
	Reason string
}

func (e *ConfigError) Error() string { return e.Var + ": " + e.Reason }

// LoadConfig reads the configuration from the environment and validates
// it. Unset variables keep DefaultConfig's values. Errors name the
// variable.
func LoadConfig() (Config, error) {
	cfg := DefaultConfig()
	if err := processEnv(&cfg); err != nil {
		return Config{}, err
	}
	if err := cfg.applyLayoutName(); err != nil {
		return Config{}, err
	}
	return cfg, cfg.Validate()
}

// DefaultConfig is the configuration with every default, as LoadConfig
// gives it in an empty environment.
func DefaultConfig() Config {
	layout := uidcore.DefaultLayout()
	return Config{
		NATSConnectTimeout: 5 * time.Second,
		NATSPingInterval:   natsconn.DefaultPingInterval,
		EmbeddedAddr:       natsio.DefaultLocalAddr,
		TimeBits:           layout.TimeBits,
		WorkerBits:         layout.WorkerBits,
		SeqBits:            layout.SeqBits,
		Epoch:              Instant{layout.Epoch},
		BoostPower:         bits.Len(uidcore.DefaultRingSeconds) - 1,
		RingMemory:         uidcore.DefaultRingMemory,
		MaxLanes:           uidcore.DefaultMaxLanes,
		LaneIdle:           uidcore.DefaultLaneIdle,
		PaddingFactor:      uidcore.DefaultPaddingFactor,
		MaxAhead:           uidcore.DefaultMaxAhead,
		TakeWait:           DefaultTakeWait,
		MaxLag:             uidcore.DefaultMaxLag,
		QueueGroup:         protocol.DefaultQueueGroup,
		SubjectPrefix:      protocol.DefaultSubjectPrefix,
		MaxBatch:           natsio.DefaultMaxBatch,
		ShutdownTimeout:    10 * time.Second,
		LogLevel:           "info",
		LogFormat:          "text",
		RunwayWarning:      "1y",
		SequenceStep:       sequence.DefaultConfig().MinStep,
		SequenceMaxStep:    sequence.DefaultConfig().MaxStep,
		SequenceTarget:     sequence.DefaultConfig().Target,
		WorkerIDConfig:     workerIDDefaults(),
		BlocksConfig:       blocksDefaults(),
	}
}

// layoutVars are the variables DISPENSER_LAYOUT stands for.
var layoutVars = []string{"TIME_BITS", "WORKER_BITS", "SEQ_BITS", "EPOCH"}

// applyLayoutName sets the layout fields from DISPENSER_LAYOUT. It is
// one way to say the layout or the other: set together with one of the
// separate variables it is refused rather than one silently winning.
func (c *Config) applyLayoutName() error {
	if c.LayoutName == "" {
		return nil
	}
	for _, v := range layoutVars {
		if _, set := os.LookupEnv(EnvPrefix + "_" + v); set {
			return &ConfigError{Var: EnvPrefix + "_LAYOUT", Reason: fmt.Sprintf("set together with %s_%s: say the layout one way", EnvPrefix, v)}
		}
	}
	l, err := uidcore.ParseLayout(c.LayoutName)
	if err != nil {
		return &ConfigError{Var: EnvPrefix + "_LAYOUT", Reason: err.Error()}
	}
	c.TimeBits, c.WorkerBits, c.SeqBits, c.Epoch = l.TimeBits, l.WorkerBits, l.SeqBits, Instant{l.Epoch}
	return nil
}

// layoutNames is how errors name the layout's variables: DISPENSER_LAYOUT
// when the layout was given by it, else the separate variables.
func (c Config) layoutNames(vars ...string) string {
	if c.LayoutName != "" {
		return EnvPrefix + "_LAYOUT"
	}
	for i, v := range vars {
		vars[i] = EnvPrefix + "_" + v
	}
	return strings.Join(vars, "/")
}

// Layout is the ID layout the configuration describes.
func (c Config) Layout() uidcore.Layout {
	return uidcore.Layout{TimeBits: c.TimeBits, WorkerBits: c.WorkerBits, SeqBits: c.SeqBits, Epoch: c.Epoch.Time}
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(s))
	return l, err
}

// NewLogger builds the slog logger the configuration asks for, writing to
// stderr.
func NewLogger(c Config) *slog.Logger {
	level, _ := parseLevel(c.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
