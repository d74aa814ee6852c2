package workeridtest

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// disposableStart is a disposable assigner of st whose starts are told
// apart by host, with the default loss window W (2 minutes) and the fleet
// recorded as the dispenser records it before claiming. Its wait of W is
// wait (a test clock); nil: no wait.
func disposableStart(t *testing.T, st Store, host string, wait func(context.Context, time.Duration) error) uidcore.Assigner {
	t.Helper()
	cfg := Config(workerid.ModeDisposable)
	cfg.Host = workerid.Host{Name: host, Port: "7000", Type: workerid.HostContainer}
	cfg.StoreLossWindow = workerid.DefaultConfig().StoreLossWindow
	a := st.New(t, cfg, st.Addr)
	if wait == nil {
		wait = func(context.Context, time.Duration) error { return nil }
	}
	st.SetLossWait(a, wait)
	fs, ok := a.(workerid.FleetStore)
	if !ok {
		t.Fatal("the assigner does not implement workerid.FleetStore")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := fs.RecordFleet(ctx, testFleet(uidcore.DefaultLayout(), workerid.ModeDisposable, "uid")); err != nil {
		t.Fatalf("RecordFleet: %v", err)
	}
	return a
}

// testDisposableForgottenStart reproduces issue 31's disposable hole
// (disposable.pml, MUTANT_NO_DURABLE_ROW): start A records its worker ID;
// a failover to a replica that lacked the last writes, or a power loss,
// forgets that record and the counter's increment together
// (Store.ForgetStart); start B then gets A's worker ID. A, which reads
// its record back W after writing it, finds B's there (or none) and
// claims another: the two never share a worker ID. Before the read-back A
// issued under the ID at once, and B did too.
func testDisposableForgottenStart(t *testing.T, st Store) {
	if st.SetLossWait == nil || st.Starts == nil || st.ForgetStart == nil {
		t.Skip("the store cannot forget a start")
	}
	layout := uidcore.DefaultLayout()
	release := make(chan struct{})
	a := disposableStart(t, st, "host-a", func(ctx context.Context, w time.Duration) error {
		if w != 2*time.Minute {
			t.Errorf("waited %s, want W (the default 2m)", w)
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	b := disposableStart(t, st, "host-b", nil)

	type result struct {
		c   uidcore.Claim
		err error
	}
	claimedA := make(chan result, 1)
	go func() {
		c, err := a.Claim(context.Background(), layout)
		claimedA <- result{c, err}
	}()
	var idA uint64
	testwait.WaitFor(t, 5*time.Second, "start A's record", func() bool {
		for id, host := range st.Starts(t) {
			if host == "host-a" {
				idA = id
				return true
			}
		}
		return false
	})
	st.ForgetStart(t, idA)

	cb, err := b.Claim(context.Background(), layout)
	if err != nil {
		t.Fatalf("start B: %v", err)
	}
	if cb.WorkerID() != idA {
		t.Fatalf("start B got worker ID %d, not A's %d: the test's loss did not reproduce the hole", cb.WorkerID(), idA)
	}
	close(release)
	r := <-claimedA
	if r.err != nil {
		t.Fatalf("start A after the loss: %v", r.err)
	}
	if r.c.WorkerID() == cb.WorkerID() {
		t.Fatalf("starts A and B both use worker ID %d: the forgotten record was not seen", cb.WorkerID())
	}
	if n := regressions(t, a); n != 1 {
		t.Errorf("start A counted %d regressions, want 1 (the forgotten record)", n)
	}
	if host := st.Starts(t)[r.c.WorkerID()]; host != "host-a" {
		t.Errorf("the record of A's final worker ID %d names host %q, want host-a", r.c.WorkerID(), host)
	}
	t.Logf("A recorded %d, lost it to B, claimed %d instead", idA, r.c.WorkerID())
}

// testDisposableConcurrentStarts: starts on eight hosts claim at once,
// each through the full check (the read-back after its wait), while
// another writer takes worker IDs of its own where the store has one
// (Store.OtherWriter): no worker ID is handed out twice, none is refused
// (no loss), and the fleet's recorded maximum, where the store keeps one,
// is the highest worker ID taken.
func testDisposableConcurrentStarts(t *testing.T, st Store) {
	if st.SetLossWait == nil {
		t.Skip("the store has no wait of W to replace")
	}
	const hosts, starts = 8, 5
	assigners := make([]uidcore.Assigner, hosts)
	for i := range assigners {
		assigners[i] = disposableStart(t, st, "host-"+string(rune('a'+i)), nil)
	}
	others := 0
	if st.OtherWriter != nil {
		others = 20
	}
	seen := ClaimAtOnce(t, uidcore.DefaultLayout(), assigners, starts, st.OtherWriter, others)
	if len(seen) != hosts*starts+others {
		t.Errorf("%d distinct worker IDs, want %d", len(seen), hosts*starts+others)
	}
	if st.FleetMax != nil {
		var highest uint64
		for id, who := range seen {
			if who != OtherWriterName {
				highest = max(highest, id)
			}
		}
		if m := st.FleetMax(t); m != highest {
			t.Errorf("fleet maximum %d, want the highest worker ID taken, %d", m, highest)
		}
	}
	for i, a := range assigners {
		if n := regressions(t, a); n != 0 {
			t.Errorf("host %d counted %d regressions with no loss", i, n)
		}
	}
}

// OtherWriterName is who ClaimAtOnce says took the other writer's worker
// IDs.
const OtherWriterName = "the other writer"

// ClaimAtOnce claims claims worker IDs in layout from each claimer, in a
// goroutine of its own, all at once; other, when not nil, takes others
// worker IDs beside them as another program sharing the store would.
// It fails t when a claim fails or a worker ID is handed out twice, and
// returns who took each worker ID: "claimer i" (its index in claimers)
// or OtherWriterName.
func ClaimAtOnce(t *testing.T, layout uidcore.Layout, claimers []uidcore.Assigner, claims int, other func() (uint64, error), others int) map[uint64]string {
	t.Helper()
	var mu sync.Mutex
	seen := map[uint64]string{}
	record := func(id uint64, who string) {
		mu.Lock()
		defer mu.Unlock()
		if prev, dup := seen[id]; dup {
			t.Errorf("worker ID %d handed to %s and %s", id, prev, who)
		}
		seen[id] = who
	}
	var wg sync.WaitGroup
	if other != nil {
		wg.Go(func() {
			for range others {
				id, err := other()
				if err != nil {
					t.Error(err)
					return
				}
				record(id, OtherWriterName)
			}
		})
	}
	for i, a := range claimers {
		wg.Go(func() {
			for range claims {
				c, err := a.Claim(context.Background(), layout)
				if err != nil {
					t.Error(err)
					return
				}
				record(c.WorkerID(), "claimer "+strconv.Itoa(i))
			}
		})
	}
	wg.Wait()
	return seen
}
