package kvstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// kvSequencePrefix keys the named sequences: seq.<name> holds the end of
// the last segment taken, in decimal.
const kvSequencePrefix = "seq."

// SequenceStore is sequence.SegmentStore on the worker-ID bucket: one
// key per sequence, every write an Update at the revision read (a lost
// race reads again), which nats-server 2.9 offers.
type SequenceStore struct {
	kv    jetstream.KeyValue
	name  string
	watch *streamWatch
}

// Sequences implements sequence.Keeper: the sequence store in the
// assigner's bucket.
func (a *Assigner) Sequences(context.Context) (sequence.SegmentStore, error) {
	return &SequenceStore{kv: a.kv, name: a.storeName, watch: a.watch}, nil
}

var (
	_ sequence.Keeper      = (*Assigner)(nil)
	_ sequence.LossWatcher = (*SequenceStore)(nil)
)

// Epoch implements sequence.LossWatcher: the bucket's loss epoch
// (kv_epoch.go), shared with the leases.
func (s *SequenceStore) Epoch(ctx context.Context) (sequence.Epoch, error) {
	return s.watch.Epoch(ctx)
}

func (s *SequenceStore) String() string { return s.name }

// read returns the end of name's last segment and the key's revision.
func (s *SequenceStore) read(ctx context.Context, name string) (uint64, uint64, error) {
	e, err := s.kv.Get(ctx, kvSequencePrefix+name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, 0, &sequence.UnknownError{Name: name}
	}
	if err != nil {
		return 0, 0, err
	}
	v, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil || v > sequence.MaxValue {
		return 0, 0, workerid.Permanent(fmt.Errorf("kvstore: key %s holds %q, not a sequence's end: restore it (never lower it)", e.Key(), kvExcerpt(e.Value())))
	}
	return v, e.Revision(), nil
}

// Take implements sequence.SegmentStore.
func (s *SequenceStore) Take(ctx context.Context, name string, step, floor uint64) (sequence.Segment, error) {
	for {
		end, rev, err := s.read(ctx, name)
		if err != nil {
			return sequence.Segment{}, err
		}
		seg := sequence.TakeFrom(end, floor, step)
		if step > sequence.MaxValue-seg.From {
			return sequence.Segment{}, fmt.Errorf("%w: %q is at %d", sequence.ErrExhausted, name, seg.From)
		}
		if seg.To == end {
			return seg, nil // a check (step 0) that found the counter in place
		}
		rev, err = s.kv.Update(ctx, kvSequencePrefix+name, []byte(strconv.FormatUint(seg.To, 10)), rev)
		if lostRace(err) {
			continue
		}
		if err != nil {
			return sequence.Segment{}, err
		}
		s.watch.acknowledged(rev)
		return seg, nil
	}
}

// GiveBack implements sequence.SegmentStore.
func (s *SequenceStore) GiveBack(ctx context.Context, name string, seg sequence.Segment) (bool, error) {
	for {
		end, rev, err := s.read(ctx, name)
		if errors.Is(err, sequence.ErrUnknownSequence) {
			return false, nil
		}
		if err != nil || end != seg.To {
			return false, err
		}
		_, err = s.kv.Update(ctx, kvSequencePrefix+name, []byte(strconv.FormatUint(seg.From, 10)), rev)
		if lostRace(err) {
			continue // the next read says whether a segment was taken since
		}
		return err == nil, err
	}
}

// Declare implements sequence.SegmentStore. It writes with an Update at
// revision 0 rather than Create: Create also succeeds on a deleted key,
// and a deleted sequence started over would hand its numbers out again.
func (s *SequenceStore) Declare(ctx context.Context, name string, first uint64) (bool, error) {
	key := kvSequencePrefix + name
	_, err := s.kv.Update(ctx, key, []byte(strconv.FormatUint(first, 10)), 0)
	if err == nil {
		return true, nil
	}
	if !lostRace(err) {
		return false, permanentIfRefused(err)
	}
	return false, s.declaredOrDeleted(ctx, key)
}

// declaredOrDeleted tells what key, which a write at revision 0 found in
// use, holds, from its history at the stream's leader (an ordered
// consumer): a value (nil: declared before), a delete or purge
// (permanent: refused), or nothing read yet, which a retry cures. A
// direct get may be answered by a replica behind the leader, after a
// quorum came back: one behind the delete reads the old value and
// would take the deleted sequence for declared (make test beside a busy
// core), one behind the first put reads nothing.
func (s *SequenceStore) declaredOrDeleted(ctx context.Context, key string) error {
	hist, err := s.kv.History(ctx, key)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return err
	}
	n := len(hist)
	switch {
	case n == 0:
		return fmt.Errorf("kvstore: key %s is in use but not read yet (a replica behind?)", key)
	case hist[n-1].Operation() != jetstream.KeyValuePut:
		return workerid.Permanent(fmt.Errorf("kvstore: key %s was deleted: its numbers may have been handed out, so it is not declared again; put back its last value", key))
	}
	return nil
}

// permanentIfRefused marks the errors a start-up's retries cannot cure
// (workerid.RetryStore returns them at once): the account may not use
// JetStream or the subject. Anything else (a 503 of a cluster without
// quorum, a timeout) may pass.
func permanentIfRefused(err error) error {
	if errors.Is(err, nats.ErrPermissionViolation) || errors.Is(err, nats.ErrAuthorization) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return workerid.Permanent(err)
	}
	return err
}

// List implements sequence.SegmentStore.
func (s *SequenceStore) List(ctx context.Context) ([]string, error) {
	w, err := s.kv.Watch(ctx, kvSequencePrefix+"*", jetstream.MetaOnly(), jetstream.IgnoreDeletes())
	if err != nil {
		return nil, permanentIfRefused(err)
	}
	defer func() { _ = w.Stop() }()
	var names []string
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("kvstore: sequence watcher closed")
			}
			if e == nil {
				return names, nil
			}
			names = append(names, strings.TrimPrefix(e.Key(), kvSequencePrefix))
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
