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
	Stream  string // JetStream stream name, created or updated at start
	Subject string // subject the blocks are published on (no wildcards)
	// BlockSize is the IDs per block: 1..protocol.MaxRunsBlockSize as
	// runs (16 bytes per run of consecutive IDs), 1..protocol.MaxBlockSize
	// with BinaryBlocks (8 bytes each).
	BlockSize int
	// BinaryBlocks publishes blocks in the binary form, 8 bytes per ID,
	// for consumers older than ranges: during a rolling upgrade, upgrade
	// the consumers (BlockSource reads both forms), then turn it off.
	BinaryBlocks bool
	// TargetDepth is the blocks kept in the stream: its message
	// cap, with discard-new.
	TargetDepth int
	Storage     string // file or memory
	Replicas    int    // stream replicas, 1..5
	// DuplicateWindow is the stream's duplicate window: the same
	// Nats-Msg-Id within it is stored once. The publisher never sends a
	// block again after an unknown outcome (BlockPublisher.await).
	DuplicateWindow time.Duration
	// PollInterval is the longest wait between checks of the
	// stream depth while it stays full.
	PollInterval time.Duration
	// Region, when set, gives the region a stream of its own, placed in
	// its cluster (the region's name is its cluster's): the stream
	// <Stream>_<Region> on the subject <Subject>.<Region>, so
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
		Stream:          protocol.DefaultBlocksStream,
		Subject:         protocol.DefaultBlocksSubject,
		BlockSize:       protocol.DefaultBlockSize,
		TargetDepth:     16, // 524,288 IDs of the default block size, 4 MiB
		Storage:         "file",
		Replicas:        1,
		DuplicateWindow: 2 * time.Minute,
		PollInterval:    100 * time.Millisecond,
	}
}

// withDefaults fills the zero fields with the defaults.
func (c BlocksConfig) withDefaults() BlocksConfig {
	d := DefaultBlocksConfig()
	c.Stream = cmp.Or(c.Stream, d.Stream)
	c.Subject = cmp.Or(c.Subject, d.Subject)
	c.BlockSize = cmp.Or(c.BlockSize, d.BlockSize)
	c.TargetDepth = cmp.Or(c.TargetDepth, d.TargetDepth)
	c.Storage = cmp.Or(c.Storage, d.Storage)
	c.Replicas = cmp.Or(c.Replicas, d.Replicas)
	c.DuplicateWindow = cmp.Or(c.DuplicateWindow, d.DuplicateWindow)
	c.PollInterval = cmp.Or(c.PollInterval, d.PollInterval)
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
	case !streamNamePattern.MatchString(c.Stream):
		return bad("Stream", "%q is not a valid stream name (letters, digits, _ and -)", c.Stream)
	case c.Region != "" && !streamNamePattern.MatchString(c.Region):
		return bad("Region", "%q cannot be part of a stream name (letters, digits, _ and -)", c.Region)
	case !validPublishSubject(c.Subject):
		return bad("Subject", "%q is not a valid subject to publish on (dot-separated tokens, no wildcards or spaces)", c.Subject)
	case c.BinaryBlocks && (c.BlockSize < 1 || c.BlockSize > protocol.MaxBlockSize):
		return bad("BlockSize", "%d is outside 1..%d for binary blocks", c.BlockSize, protocol.MaxBlockSize)
	case c.BlockSize < 1 || c.BlockSize > protocol.MaxRunsBlockSize:
		return bad("BlockSize", "%d is outside 1..%d", c.BlockSize, protocol.MaxRunsBlockSize)
	case c.TargetDepth < 1 || c.TargetDepth > 1<<20:
		return bad("TargetDepth", "%d is outside 1..%d", c.TargetDepth, 1<<20)
	case c.Storage != "file" && c.Storage != "memory":
		return bad("Storage", "%q is neither file nor memory", c.Storage)
	case c.Replicas < 1 || c.Replicas > 5:
		return bad("Replicas", "%d is outside 1..5", c.Replicas)
	case c.DuplicateWindow < time.Second:
		return bad("DuplicateWindow", "%s is shorter than 1s", c.DuplicateWindow)
	case c.PollInterval < time.Millisecond:
		return bad("PollInterval", "%s is shorter than 1ms", c.PollInterval)
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
	c.Stream += "_" + c.Region
	c.Subject += "." + c.Region
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
	if c.Storage == "memory" {
		storage = jetstream.MemoryStorage
	}
	var placement *jetstream.Placement
	if c.cluster != "" {
		placement = &jetstream.Placement{Cluster: c.cluster}
	}
	return jetstream.StreamConfig{
		Placement:   placement,
		Name:        c.Stream,
		Description: "prefilled blocks of unique IDs (uid-dispenser)",
		Subjects:    []string{c.Subject},
		Retention:   jetstream.WorkQueuePolicy,
		MaxMsgs:     int64(c.TargetDepth),
		Discard:     jetstream.DiscardNew,
		Storage:     storage,
		Replicas:    c.Replicas,
		Duplicates:  c.DuplicateWindow,
		// A block older than this is dropped (its IDs are never used):
		// a claim outlives it (protocol.BlockClaimsTTL), so a block
		// that comes back after a loss still finds its claim.
		MaxAge: protocol.BlocksMaxAge,
	}
}

// StreamConfig is the block stream c describes (defaults filled, the
// region's stream when c has one), for tools and benchmarks that publish
// into the same configuration as the publishers.
func (c BlocksConfig) StreamConfig() jetstream.StreamConfig {
	return c.withDefaults().regional().streamConfig()
}
