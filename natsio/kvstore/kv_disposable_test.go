package kvstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// kvDisposable is a disposable assigner on addr with the default loss
// window W (2 minutes) and no wait of W.
func kvDisposable(t *testing.T, addr, host string) *kvstore.Assigner {
	t.Helper()
	cfg := kvConfig(workerid.ModeDisposable)
	cfg.StoreLossWindow = workerid.DefaultConfig().StoreLossWindow
	cfg.Host = workerid.Host{Name: host, Port: "7000", Type: workerid.HostContainer}
	a := newKVAssigner(t, cfg, addr)
	kvstore.SetLossWait(a, func(context.Context, time.Duration) error { return nil })
	return a
}

// kvNodes reads the disposable node keys of bucket: the host of each
// worker ID's start.
func kvNodes(t testing.TB, addr, bucket string) map[uint64]string {
	t.Helper()
	kv := kvBucket(t, addr, bucket)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys, err := kv.Keys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		t.Fatal(err)
	}
	nodes := map[uint64]string{}
	for _, k := range keys {
		n, isNode := strings.CutPrefix(k, "disposable.node.")
		id, err := strconv.ParseUint(n, 10, 64)
		if !isNode || err != nil {
			continue
		}
		e, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatalf("read %s: %v", k, err)
		}
		var node struct {
			Host string `json:"host"`
		}
		if err := json.Unmarshal(e.Value(), &node); err != nil {
			t.Fatalf("%s holds %q: %v", k, e.Value(), err)
		}
		nodes[id] = node.Host
	}
	return nodes
}

// kvPurge makes the bucket's stream forget keys, as a power loss under
// lazy fsync forgets the last writes: the messages are gone, no marker.
func kvPurge(t testing.TB, addr, bucket string, keys ...string) {
	t.Helper()
	js, err := jetstream.New(kvConnect(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := s.Purge(ctx, jetstream.WithPurgeSubject("$KV."+bucket+"."+k)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKVDisposableCounterWentBackIsRefused: the counter alone goes back
// (the node keys kept): the worker IDs handed out before are refused by
// their node keys, and the start takes the first never taken.
func TestKVDisposableCounterWentBackIsRefused(t *testing.T) {
	addr := embeddedAddr(t)
	a := kvDisposable(t, addr, "host-a")
	layout := uidcore.DefaultLayout()
	for want := uint64(0); want < 3; want++ {
		if c, err := a.Claim(context.Background(), layout); err != nil || c.WorkerID() != want {
			t.Fatalf("claim %d: %v, %v", want, c, err)
		}
	}
	kv := kvBucket(t, addr, kvConfig(workerid.ModeDisposable).Bucket)
	if _, err := kv.Put(context.Background(), "disposable.last", []byte("0")); err != nil {
		t.Fatal(err)
	}
	c, err := a.Claim(context.Background(), layout)
	if err != nil || c.WorkerID() != 3 {
		t.Fatalf("after the counter went back: %v, %v; want worker ID 3", c, err)
	}
	if n := a.Regressions(); n != 2 {
		t.Errorf("%d regressions, want 2 (worker IDs 1 and 2 refused)", n)
	}
}
