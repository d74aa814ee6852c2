package kvstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/natsio/internal/leaderget"
)

// A KV bucket allows direct gets: any replica answers a read, and a
// replica that lags (a node just restarted after a kill -9, catching up)
// answers with an older value or none. Writes are safe regardless, since
// every write of a lease is checked against the revision at the stream
// leader; but a stale read that shows a lease gone or owned by another
// would make its owner give it up for nothing (the soak saw a first
// reservation fail with "key lease.6 is gone" right after its Create, on
// a cluster whose KV leader had just been killed). So a read that would
// lose a lease is confirmed at the leader first.

// leaderEntry is a key's last entry as the stream leader has it.
type leaderEntry struct {
	value    []byte
	revision uint64
	found    bool // false: never written, deleted or purged
}

// leaderGet reads key's last entry from the bucket's stream leader (the
// JetStream API's message get, which only the leader answers), not
// through a direct get.
func (s *kvLeaseStore) leaderGet(ctx context.Context, key string) (leaderEntry, error) {
	e, err := leaderget.Last(ctx, s.nc, "KV_"+s.bucket, "$KV."+s.bucket+"."+key)
	if err != nil {
		return leaderEntry{}, fmt.Errorf("kvstore: read %s at the stream leader: %w", key, err)
	}
	return leaderEntry{value: e.Value, revision: e.Seq, found: e.Found}, nil
}

// readLease reads key for an update by token: through the bucket (any
// replica) first, and, when that copy is not token's or the last write
// lost a revision race (a copy may be behind), at the stream leader.
// Only the leader's word makes a lease lost. found is false when the
// leader has no value for key (never written, deleted or purged); rev is
// the revision read, token's or not.
func (s *kvLeaseStore) readLease(ctx context.Context, key, token string, fresh bool) (l kvLease, rev uint64, ours, found bool, err error) {
	if !fresh {
		e, err := s.kv.Get(ctx, key)
		if err == nil {
			if l, derr := decodeKVLease(e.Value()); derr == nil && l.Owner == token {
				return l, e.Revision(), true, true, nil
			}
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return kvLease{}, 0, false, false, err
		}
	}
	le, err := s.leaderGet(ctx, key)
	if err != nil || !le.found {
		return kvLease{}, le.revision, false, false, err
	}
	l, err = decodeKVLease(le.value)
	if err != nil || l.Owner != token {
		return kvLease{}, le.revision, false, true, nil
	}
	return l, le.revision, true, true, nil
}
