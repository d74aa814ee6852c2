package natsio

import (
	"cmp"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
)

// BlocksConfig configures a BlockPublisher. Zero values take the
// defaults of DefaultBlocksConfig (the stream, subject and block size are
// the ones BlockSource assumes too).
type BlocksConfig struct {
	BlocksStream  string // JetStream stream name, created or updated at start
	BlocksSubject string // subject the blocks are published on (no wildcards)
	BlockSize     int    // IDs per block (8 bytes each), 1..protocol.MaxBlockSize
	// BlocksTargetDepth is the blocks kept in the stream: its message
	// cap, with discard-new.
	BlocksTargetDepth int
	BlocksStorage     string // file or memory
	BlocksReplicas    int    // stream replicas, 1..5
	// BlocksDuplicateWindow is the stream's duplicate window: the same
	// Nats-Msg-Id within it is stored once. The publisher never sends a
	// block again after an unknown outcome (BlockPublisher.await).
	BlocksDuplicateWindow time.Duration
	// BlocksPollInterval is the longest wait between checks of the
	// stream depth while it stays full.
	BlocksPollInterval time.Duration
	// Region, when set, gives the region a stream of its own, placed in
	// its cluster (the region's name is its cluster's): the stream
	// <BlocksStream>_<Region> on the subject <BlocksSubject>.<Region>, so
	// that a region's consumers pull blocks of its own worker IDs locally.
	Region  string
	cluster string // set by regional: the stream's placement

	Logger *slog.Logger // nil: slog.Default()
	// TracerProvider makes the producer spans; nil: the global one (as
	// ServiceConfig.TracerProvider and uidclient.Config.TracerProvider).
	TracerProvider trace.TracerProvider
}

// DefaultBlocksConfig is the configuration with every default.
func DefaultBlocksConfig() BlocksConfig {
	return BlocksConfig{
		BlocksStream:          protocol.DefaultBlocksStream,
		BlocksSubject:         protocol.DefaultBlocksSubject,
		BlockSize:             protocol.DefaultBlockSize,
		BlocksTargetDepth:     16, // 524,288 IDs of the default block size, 4 MiB
		BlocksStorage:         "file",
		BlocksReplicas:        1,
		BlocksDuplicateWindow: 2 * time.Minute,
		BlocksPollInterval:    100 * time.Millisecond,
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
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate reports the first invalid setting as a *setting.Error. Zero
// values are valid (they take the defaults).
func (c BlocksConfig) Validate() error {
	c = c.withDefaults()
	bad := func(field, format string, args ...any) error {
		return &setting.Error{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case !streamNamePattern.MatchString(c.BlocksStream):
		return bad("BlocksStream", "%q is not a valid stream name (letters, digits, _ and -)", c.BlocksStream)
	case c.Region != "" && !streamNamePattern.MatchString(c.Region):
		return bad("Region", "%q cannot be part of a stream name (letters, digits, _ and -)", c.Region)
	case !validPublishSubject(c.BlocksSubject):
		return bad("BlocksSubject", "%q is not a valid subject to publish on (dot-separated tokens, no wildcards or spaces)", c.BlocksSubject)
	case c.BlockSize < 1 || c.BlockSize > protocol.MaxBlockSize:
		return bad("BlockSize", "%d is outside 1..%d", c.BlockSize, protocol.MaxBlockSize)
	case c.BlocksTargetDepth < 1 || c.BlocksTargetDepth > 1<<20:
		return bad("BlocksTargetDepth", "%d is outside 1..%d", c.BlocksTargetDepth, 1<<20)
	case c.BlocksStorage != "file" && c.BlocksStorage != "memory":
		return bad("BlocksStorage", "%q is neither file nor memory", c.BlocksStorage)
	case c.BlocksReplicas < 1 || c.BlocksReplicas > 5:
		return bad("BlocksReplicas", "%d is outside 1..5", c.BlocksReplicas)
	case c.BlocksDuplicateWindow < time.Second:
		return bad("BlocksDuplicateWindow", "%s is shorter than 1s", c.BlocksDuplicateWindow)
	case c.BlocksPollInterval < time.Millisecond:
		return bad("BlocksPollInterval", "%s is shorter than 1ms", c.BlocksPollInterval)
	}
	return nil
}

// regional is c with its region's stream, subject and placement (c as
// it is without a region). Apply it once, to a configuration with
// defaults.
func (c BlocksConfig) regional() BlocksConfig {
	if c.Region == "" {
		return c
	}
	c.BlocksStream += "_" + c.Region
	c.BlocksSubject += "." + c.Region
	c.cluster, c.Region = c.Region, ""
	return c
}

// streamNamePattern is what JetStream accepts as a stream name.
var streamNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)

func validPublishSubject(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n*>") {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
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
	var placement *jetstream.Placement
	if c.cluster != "" {
		placement = &jetstream.Placement{Cluster: c.cluster}
	}
	return jetstream.StreamConfig{
		Placement:   placement,
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

// StreamConfig is the block stream c describes (defaults filled, the
// region's stream when c has one), for tools and benchmarks that publish
// into the same configuration as the publishers.
func (c BlocksConfig) StreamConfig() jetstream.StreamConfig {
	return c.withDefaults().regional().streamConfig()
}
