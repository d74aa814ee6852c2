package dispenser

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// An instance that lost its worker claim for good and cannot issue (with
// a loss window a new claim issues only W and a renewal later; here no
// worker ID is free at all) leaves the queue group of the ID endpoints:
// every request goes to the other instance, none gets a 503, and /readyz
// says not ready. Once a worker ID is free it claims it, waits for it to
// be durable and joins again, and serves with IDs distinct from every
// other. Before the change the instance stayed in the group and answered
// the requests NATS gave it with 503 "worker claim lost" after the take
// wait.
func TestLostClaimLeavesTheQueueGroupUntilItCanIssue(t *testing.T) {
	url := testenv.NATS(t, nil).ClientURL()
	cfg := testConfig(url, "")
	cfg.LeaseTTL = 3 * time.Second // renewals, which find the loss, every second
	cfg.StoreLossWindow = time.Second
	// Four worker IDs, one lane each: the test can hold the free ones.
	cfg.TimeBits, cfg.WorkerBits, cfg.SeqBits, cfg.MaxLanes = 40, 2, 21, 1
	layout := cfg.Layout()
	var logA testenv.LogBuffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Started together: each waits W, a renewal and the sequences'
	// settle period before it joins.
	var b *Dispenser
	bStarted := make(chan error, 1)
	go func() {
		var err error
		b, err = Start(ctx, cfg, WithLogger(testLogger()))
		bStarted <- err
	}()
	a, errA := Start(ctx, cfg, WithLogger(logA.JSONLogger(slog.LevelDebug)))
	errB := <-bStarted
	for _, d := range []*Dispenser{a, b} {
		if d != nil {
			t.Cleanup(func() { shutdown(t, d) })
		}
	}
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}

	// The two other worker IDs, held by a real claimer: a cannot move.
	held := holdWorkerIDs(t, url, cfg, 2)

	// Both serve before the loss. The load stops before it: a request
	// that NATS gave a before it left waits the take wait for a new
	// worker ID and gets a 503 (TestRequestsCaughtByTheSwapGetIDs).
	load := startRawLoad(t, url, layout, 4)
	lostWorker := a.WorkerID()
	testenv.WaitFor(t, 10*time.Second, "IDs from both instances", func() bool {
		return load.from(lostWorker) >= 1000 && load.from(b.WorkerID()) >= 1000
	})
	ids, failures := load.finish()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed before the loss, the first: %s", len(failures), failures[0])
	}
	takeOverLease(t, url, cfg.WorkerKVBucket, lostWorker)
	testenv.WaitFor(t, 10*time.Second, "instance a to leave the queue group", func() bool {
		return hasEvent(t, &logA, event.NotIssuing)
	})
	if err := a.ready(); err == nil {
		t.Error("/readyz of the instance out of the queue group: ready")
	}
	// Counted, not timed: the other instance serves a good many IDs
	// while a is out.
	load = startRawLoad(t, url, layout, 4)
	testenv.WaitFor(t, 10*time.Second, "the other instance to serve while a is out", func() bool {
		return load.from(b.WorkerID()) >= 5000
	})
	if a.WorkerID() != lostWorker {
		t.Fatalf("a moved to worker %d while none was free", a.WorkerID())
	}
	servedByB := load.from(b.WorkerID())

	// A worker ID frees up (its holder issued nothing: the next owner
	// starts now, not after its reservation): a claims it, waits until
	// it is durable and joins the queue group again.
	freed := held[0]
	freed.(uidcore.Retirer).Retire(max(freed.After(), 1))
	if err := freed.Release(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 15*time.Second, "a serving again on the freed worker ID", func() bool {
		return load.from(freed.WorkerID()) >= 1000
	})
	more, failures := load.finish()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed while a was out of the queue group or after it came back, the first: %s", len(failures), failures[0])
	}
	testenv.CheckDistinct(t, append(ids, more...))
	if !hasEvent(t, &logA, event.WorkerChanged) {
		t.Error("no service.worker_changed after a joined again")
	}
	if err := a.ready(); err != nil {
		t.Errorf("/readyz after a joined again: %v", err)
	}
	t.Logf("%d IDs distinct, no request failed; b served %d while a was out", len(ids)+len(more), servedByB)
}

func hasEvent(t *testing.T, log *testenv.LogBuffer, name string) bool {
	t.Helper()
	for _, rec := range log.Records(t) {
		if rec[event.Key] == name {
			return true
		}
	}
	return false
}
