package natsio

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Prefilled ID blocks: dispensers publish blocks of IDs into a JetStream
// work-queue stream (BlockPublisher) and services pull one block at a time
// and hand its IDs out in-process (BlockSource). Each message is one block:
// the IDs packed big-endian, 8 bytes each, in increasing order, with the
// headers below.

// Headers of a block message.
const (
	HeaderBlockCount  = "Uid-Count"     // number of IDs in the block (decimal)
	HeaderBlockWorker = "Uid-Worker-Id" // worker ID of the claim the IDs come from
	HeaderBlockFirst  = "Uid-First"     // first ID (decimal)
	HeaderBlockLast   = "Uid-Last"      // last ID (decimal)
)

// Defaults of BlocksConfig and BlockSourceConfig. The envconfig default
// tags of BlocksConfig repeat them (a test keeps the two in step).
const (
	DefaultBlocksStream          = "UID_BLOCKS"
	DefaultBlocksSubject         = "uid.blocks"
	DefaultBlockSize             = 4096
	DefaultBlocksTargetDepth     = 64
	DefaultBlocksStorage         = "file"
	DefaultBlocksReplicas        = 1
	DefaultBlocksDuplicateWindow = 2 * time.Minute
	DefaultBlocksPollInterval    = 100 * time.Millisecond
	DefaultBlocksConsumer        = "uid-blocks"
	DefaultBlocksAckWait         = 30 * time.Second
	DefaultBlocksFetchWait       = 5 * time.Second
	DefaultBlocksLowWater        = DefaultBlockSize
)

// MaxBlockSize bounds the IDs per block: 1 MiB of payload, NATS's default
// maximum message size.
const MaxBlockSize = 1 << 17

// ErrMalformedBlock is wrapped by the errors that describe a block message
// that does not decode (a consumer terminates such a block, never uses it).
var ErrMalformedBlock = errors.New("natsio: malformed ID block")

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
		BlocksStream:          DefaultBlocksStream,
		BlocksSubject:         DefaultBlocksSubject,
		BlockSize:             DefaultBlockSize,
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

var streamNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)

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
	case c.BlockSize < 1 || c.BlockSize > MaxBlockSize:
		return bad("BLOCKS_BLOCK_SIZE", "%d is outside 1..%d", c.BlockSize, MaxBlockSize)
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

// blockMsgID is the Nats-Msg-Id of a block: IDs are unique, so the worker
// and first ID name the block for good, and a retried publish of the same
// block is stored once.
func blockMsgID(worker, first uint64) string {
	return "w" + strconv.FormatUint(worker, 10) + "-" + strconv.FormatUint(first, 10)
}

// encodeBlock builds the message of a block of IDs (at least one).
func encodeBlock(subject string, worker uint64, ids []uint64) *nats.Msg {
	data := make([]byte, 8*len(ids))
	for i, id := range ids {
		binary.BigEndian.PutUint64(data[8*i:], id)
	}
	first, last := ids[0], ids[len(ids)-1]
	h := nats.Header{}
	h.Set(HeaderBlockCount, strconv.Itoa(len(ids)))
	h.Set(HeaderBlockWorker, strconv.FormatUint(worker, 10))
	h.Set(HeaderBlockFirst, strconv.FormatUint(first, 10))
	h.Set(HeaderBlockLast, strconv.FormatUint(last, 10))
	h.Set(jetstream.MsgIDHeader, blockMsgID(worker, first))
	return &nats.Msg{Subject: subject, Data: data, Header: h}
}

// decodeBlock checks a block message and returns its IDs: the payload is
// whole 8-byte IDs, strictly increasing (one batch take of one generator),
// and the count, first and last headers agree with it. Its errors wrap
// ErrMalformedBlock.
func decodeBlock(data []byte, h nats.Header) ([]uint64, error) {
	malformed := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrMalformedBlock, fmt.Sprintf(format, args...))
	}
	if len(data) == 0 || len(data)%8 != 0 {
		return nil, malformed("payload of %d bytes is not a whole number of 8-byte IDs", len(data))
	}
	n := len(data) / 8
	count, err := strconv.Atoi(h.Get(HeaderBlockCount))
	if err != nil || count != n {
		return nil, malformed("%s %q does not match the %d IDs in the payload", HeaderBlockCount, headerSafe(h.Get(HeaderBlockCount)), n)
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = binary.BigEndian.Uint64(data[8*i:])
		if i > 0 && ids[i] <= ids[i-1] {
			return nil, malformed("IDs not strictly increasing at position %d", i)
		}
	}
	for _, want := range []struct {
		header string
		id     uint64
	}{{HeaderBlockFirst, ids[0]}, {HeaderBlockLast, ids[n-1]}} {
		v, err := strconv.ParseUint(h.Get(want.header), 10, 64)
		if err != nil || v != want.id {
			return nil, malformed("%s %q does not match the payload's %d", want.header, headerSafe(h.Get(want.header)), want.id)
		}
	}
	return ids, nil
}
