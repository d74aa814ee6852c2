package workeridtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// twoWorkers is a layout of two worker IDs, so that a claimer who finds
// one held must take the other.
func twoWorkers() uidcore.Layout {
	return uidcore.Layout{TimeBits: 52, WorkerBits: 1, SeqBits: 10, Epoch: uidcore.DefaultEpoch}
}

// lossConfig has a loss window of 2 s: a margin of 2+1+2 = 5 s.
func lossConfig() workerid.Config {
	cfg := Config(workerid.ModeLeased)
	cfg.LeaseTTL = time.Second
	cfg.ReserveChunk = 2 * time.Second
	cfg.StoreLossWindow = 2 * time.Second
	return cfg
}

// idCollector takes IDs from a generator until stopped.
type idCollector struct {
	mu   sync.Mutex
	ids  []uint64
	stop chan struct{}
	done chan struct{}
}

// issue builds a generator of opts (a ring of one second) and takes IDs
// from it until finish, which closes it.
func issue(t testing.TB, opts uidcore.CachedOptions) *idCollector {
	t.Helper()
	opts.RingSeconds = 1
	g, err := uidcore.NewCached(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	c := &idCollector{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			id, err := g.Next(ctx)
			cancel()
			if err == nil {
				c.mu.Lock()
				c.ids = append(c.ids, id)
				c.mu.Unlock()
			}
		}
	}()
	return c
}

func (c *idCollector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ids)
}

func (c *idCollector) finish() []uint64 {
	close(c.stop)
	<-c.done
	return c.ids
}

func regressions(t testing.TB, a uidcore.Assigner) uint64 {
	t.Helper()
	r, ok := a.(interface{ Regressions() uint64 })
	if !ok {
		t.Fatalf("%T does not count regressions", a)
	}
	return r.Regressions()
}

// testForgottenRenewal: the store forgets a live owner's last renewals
// (its lease record written back to an older value, as a store restored
// from an older state has it). The owner's next renewal finds the record
// below what the store had acknowledged to it: it stops issuing under the
// worker ID at once, counts the regression and gives the worker ID back
// raised to its acknowledged reservation. A new owner of that worker ID
// then issues none of the old owner's IDs.
func testForgottenRenewal(t *testing.T, st Store) {
	if st.LeaseRecord == nil {
		t.Skip("the store gives no access to its lease records")
	}
	cfg, layout := lossConfig(), twoWorkers()
	a := st.New(t, cfg, st.Addr)
	holder := claim(t, a, layout) // the other worker ID, so a new claimer must take this one
	defer release(t, holder)
	old := asLease(t, claim(t, a, layout))
	defer releaseQuietly(old)
	record := st.LeaseRecord(t, old.WorkerID())
	first := until(t, old)
	oldIDs := issue(t, uidcore.CachedOptions{Layout: layout, Claim: old})
	testwait.WaitFor(t, 20*time.Second, "the old owner's reservation to move on", func() bool {
		u, err := old.Until()
		return err == nil && u > first+1 && oldIDs.count() > 0
	})
	acknowledged := until(t, old)
	st.PutLeaseRecord(t, old.WorkerID(), record)
	select {
	case <-old.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the old owner did not notice the regression within 20 s")
	}
	if err := old.Err(); !errors.Is(err, workerid.ErrLeaseRegression) || !errors.Is(err, uidcore.ErrClaimLost) {
		t.Fatalf("old owner's Err = %v, want ErrLeaseRegression and ErrClaimLost", err)
	}
	if _, err := old.Until(); err == nil {
		t.Error("the old owner may still issue after the regression")
	}
	if n := regressions(t, a); n != 1 {
		t.Errorf("%d regressions counted, want 1", n)
	}
	next := reclaim(t, st.New(t, cfg, st.Addr), layout, old.WorkerID(), 20*time.Second, "the regressed worker ID claimed again")
	defer release(t, next)
	if next.After() < acknowledged {
		t.Fatalf("new owner starts after second %d, below the old owner's acknowledged reservation %d", next.After(), acknowledged)
	}
	newIDs := issue(t, uidcore.CachedOptions{Layout: layout, Claim: next, MaxAhead: uidcore.NoAheadBound})
	testwait.WaitFor(t, 30*time.Second, "IDs from the new owner", func() bool { return newIDs.count() > 100 })
	checkDisjoint(t, layout, oldIDs.finish(), newIDs.finish(), next.After())
}

// testLossMargin: a claimer that finds a worker ID's lease expired on a
// store that forgot its owner's last renewals (written back to an older
// record before the owner renewed again) starts only after the record's
// reservation plus the loss margin, which covers what the forgotten
// renewals reserved: none of the old owner's IDs is issued twice, though
// both issue at the same time until the old owner learns it lost the
// worker ID. Claims prefer worker IDs that serve at once.
func testLossMargin(t *testing.T, st Store) {
	if st.LeaseRecord == nil {
		t.Skip("the store gives no access to its lease records")
	}
	cfg := lossConfig()
	layout := uidcore.Layout{TimeBits: 51, WorkerBits: 2, SeqBits: 10, Epoch: uidcore.DefaultEpoch} // worker IDs 0..3
	margin := workerid.LeaseMargin(cfg.StoreLossWindow, cfg.LeaseTTL, cfg.ReserveChunk)
	a := st.New(t, cfg, st.Addr)
	old := asLease(t, claim(t, a, layout))
	defer releaseQuietly(old)
	record := st.LeaseRecord(t, old.WorkerID())
	recorded := until(t, old)
	oldIDs := issue(t, uidcore.CachedOptions{Layout: layout, Claim: old})
	// Past the old record's expiry (its TTL of 1 s ends before the second
	// it reserved, a chunk of 2 s after it was written), with renewals the
	// store will forget since.
	testwait.WaitFor(t, 20*time.Second, "renewals past the recorded expiry", func() bool {
		u, err := old.Until()
		return err == nil && u > recorded && time.Now().Unix() > recorded && oldIDs.count() > 0
	})
	b := st.New(t, cfg, st.Addr)
	st.PutLeaseRecord(t, old.WorkerID(), record)
	// The three never-used worker IDs serve at once: taken first.
	for range 3 {
		c := asLease(t, claim(t, b, layout))
		defer release(t, c)
		if c.WorkerID() == old.WorkerID() {
			t.Fatalf("a claim took worker ID %d, whose record reserves up to %d plus a margin of %d s, over a never-used one", old.WorkerID(), recorded, margin)
		}
	}
	next := asLease(t, claim(t, b, layout)) // the only one left
	defer release(t, next)
	if next.WorkerID() != old.WorkerID() || next.After() < recorded+margin {
		t.Fatalf("fourth claim: worker ID %d after second %d; want %d after %d (the record's %d plus the margin)", next.WorkerID(), next.After(), old.WorkerID(), recorded+margin, recorded)
	}
	newIDs := issue(t, uidcore.CachedOptions{Layout: layout, Claim: next, MaxAhead: uidcore.NoAheadBound})
	select {
	case <-old.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the old owner did not lose the worker ID within 20 s")
	}
	testwait.WaitFor(t, 30*time.Second, "IDs from the new owner", func() bool { return newIDs.count() > 100 })
	checkDisjoint(t, layout, oldIDs.finish(), newIDs.finish(), next.After())
}

// checkDisjoint fails when an ID is in both sets (or twice in one), or
// the new owner issued one at or before its After.
func checkDisjoint(t testing.TB, layout uidcore.Layout, oldIDs, newIDs []uint64, after int64) {
	t.Helper()
	if len(oldIDs) == 0 || len(newIDs) == 0 {
		t.Fatalf("old owner issued %d IDs, new owner %d: both must issue", len(oldIDs), len(newIDs))
	}
	seen := make(map[uint64]bool, len(oldIDs))
	for _, id := range oldIDs {
		if seen[id] {
			t.Fatalf("the old owner issued ID %d twice", id)
		}
		seen[id] = true
	}
	dups := 0
	for _, id := range newIDs {
		if p := uidcoretest.MustParse(t, layout.Parse, id); p.Time.Unix() <= after {
			t.Fatalf("new owner's ID %d is for second %d, at or before its After %d", id, p.Time.Unix(), after)
		}
		if seen[id] {
			dups++
		}
		seen[id] = true
	}
	if dups > 0 {
		t.Fatalf("%d of the new owner's %d IDs were the old owner's too", dups, len(newIDs))
	}
	t.Logf("old owner %d IDs, new owner %d IDs after second %d: 0 duplicates", len(oldIDs), len(newIDs), after)
}
