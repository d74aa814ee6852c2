package soak

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// faultBlocksRecreate's three forms, one a cycle in turn (each on the two
// fleets' streams in turn): what resets the delivery counts block sources
// relied on before the consumer check (docs/blocks.md, rule 3).
var blocksRecreateForms = []string{"consumer deleted and re-created", "stream purged", "stream deleted"}

// recreateBlocks deletes and re-creates the durable consumer the block
// sources share, or purges or deletes their stream (the publishers create
// it again), while the sources hold blocks. None may use a block twice:
// the duplicate check over every ID proves it.
func (s *soak) recreateBlocks(ctx context.Context, f *fleet, cycle int) (target, note string) {
	form := blocksRecreateForms[(cycle/len(fleets))%len(blocksRecreateForms)]
	target = f.blocksStream
	js, err := jetstream.New(s.admin.Conn)
	if err != nil {
		s.events.violation("blocks fault: %v", err)
		return target, err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	switch form {
	case "consumer deleted and re-created":
		err = recreateBlocksConsumer(ctx, js, f.blocksStream)
	case "stream purged":
		var st jetstream.Stream
		if st, err = js.Stream(ctx, f.blocksStream); err == nil {
			err = st.Purge(ctx)
		}
	default:
		err = js.DeleteStream(ctx, f.blocksStream)
	}
	if err != nil {
		// The sources re-bind and the publishers re-create the stream
		// whatever happened; a failed call here is the soak's, not theirs.
		return target, fmt.Sprintf("%s: %v", form, err)
	}
	return target, form
}

// recreateBlocksConsumer deletes the sources' consumer and creates it
// again, as an operator would. nats-server 2.15.2 can leave a create that
// lands during the delete of the same name with a consumer whose
// directory is gone (every update then fails, API error 10012), so the
// pair is repeated until the create succeeds.
func recreateBlocksConsumer(ctx context.Context, js jetstream.JetStream, stream string) error {
	var err error
	for attempt := 0; attempt < 10 && ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			sleep(ctx, 100*time.Millisecond)
		}
		if err = js.DeleteConsumer(ctx, stream, uidclient.DefaultBlocksConsumer); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue
		}
		_, err = js.CreateOrUpdateConsumer(ctx, stream, uidclient.BlocksConsumerConfig(uidclient.DefaultBlocksConsumer, uidclient.DefaultBlocksAckWait))
		if err == nil {
			return nil
		}
	}
	return err
}
