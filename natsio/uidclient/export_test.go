package uidclient

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NewBlockSourceWithHook is newBlockSource for the external tests, which
// stall a source between fetching a block and acknowledging it.
func NewBlockSourceWithHook(nc *nats.Conn, cfg BlockSourceConfig, beforeAck func(*jetstream.MsgMetadata, []uint64)) (*BlockSource, error) {
	return newBlockSource(nc, cfg, sourceHooks{beforeAck: beforeAck})
}

// NewBlockSourceWithClaimWait is newBlockSource whose wait of the loss
// window before a claim is read back is wait (the tests' clock), and
// which calls idle (when not nil) each time its fetcher, no pull under
// way, waits to be woken.
func NewBlockSourceWithClaimWait(nc *nats.Conn, cfg BlockSourceConfig, wait func(ctx context.Context, d time.Duration) error, idle func()) (*BlockSource, error) {
	return newBlockSource(nc, cfg, sourceHooks{waitLoss: wait, fetcherIdle: idle})
}

// PrefetcherWaits is how many takes of p found the reserve empty and
// waited for a refill.
func PrefetcherWaits(p *Prefetcher) uint64 { return p.chain.waits.Load() }
