package uidclient

import (
	"regexp"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
)

// Defaults of BlockSourceConfig. The stream's name and the block size
// are protocol.DefaultBlocksStream and protocol.DefaultBlockSize.
const (
	DefaultBlocksConsumer  = "uid-blocks"
	DefaultBlocksAckWait   = 30 * time.Second
	DefaultBlocksFetchWait = 5 * time.Second
	DefaultBlocksLowWater  = protocol.DefaultBlockSize
	// DefaultBlocksLossWindow is the dispenser's default
	// DISPENSER_STORE_LOSS_WINDOW: NATS's default sync interval.
	DefaultBlocksLossWindow = 2 * time.Minute
)

// streamNamePattern is what JetStream accepts as a stream or consumer name.
var streamNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)

// BlocksConsumerConfig is the durable pull consumer every BlockSource
// sharing the name binds (creating or updating it). It is exported for
// tools that re-create the consumer, as the soak does to test that doing
// so while blocks are in flight hands no block out twice.
func BlocksConsumerConfig(name string, ackWait time.Duration) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:     name,
		Description: "uid-dispenser block sources",
		AckPolicy:   jetstream.AckExplicitPolicy,
		AckWait:     ackWait,
		// Each source pulls at most two blocks at a time and acknowledges
		// them at once: the blocks in flight are at most two per source.
		MaxAckPending: -1,
	}
}
