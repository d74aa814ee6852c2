package natsio

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
)

// claimsBucketConfig is the KV bucket in which block sources claim the
// stream's blocks (protocol.BlockClaimsBucket, issue 31's D6): placed
// and replicated like the stream, its claims kept longer than the
// stream keeps a block (protocol.BlockClaimsTTL against BlocksMaxAge).
func (c BlocksConfig) claimsBucketConfig() jetstream.KeyValueConfig {
	s := c.streamConfig()
	return jetstream.KeyValueConfig{
		Bucket:      protocol.BlockClaimsBucket(c.Stream),
		Description: "claims of the blocks of stream " + c.Stream + " by their sources (uid-dispenser)",
		TTL:         protocol.BlockClaimsTTL,
		Storage:     s.Storage,
		Replicas:    s.Replicas,
		Placement:   s.Placement,
	}
}

// ensureClaimsBucket creates the claims bucket or brings it to cfg:
// every publisher does, so that a source finds it whatever its loss
// window (a source with none claims nothing).
func ensureClaimsBucket(ctx context.Context, js jetstream.JetStream, cfg BlocksConfig) error {
	bc := cfg.claimsBucketConfig()
	var err error
	for range 5 {
		actx, cancel := context.WithTimeout(ctx, streamAttemptTimeout)
		_, err = js.CreateOrUpdateKeyValue(actx, bc)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("natsio: blocks: create or update the claims bucket %s: %w", bc.Bucket, err)
	}
	return nil
}
