package kvstore

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// A JetStream cluster can forget a write it acknowledged while its
// clients stay connected (the fault harness saw it after a kill -9 of
// every node with sync_interval: always: the KV stream's last
// acknowledged write was gone after the restart, the dispensers' links
// up). No request fails, so nothing here would see an outage; but such a
// loss comes with a new stream leader. streamWatch reads the KV stream's
// info (at its leader) and keeps an epoch that grows whenever the stream
// may have forgotten writes: its leader or the leader's election time
// changed, its last sequence is below one this instance had acknowledged
// (a loss for certain), the connection was re-established, or a lease
// renewal found its record gone back (D2). The sequences settle on it
// (sequence.LossWatcher, D7) and every lease renews at once on a change,
// so that D2's check runs now rather than a third of the TTL later.

// streamWatch is one bucket's loss epoch, shared by its leases and
// sequences.
type streamWatch struct {
	nc      *nats.Conn
	subject string // the stream info request
	stream  string
	log     *slog.Logger

	acked       atomic.Uint64 // the highest stream sequence a write of this instance was acknowledged at
	regressions atomic.Uint64 // last sequences found below acked

	mu         sync.Mutex
	read       bool // a stream info was read: leader, since and reconnects hold
	leader     string
	since      time.Time // the leader's election (zero: the server does not say)
	reconnects uint64
	epoch      uint64
	leases     map[*workerid.Lease]struct{}
}

func newStreamWatch(nc *nats.Conn, bucket string, log *slog.Logger) *streamWatch {
	return &streamWatch{nc: nc, subject: "$JS.API.STREAM.INFO.KV_" + bucket, stream: "KV_" + bucket, log: log}
}

// streamInfo is what the epoch reads of a stream info reply.
type streamInfo struct {
	Cluster *struct {
		Leader      string     `json:"leader"`
		LeaderSince *time.Time `json:"leader_since"`
	} `json:"cluster"`
	State struct {
		LastSeq uint64 `json:"last_seq"`
	} `json:"state"`
	TimeStamp time.Time           `json:"ts"`
	Error     *jetstream.APIError `json:"error"`
}

// acknowledged records that a write of this instance was acknowledged at
// stream sequence rev.
func (w *streamWatch) acknowledged(rev uint64) {
	for {
		cur := w.acked.Load()
		if rev <= cur || w.acked.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// Epoch implements sequence.LossWatcher.
func (w *streamWatch) Epoch(ctx context.Context) (sequence.Epoch, error) {
	// Only writes acknowledged before the request must be in the reply's
	// last sequence: one acknowledged while the request is under way may
	// be above it, and is no loss.
	acked := w.acked.Load()
	msg, err := w.nc.RequestWithContext(ctx, w.subject, nil)
	if err != nil {
		return sequence.Epoch{}, fmt.Errorf("kvstore: stream info of %s: %w", w.stream, err)
	}
	var info streamInfo
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		return sequence.Epoch{}, fmt.Errorf("kvstore: stream info of %s: %w", w.stream, err)
	}
	if info.Error != nil {
		return sequence.Epoch{}, fmt.Errorf("kvstore: stream info of %s: %w", w.stream, info.Error)
	}
	var leader string
	var since time.Time
	if info.Cluster != nil {
		leader = info.Cluster.Leader
		if info.Cluster.LeaderSince != nil {
			since = *info.Cluster.LeaderSince
		}
	}
	reconnects := w.nc.Stats().Reconnects
	var why []any
	if info.State.LastSeq < acked {
		// Lower acked to what the stream has, so that this loss counts
		// once; a write acknowledged meanwhile only raises it again.
		w.acked.CompareAndSwap(acked, info.State.LastSeq)
		w.regressions.Add(1)
		w.log.Error("kvstore: the KV stream's last sequence is below one it acknowledged to this instance: it forgot acknowledged writes",
			event.Key, event.StoreRegression, "record", "stream", "stream", w.stream, "last_seq", info.State.LastSeq, "acknowledged", acked)
		why = append(why, "last_seq", info.State.LastSeq, "acknowledged", acked)
	}
	w.mu.Lock()
	if w.read && !since.IsZero() && since.Before(w.since) {
		// A reply older than one already read (two reads crossed): the
		// newer one decided.
		leader, since = w.leader, w.since
	}
	if w.read && (leader != w.leader || !since.Equal(w.since)) {
		why = append(why, "leader", leader, "previous_leader", w.leader, "leader_since", since)
	}
	if w.read && reconnects != w.reconnects {
		why = append(why, "reconnects", reconnects-w.reconnects)
	}
	w.read, w.leader, w.since, w.reconnects = true, leader, since, reconnects
	w.mu.Unlock()
	if len(why) > 0 {
		w.changed(why...)
	}
	w.mu.Lock()
	e := sequence.Epoch{N: w.epoch}
	w.mu.Unlock()
	if !since.IsZero() && !info.TimeStamp.IsZero() {
		// Both times are the stream leader's clock.
		e.Age, e.AgeKnown = max(info.TimeStamp.Sub(since), 0), true
	}
	return e, nil
}

// changed starts a new epoch: logged, and every live lease renews now.
func (w *streamWatch) changed(why ...any) {
	w.mu.Lock()
	w.epoch++
	leases := make([]*workerid.Lease, 0, len(w.leases))
	for l := range w.leases {
		if l.Err() != nil {
			delete(w.leases, l) // released or lost
			continue
		}
		leases = append(leases, l)
	}
	w.mu.Unlock()
	w.log.Warn("kvstore: the worker-ID bucket's stream may have forgotten acknowledged writes: sequences settle, leases renew now",
		append([]any{event.Key, event.StoreEpochChanged, "stream", w.stream}, why...)...)
	for _, l := range leases {
		l.RenewNow()
	}
}

// watchLease makes l renew at once on a new epoch.
func (w *streamWatch) watchLease(l *workerid.Lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.leases == nil {
		w.leases = map[*workerid.Lease]struct{}{}
	}
	w.leases[l] = struct{}{}
}

// changes is how many epochs began (uid_store_epoch_changes_total).
func (w *streamWatch) changes() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.epoch
}
