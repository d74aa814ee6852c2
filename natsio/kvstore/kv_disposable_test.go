package kvstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// kvDisposable is a disposable assigner on addr with the default loss
// window W (2 minutes), whose wait of W is wait (nil: none).
func kvDisposable(t *testing.T, addr, host string, wait func(context.Context, time.Duration) error) *kvstore.Assigner {
	t.Helper()
	cfg := kvConfig(workerid.ModeDisposable)
	cfg.StoreLossWindow = workerid.DefaultConfig().StoreLossWindow
	cfg.Host = workerid.Host{Name: host, Port: "7000", Type: workerid.HostContainer}
	a := newKVAssigner(t, cfg, addr)
	if wait == nil {
		wait = func(context.Context, time.Duration) error { return nil }
	}
	kvstore.SetLossWait(a, wait)
	return a
}

// kvPurge makes the bucket's stream forget keys, as a power loss under
// lazy fsync forgets the last writes: the messages are gone, no marker.
func kvPurge(t *testing.T, addr string, keys ...string) {
	t.Helper()
	js, err := jetstream.New(kvConnect(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "KV_"+kvConfig(workerid.ModeDisposable).KVBucket())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := s.Purge(ctx, jetstream.WithPurgeSubject("$KV."+kvConfig(workerid.ModeDisposable).KVBucket()+"."+k)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKVDisposableForgottenStartIsRefused: start A takes worker ID 0;
// the store forgets the counter's increment and A's node key together
// (both within W); start B then gets worker ID 0 too. A, which reads its
// node key back W later, finds B's token there and takes another: the
// two never share a worker ID (disposable.pml, MUTANT_NO_DURABLE_ROW).
func TestKVDisposableForgottenStartIsRefused(t *testing.T) {
	addr := embeddedAddr(t)
	release := make(chan struct{})
	a := kvDisposable(t, addr, "host-a", func(ctx context.Context, w time.Duration) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	b := kvDisposable(t, addr, "host-b", nil)
	kv := kvBucket(t, addr, kvConfig(workerid.ModeDisposable).Bucket)
	layout := uidcore.DefaultLayout()
	type result struct {
		c   uidcore.Claim
		err error
	}
	claimedA := make(chan result, 1)
	go func() {
		c, err := a.Claim(context.Background(), layout)
		claimedA <- result{c, err}
	}()
	testwait.WaitFor(t, 5*time.Second, "start A's node key", func() bool {
		_, err := kv.Get(context.Background(), "disposable.node.0")
		return err == nil
	})
	kvPurge(t, addr, "disposable.last", "disposable.node.0")
	cb, err := b.Claim(context.Background(), layout)
	if err != nil || cb.WorkerID() != 0 {
		t.Fatalf("start B: worker ID %v, %v; want 0, A's: the test's loss did not reproduce it", cb, err)
	}
	close(release)
	r := <-claimedA
	if r.err != nil {
		t.Fatalf("start A after the loss: %v", r.err)
	}
	if r.c.WorkerID() == cb.WorkerID() {
		t.Fatalf("starts A and B both use worker ID %d", cb.WorkerID())
	}
	if n := a.Regressions(); n != 1 {
		t.Errorf("start A counted %d regressions, want 1", n)
	}
}

// TestKVDisposableCounterWentBackIsRefused: the counter alone goes back
// (the node keys kept): the worker IDs handed out before are refused by
// their node keys, and the start takes the first never taken.
func TestKVDisposableCounterWentBackIsRefused(t *testing.T) {
	addr := embeddedAddr(t)
	a := kvDisposable(t, addr, "host-a", nil)
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

// TestKVDisposableConcurrentStartsUnique: starts on eight hosts claim at
// once through the full check: no worker ID twice, none refused.
func TestKVDisposableConcurrentStartsUnique(t *testing.T) {
	addr := embeddedAddr(t)
	layout := uidcore.DefaultLayout()
	const hosts, starts = 8, 5
	var mu sync.Mutex
	seen := map[uint64]int{}
	var wg sync.WaitGroup
	assigners := make([]*kvstore.Assigner, hosts)
	for i := range assigners {
		assigners[i] = kvDisposable(t, addr, "host-"+string(rune('a'+i)), nil)
	}
	for i, a := range assigners {
		wg.Go(func() {
			for range starts {
				c, err := a.Claim(context.Background(), layout)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if prev, dup := seen[c.WorkerID()]; dup {
					t.Errorf("worker ID %d handed to hosts %d and %d", c.WorkerID(), prev, i)
				}
				seen[c.WorkerID()] = i
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != hosts*starts {
		t.Errorf("%d distinct worker IDs, want %d", len(seen), hosts*starts)
	}
	for i, a := range assigners {
		if n := a.Regressions(); n != 0 {
			t.Errorf("host %d counted %d regressions with no loss", i, n)
		}
	}
}
