package dispenser

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// A lease taken over by another owner while requests and the block
// publisher take IDs from the generator on it: the instance moves to a new
// worker ID, the publisher follows it, and nothing handed out before,
// during or after the swap collides.
func TestReclaimWhileServingAndPublishingBlocks(t *testing.T) {
	url := testenv.NATS(t, nil).ClientURL()
	cfg := blocksConfig(url)
	cfg.LeaseTTL = time.Second
	d := start(t, cfg)
	lostWorker := d.WorkerID()
	c := client(t, url)
	sources := []*uidclient.BlockSource{blockSource(t, url), blockSource(t, url)}

	stop := make(chan struct{})
	var requested []uint64
	served := make(chan struct{})
	go func() { requested = collect(t, c, 4, 0, stop); close(served) }()
	ids := takeBlocks(t, 5000, sources...)

	// The intruder takes the lease key over as another claimer would.
	js, err := jetstream.New(testConn(t, url).Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, cfg.WorkerKVBucket)
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("lease.%d", lostWorker)
	e, err := kv.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var lease map[string]any
	if err := json.Unmarshal(e.Value(), &lease); err != nil {
		t.Fatal(err)
	}
	lease["owner"] = "intruder"
	b, _ := json.Marshal(lease)
	if _, err := kv.Update(ctx, key, b, e.Revision()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for d.WorkerID() == lostWorker && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	newWorker := d.WorkerID()
	if newWorker == lostWorker {
		t.Fatalf("still on worker %d after the lease was taken over", lostWorker)
	}
	// Enough blocks to drain what the old worker left in the stream.
	ids = append(ids, takeBlocks(t, 3*cfg.BlocksTargetDepth*cfg.BlockSize, sources...)...)
	close(stop)
	<-served
	ids = append(ids, requested...)
	checkDistinct(t, ids)
	shares := workers(ids)
	if shares[lostWorker] == 0 || shares[newWorker] == 0 {
		t.Fatalf("IDs per worker %v: want some from %d and from %d", shares, lostWorker, newWorker)
	}
	t.Logf("%d IDs distinct: %v", len(ids), shares)
}
