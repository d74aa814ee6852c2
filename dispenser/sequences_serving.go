package dispenser

import (
	"context"

	"github.com/uid-dispenser/uid-dispenser/internal/retry"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
)

// watchSequences takes the sequences' next and batch out of the queue
// group while the sequence store is out of reach, so that the group's
// other members answer them instead of this instance's 503s "sequence
// store unavailable" (a partition between it and its store, the others
// reaching theirs): a request the store failed (sequence.Allocator
// Unserved) makes it leave; it joins again once the store answers and a
// take would get a segment at once (Probe: after any settle period or
// quarantine, which the allocator keeps enforcing). Requests already
// delivered are answered (a 503 for those the store fails). Numbers
// held bridge an outage without a leave: only a failed request leaves.
// The IDs are served throughout, and /readyz stays ready: it tells
// whether the instance issues IDs, and a store every instance shares
// would otherwise take the whole fleet out of readiness at once.
func (d *Dispenser) watchSequences(ctx context.Context) {
	defer close(d.seqWatchDone)
	for {
		select {
		case <-ctx.Done():
			return
		case cause := <-d.seq.Unserved():
			d.leaveSequences(cause)
		}
		if d.awaitSequenceStore(ctx) != nil {
			return
		}
		// What the requests delivered before the leave met is no news.
		select {
		case <-d.seq.Unserved():
		default:
		}
		if d.joinSequences(ctx) != nil {
			return
		}
	}
}

// leaveSequences takes the sequences' next and batch out of the queue
// group; cause is the failed request's error.
func (d *Dispenser) leaveSequences(cause error) {
	d.seqOut.Store(true)
	if err := d.svc.SetSequencesServing(false); err != nil {
		d.log.Warn("leaving the queue group of the sequence endpoints was not confirmed", "err", err)
	}
	d.log.Warn("not serving sequences: their next and batch left the queue group until the sequence store answers again",
		event.Key, event.SequencesNotServing, "err", cause)
}

// awaitSequenceStore probes the store, with back-off while it does not
// answer, until a take would get a segment at once; the ctx's error when
// it ends first.
func (d *Dispenser) awaitSequenceStore(ctx context.Context) error {
	var pauses retry.Backoff
	for {
		held, err := d.seq.Probe(ctx)
		if err == nil && held <= 0 {
			return nil
		}
		pause := held // takes are held (a settle period, a quarantine): probe again then
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			pause = pauses.Next()
			d.log.Debug("the sequence store does not answer yet", "err", err, "in", pause)
		}
		if err := retry.Sleep(ctx, pause); err != nil {
			return err
		}
	}
}

// joinSequences subscribes the sequences' next and batch to the queue
// group again, retried until it succeeds (a server refusing the
// subscriptions in a reconnect): out of the group the instance serves
// no sequence.
func (d *Dispenser) joinSequences(ctx context.Context) error {
	var pauses retry.Backoff
	for {
		err := d.svc.SetSequencesServing(true)
		if err == nil {
			d.seqOut.Store(false)
			d.log.Info("serving sequences again: the sequence store answers", event.Key, event.SequencesServing, "service_id", d.svc.ID())
			return nil
		}
		pause := pauses.Next()
		d.log.Warn("joining the queue group of the sequence endpoints again failed; retrying", "err", err, "in", pause)
		if err := retry.Sleep(ctx, pause); err != nil {
			return err
		}
	}
}
