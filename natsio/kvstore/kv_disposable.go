package kvstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// Disposable worker IDs on KV (issue 31's D5, verify/disposable.pml, as
// mysqlstore's): the counter hands out a worker ID, and the start
// records it in the key disposable.node.<id> with a Create, so that
//
//   - a worker ID handed out before (the counter went back: the store
//     forgot its last increments but kept the node key) is refused: the
//     Create finds the key; the node keys are the fleet's record of every
//     worker ID taken, beside the counter;
//   - a loss that forgets the increment and the node key together (both
//     within W) is seen W later: the start issues nothing until then,
//     and reads its node key back at the stream leader; another start's
//     token there (or none) refuses the worker ID.
//
// A start refused at the read-back claims again, up to disposableAttempts
// times; one refused by an existing node key takes the counter's next
// value at once (the counter only grows, up to the layout's range).
const disposableAttempts = 4

// claimDisposable takes a disposable worker ID (see above).
func (a *Assigner) claimDisposable(ctx context.Context, layout uidcore.Layout) (uidcore.Claim, error) {
	var lastRefusal error
	for lost := 0; lost < disposableAttempts; {
		var id uint64
		err := workerid.RetryStore(ctx, a.cfg.StoreStartupDeadline, a.log, "take a disposable worker ID from "+a.storeName, func(ctx context.Context) error {
			var err error
			id, err = a.nextDisposable(ctx, layout)
			return err
		})
		if err != nil {
			return nil, err
		}
		claim, err := a.cfg.DisposableClaim(id, layout, a.storeName)
		if err != nil {
			return nil, err
		}
		key := kvNodePrefix + strconv.FormatUint(id, 10)
		var tok [12]byte
		_, _ = rand.Read(tok[:])
		node := kvNode{Host: a.host.Name, Port: a.host.Port, Type: int(a.host.Type), LaunchedMs: time.Now().UnixMilli(), Token: hex.EncodeToString(tok[:])}
		value, _ := json.Marshal(node)
		err = workerid.RetryStore(ctx, a.cfg.StoreStartupDeadline, a.log, "record disposable worker ID "+strconv.FormatUint(id, 10)+" in "+a.storeName, func(ctx context.Context) error {
			_, err := a.kv.Create(ctx, key, value)
			if errors.Is(err, jetstream.ErrKeyExists) {
				return workerid.Permanent(err)
			}
			return err
		})
		switch {
		case errors.Is(err, jetstream.ErrKeyExists):
			// A retried Create whose first attempt was stored also lands
			// here: the worker ID is burnt, never used twice.
			lastRefusal = a.refuseNode(id, "node_key", fmt.Errorf("worker ID %d was handed out before (key %s exists): the counter went back", id, key))
			continue
		case err != nil:
			return nil, err
		}
		if err := a.awaitDurableNode(ctx, id, key, node.Token); err != nil {
			if !errors.Is(err, errNodeNotDurable) {
				return nil, err
			}
			lastRefusal = a.refuseNode(id, "read_back", err)
			lost++
			continue
		}
		a.log.Info("kvstore: disposable worker ID", "worker_id", id, "store", a.storeName)
		return claim, nil
	}
	return nil, fmt.Errorf("kvstore: disposable worker ID from %s: refused %d times in a row, the last: %w", a.storeName, disposableAttempts, lastRefusal)
}

// errNodeNotDurable: the node key read back W after its Create was not
// this start's, or was gone.
var errNodeNotDurable = errors.New("the store forgot the disposable worker ID it had acknowledged")

// awaitDurableNode waits W after the node key's Create, then reads the
// key at the stream leader: errNodeNotDurable unless it holds token.
// With W = 0 nothing waits and nothing is read.
func (a *Assigner) awaitDurableNode(ctx context.Context, id uint64, key, token string) error {
	w, err := a.cfg.AwaitLossWindow(ctx, a.log, a.waitLoss, id, "its key "+key)
	if w == 0 || err != nil {
		return err
	}
	var e leaderEntry
	err = workerid.RetryStore(ctx, a.cfg.StoreStartupDeadline, a.log, "read back "+key+" of "+a.storeName, func(ctx context.Context) error {
		var err error
		e, err = (&kvLeaseStore{nc: a.nc, bucket: a.cfg.KVBucket()}).leaderGet(ctx, key)
		return err
	})
	if err != nil {
		return err
	}
	var got kvNode
	if !e.found || json.Unmarshal(e.value, &got) != nil || got.Token != token {
		return fmt.Errorf("%w: key %s read back W (%s) after its Create holds host %q port %q, not this start's", errNodeNotDurable, key, w, got.Host, got.Port)
	}
	return nil
}

// refuseNode counts and logs a refused worker ID and returns why.
func (a *Assigner) refuseNode(id uint64, why string, err error) error {
	a.refusedNodes.Add(1)
	a.log.Error("kvstore: disposable worker ID refused, claiming another: "+err.Error(),
		event.Key, event.StoreRegression, "record", "worker_node", "check", why, event.AttrWorker, id, "store", a.storeName)
	return err
}
