package natsio

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// Defaults of BlocksConfig (the stream, subject and block size are the
// ones BlockSource assumes too). The envconfig default tags of
// BlocksConfig repeat them (a test keeps the two in step).
const (
	DefaultBlocksTargetDepth     = 64
	DefaultBlocksStorage         = "file"
	DefaultBlocksReplicas        = 1
	DefaultBlocksDuplicateWindow = 2 * time.Minute
	DefaultBlocksPollInterval    = 100 * time.Millisecond
)

// BlocksEnvPrefix is the prefix the dispenser processes its configuration
// with; BlocksConfig's errors name variables with it.
const BlocksEnvPrefix = "DISPENSER_"

// BlocksConfig configures a dispenser's BlockPublisher. It is meant to be
// embedded anonymously in the dispenser's configuration, processed by
// envconfig with the prefix DISPENSER (BLOCKS_ENABLED is read from
// DISPENSER_BLOCKS_ENABLED). Zero values take the defaults.
type BlocksConfig struct {
	BlocksEnabled         bool          `envconfig:"BLOCKS_ENABLED" default:"false" desc:"publish prefilled blocks of IDs into a JetStream work-queue stream for BlockSource consumers"`
	BlocksStream          string        `envconfig:"BLOCKS_STREAM" default:"UID_BLOCKS" desc:"blocks: JetStream stream name (created or updated at start-up)"`
	BlocksSubject         string        `envconfig:"BLOCKS_SUBJECT" default:"uid.blocks" desc:"blocks: subject the blocks are published on (no wildcards)"`
	BlockSize             int           `envconfig:"BLOCKS_BLOCK_SIZE" default:"4096" desc:"blocks: IDs per block (8 bytes each), 1..131072"`
	BlocksTargetDepth     int           `envconfig:"BLOCKS_TARGET_DEPTH" default:"64" desc:"blocks: blocks kept in the stream (its message cap, discard-new)"`
	BlocksStorage         string        `envconfig:"BLOCKS_STORAGE" default:"file" desc:"blocks: stream storage, file or memory"`
	BlocksReplicas        int           `envconfig:"BLOCKS_REPLICAS" default:"1" desc:"blocks: stream replicas (3 on a cluster), 1..5"`
	BlocksDuplicateWindow time.Duration `envconfig:"BLOCKS_DUPLICATE_WINDOW" default:"2m" desc:"blocks: the stream's duplicate window (a retried publish within it is stored once)"`
	BlocksPollInterval    time.Duration `envconfig:"BLOCKS_POLL_INTERVAL" default:"100ms" desc:"blocks: longest wait between checks of the stream depth while it stays full (checks are faster just after consumers drained it)"`
}

// DefaultBlocksConfig is the configuration with every field at its
// default (blocks disabled).
func DefaultBlocksConfig() BlocksConfig {
	return BlocksConfig{
		BlocksStream:          uidclient.DefaultBlocksStream,
		BlocksSubject:         uidclient.DefaultBlocksSubject,
		BlockSize:             uidclient.DefaultBlockSize,
		BlocksTargetDepth:     DefaultBlocksTargetDepth,
		BlocksStorage:         DefaultBlocksStorage,
		BlocksReplicas:        DefaultBlocksReplicas,
		BlocksDuplicateWindow: DefaultBlocksDuplicateWindow,
		BlocksPollInterval:    DefaultBlocksPollInterval,
	}
}

// withDefaults fills the zero fields with the defaults.
func (c BlocksConfig) withDefaults() BlocksConfig {
	d := DefaultBlocksConfig()
	c.BlocksStream = cmp.Or(c.BlocksStream, d.BlocksStream)
	c.BlocksSubject = cmp.Or(c.BlocksSubject, d.BlocksSubject)
	c.BlockSize = cmp.Or(c.BlockSize, d.BlockSize)
	c.BlocksTargetDepth = cmp.Or(c.BlocksTargetDepth, d.BlocksTargetDepth)
	c.BlocksStorage = cmp.Or(c.BlocksStorage, d.BlocksStorage)
	c.BlocksReplicas = cmp.Or(c.BlocksReplicas, d.BlocksReplicas)
	c.BlocksDuplicateWindow = cmp.Or(c.BlocksDuplicateWindow, d.BlocksDuplicateWindow)
	c.BlocksPollInterval = cmp.Or(c.BlocksPollInterval, d.BlocksPollInterval)
	return c
}

// BlocksConfigError is an invalid blocks setting, named by its environment
// variable.
type BlocksConfigError struct {
	Var    string // e.g. DISPENSER_BLOCKS_BLOCK_SIZE
	Reason string
}

func (e *BlocksConfigError) Error() string { return "natsio: " + e.Var + ": " + e.Reason }

// Validate reports the first invalid setting as a *BlocksConfigError.
// Zero values are valid (they take the defaults); a disabled
// configuration is always valid.
func (c BlocksConfig) Validate() error {
	if !c.BlocksEnabled {
		return nil
	}
	c = c.withDefaults()
	bad := func(tag, format string, args ...any) error {
		return &BlocksConfigError{Var: BlocksEnvPrefix + tag, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case !streamNamePattern.MatchString(c.BlocksStream):
		return bad("BLOCKS_STREAM", "%q is not a valid stream name (letters, digits, _ and -)", c.BlocksStream)
	case !validPublishSubject(c.BlocksSubject):
		return bad("BLOCKS_SUBJECT", "%q is not a valid subject to publish on (dot-separated tokens, no wildcards or spaces)", c.BlocksSubject)
	case c.BlockSize < 1 || c.BlockSize > uidclient.MaxBlockSize:
		return bad("BLOCKS_BLOCK_SIZE", "%d is outside 1..%d", c.BlockSize, uidclient.MaxBlockSize)
	case c.BlocksTargetDepth < 1 || c.BlocksTargetDepth > 1<<20:
		return bad("BLOCKS_TARGET_DEPTH", "%d is outside 1..%d", c.BlocksTargetDepth, 1<<20)
	case c.BlocksStorage != "file" && c.BlocksStorage != "memory":
		return bad("BLOCKS_STORAGE", "%q is neither file nor memory", c.BlocksStorage)
	case c.BlocksReplicas < 1 || c.BlocksReplicas > 5:
		return bad("BLOCKS_REPLICAS", "%d is outside 1..5", c.BlocksReplicas)
	case c.BlocksDuplicateWindow < time.Second:
		return bad("BLOCKS_DUPLICATE_WINDOW", "%s is shorter than 1s", c.BlocksDuplicateWindow)
	case c.BlocksPollInterval < time.Millisecond:
		return bad("BLOCKS_POLL_INTERVAL", "%s is shorter than 1ms", c.BlocksPollInterval)
	}
	return nil
}

// streamNamePattern is what JetStream accepts as a stream name.
var streamNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)

func validPublishSubject(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n*>") {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" {
			return false
		}
	}
	return true
}

// streamConfig is the block stream: a work queue (a block is removed once
// acknowledged or terminated) capped at the target depth with discard-new,
// so several publishers topping it up at once cannot overfill it.
func (c BlocksConfig) streamConfig() jetstream.StreamConfig {
	storage := jetstream.FileStorage
	if c.BlocksStorage == "memory" {
		storage = jetstream.MemoryStorage
	}
	return jetstream.StreamConfig{
		Name:        c.BlocksStream,
		Description: "prefilled blocks of unique IDs (uid-dispenser)",
		Subjects:    []string{c.BlocksSubject},
		Retention:   jetstream.WorkQueuePolicy,
		MaxMsgs:     int64(c.BlocksTargetDepth),
		Discard:     jetstream.DiscardNew,
		Storage:     storage,
		Replicas:    c.BlocksReplicas,
		Duplicates:  c.BlocksDuplicateWindow,
	}
}
