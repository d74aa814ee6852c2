package dispenser

import (
	"testing"
	"time"

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
	takeOverLease(t, url, cfg.WorkerKVBucket, lostWorker)
	testenv.WaitFor(t, 10*time.Second, "a new worker ID after the lease was taken over", func() bool { return d.WorkerID() != lostWorker })
	newWorker := d.WorkerID()
	// Enough blocks to drain what the old worker left in the stream.
	ids = append(ids, takeBlocks(t, 3*cfg.BlocksTargetDepth*cfg.BlockSize, sources...)...)
	close(stop)
	<-served
	ids = append(ids, requested...)
	testenv.CheckDistinct(t, ids)
	shares := workers(t, ids)
	if shares[lostWorker] == 0 || shares[newWorker] == 0 {
		t.Fatalf("IDs per worker %v: want some from %d and from %d", shares, lostWorker, newWorker)
	}
	t.Logf("%d IDs distinct: %v", len(ids), shares)
}
