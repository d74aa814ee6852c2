package kvstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// kvFleetKey holds the fleet record (JSON workerid.Fleet) beside the
// worker-ID keys.
const kvFleetKey = "fleet"

// RecordFleet implements workerid.FleetStore: the record as the stream
// leader holds it, written first when there is none (an Update at the
// revision of the key's delete marker, or of nothing: the first writer
// wins). It sends no direct get, which any replica may answer: the
// check after a claim (workerid.CheckGeneration) reads the record
// through here, and a replica that lags could show it unsealed after
// dispenser -new-generation sealed it.
func (a *Assigner) RecordFleet(ctx context.Context, f workerid.Fleet) (workerid.Fleet, error) {
	var got workerid.Fleet
	err := workerid.RetryStore(ctx, a.cfg.StoreStartupDeadline, a.log, "record the fleet in "+a.storeName, func(ctx context.Context) error {
		for {
			stored, rev, found, err := a.readFleet(ctx)
			if err != nil || found {
				got = stored
				return err
			}
			value, _ := json.Marshal(f)
			if _, err := a.kv.Update(ctx, kvFleetKey, value, rev); err != nil && !lostRace(err) {
				return err
			}
			// Written, or another instance wrote first: read it back.
		}
	})
	return got, err
}

// readFleet reads the fleet record at the stream leader; found is false
// when the key holds none (never written, or removed by dispenser
// -reset-fleet), rev is the revision read either way.
func (a *Assigner) readFleet(ctx context.Context) (f workerid.Fleet, rev uint64, found bool, err error) {
	s := &kvLeaseStore{kv: a.kv, nc: a.nc, bucket: a.cfg.KVBucket(), log: a.log}
	le, err := s.leaderGet(ctx, kvFleetKey)
	if err != nil || !le.found {
		return workerid.Fleet{}, le.revision, false, err
	}
	if err := json.Unmarshal(le.value, &f); err != nil {
		return workerid.Fleet{}, 0, false, workerid.Permanent(fmt.Errorf("kvstore: key %s of %s is not a fleet record (%s): %w", kvFleetKey, a.storeName, kvExcerpt(le.value), err))
	}
	return f, le.revision, true, nil
}

// RegionFleet implements workerid.RegionFleetReader: the fleet key of
// the region's bucket, read through the gateway (nothing is created).
func (a *Assigner) RegionFleet(ctx context.Context, region string) (workerid.Fleet, bool, error) {
	other := a.cfg
	other.Region = region
	kv, err := a.js.KeyValue(ctx, other.KVBucket())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return workerid.Fleet{}, false, nil
	}
	if err != nil {
		return workerid.Fleet{}, false, err
	}
	e, err := kv.Get(ctx, kvFleetKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return workerid.Fleet{}, false, nil
	}
	if err != nil {
		return workerid.Fleet{}, false, err
	}
	var f workerid.Fleet
	if err := json.Unmarshal(e.Value(), &f); err != nil {
		return workerid.Fleet{}, false, fmt.Errorf("kvstore: key %s of bucket %s is not a fleet record (%s): %w", kvFleetKey, other.KVBucket(), kvExcerpt(e.Value()), err)
	}
	return f, true, nil
}

// ReplaceFleet implements workerid.FleetStore: an Update at the revision
// of the record read, when it is old.
func (a *Assigner) ReplaceFleet(ctx context.Context, old, next workerid.Fleet) error {
	cur, rev, found, err := a.readFleet(ctx)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w (%s holds no fleet record)", workerid.ErrFleetChanged, a.storeName)
	}
	if cur != old {
		return fmt.Errorf("%w (%s holds generation %d)", workerid.ErrFleetChanged, a.storeName, cur.Generation)
	}
	value, _ := json.Marshal(next)
	if _, err := a.kv.Update(ctx, kvFleetKey, value, rev); lostRace(err) {
		return fmt.Errorf("%w (%s)", workerid.ErrFleetChanged, a.storeName)
	} else if err != nil {
		return err
	}
	return nil
}

// LeaseHorizon implements workerid.FleetStore from the lease keys,
// whichever the instance's mode, each read at the stream leader: the
// horizon is a new generation's start, so no key may be missed or read
// from a lagging replica.
func (a *Assigner) LeaseHorizon(ctx context.Context) (int64, int, error) {
	s := &kvLeaseStore{kv: a.kv, nc: a.nc, bucket: a.cfg.KVBucket(), log: a.log}
	keys, err := s.keys(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("kvstore: list the leases of %s: %w", a.storeName, err)
	}
	var last int64
	live := 0
	now := time.Now().UnixMilli()
	for _, key := range keys {
		le, err := s.leaderGet(ctx, key)
		if err != nil {
			return 0, 0, err
		}
		l, err := decodeKVLease(le.value)
		if !le.found || err != nil {
			continue // skipped by claims too; its worker ID is never reused
		}
		last = max(last, l.Reserved)
		if l.Owner != "" && l.ExpiresMs > now {
			live++
		}
	}
	return last, live, nil
}

// RevokeLeases implements workerid.FleetStore: each lease key with an
// owner, read at the stream leader, is rewritten as released (no owner,
// reserved second kept) with an Update at that revision, so a renewal
// either came first (and its reservation is in the value rewritten) or
// fails its own revision check and then finds no owner (ErrLeaseTaken).
// A lost race reads again. Malformed or deleted keys are left alone:
// claims skip them and their worker IDs are never reused.
func (a *Assigner) RevokeLeases(ctx context.Context) (int, error) {
	s := &kvLeaseStore{kv: a.kv, nc: a.nc, bucket: a.cfg.KVBucket(), log: a.log}
	keys, err := s.keys(ctx)
	if err != nil {
		return 0, fmt.Errorf("kvstore: list the leases of %s: %w", a.storeName, err)
	}
	revoked := 0
	for _, key := range keys {
		for {
			le, err := s.leaderGet(ctx, key)
			if err != nil {
				return revoked, fmt.Errorf("kvstore: revoke %s of %s: %w", key, a.storeName, err)
			}
			l, derr := decodeKVLease(le.value)
			if !le.found || derr != nil || l.Owner == "" {
				break
			}
			l.Owner, l.ExpiresMs, l.UpdatedMs = "", 0, time.Now().UnixMilli()
			_, err = a.kv.Update(ctx, key, l.encode(), le.revision)
			if err == nil {
				revoked++
				break
			}
			if !lostRace(err) {
				return revoked, fmt.Errorf("kvstore: revoke %s of %s: %w", key, a.storeName, err)
			}
		}
	}
	return revoked, nil
}

// keys lists the bucket's lease keys from the stream's count of its
// subjects. Unlike snapshot's watch, which under concurrent writes may
// announce the end of the current values before every key came in, the
// server answers from its state: a key written before the call is listed.
func (s *kvLeaseStore) keys(ctx context.Context) ([]string, error) {
	js, err := jetstream.New(s.nc)
	if err != nil {
		return nil, err
	}
	stream, err := js.Stream(ctx, "KV_"+s.bucket)
	if err != nil {
		return nil, err
	}
	prefix := "$KV." + s.bucket + "."
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(prefix+kvLeasePrefix+"*"))
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(info.State.Subjects))
	for subject := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(subject, prefix))
	}
	return keys, nil
}

// ReadFleet implements workerid.FleetRemover: the record at the stream
// leader.
func (a *Assigner) ReadFleet(ctx context.Context) (workerid.Fleet, bool, error) {
	f, _, found, err := a.readFleet(ctx)
	return f, found, err
}

// RemoveFleet implements workerid.FleetRemover: a delete at the revision
// of the record read, when it is old.
func (a *Assigner) RemoveFleet(ctx context.Context, old workerid.Fleet) error {
	cur, rev, found, err := a.readFleet(ctx)
	if err != nil {
		return err
	}
	if !found || cur != old {
		return fmt.Errorf("%w (%s)", workerid.ErrFleetChanged, a.storeName)
	}
	if err := a.kv.Delete(ctx, kvFleetKey, jetstream.LastRevision(rev)); lostRace(err) || isWrongLastSequence(err) {
		return fmt.Errorf("%w (%s)", workerid.ErrFleetChanged, a.storeName)
	} else if err != nil {
		return err
	}
	return nil
}

// isWrongLastSequence: a write conditioned on a key's last revision
// found another (a delete's error is the server's, not ErrKeyExists).
func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
