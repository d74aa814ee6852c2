package kvstore

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// TestKVEpochChangeRenewsLeases: a new epoch of the bucket's stream makes
// every live lease of the assigner renew at once (its regression check
// runs now), with a TTL whose own renewal interval is 20 minutes away; a
// released lease is left alone.
func TestKVEpochChangeRenewsLeases(t *testing.T) {
	srv := testenv.NATS(t, nil)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wcfg := workerid.DefaultConfig()
	wcfg.Mode = workerid.ModeLeased
	wcfg.LeaseTTL = time.Hour
	wcfg.StoreLossWindow = -1
	wcfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := NewAssigner(ctx, nc, Config{Config: wcfg, Bucket: "epoch"})
	if err != nil {
		t.Fatal(err)
	}
	live, err := a.Claim(ctx, uidcore.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	defer live.Release(context.Background())
	released, err := a.Claim(ctx, uidcore.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	if err := released.Release(ctx); err != nil {
		t.Fatal(err)
	}
	revision := func(c uidcore.Claim) uint64 {
		e, err := a.kv.Get(ctx, leaseKey(c.WorkerID()))
		if err != nil {
			t.Fatal(err)
		}
		return e.Revision()
	}
	liveRev, releasedRev := revision(live), revision(released)
	a.watch.changed("test", "an epoch change")
	testenv.WaitFor(t, 20*time.Second, "the live lease renewed", func() bool { return revision(live) > liveRev })
	if got := revision(released); got != releasedRev {
		t.Errorf("the released lease's key went from revision %d to %d: it was written after its release", releasedRev, got)
	}
	if a.EpochChanges() != 1 {
		t.Errorf("EpochChanges = %d, want 1", a.EpochChanges())
	}
}
