package workeridtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/faultproxy"
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

// lossConfig has a loss window of 2 s: a fresh lease issues its first
// ID 2 s and a renewal after its claim; its chunk exceeds
// W + TTL/3 + the ahead bound (2 + 0.33 + 2 s).
func lossConfig() workerid.Config {
	cfg := Config(workerid.ModeLeased)
	cfg.LeaseTTL = time.Second
	cfg.ReserveChunk = 5 * time.Second
	cfg.StoreLossWindow = 2 * time.Second
	return cfg
}

// lossStart skips the test when st gives no access to its lease records;
// else it returns the loss tests' configuration, their layout of two
// worker IDs, and an assigner of st with that configuration.
func lossStart(t *testing.T, st Store) (workerid.Config, uidcore.Layout, uidcore.Assigner) {
	t.Helper()
	if st.LeaseRecord == nil {
		t.Skip("the store gives no access to its lease records")
	}
	cfg := lossConfig()
	return cfg, twoWorkers(), st.New(t, cfg, st.Addr)
}

// idCollector takes IDs from a generator until stopped.
type idCollector struct {
	mu      sync.Mutex
	ids     []uint64
	stop    chan struct{}
	stopped sync.Once
	done    chan struct{}
}

// issue builds a generator of opts (a ring of one second) and takes IDs
// from it until finish, or until the test ends: a test that ends early
// (RenewalAfterGap's skip on a loaded machine) left the collector taking
// from the closed generator, and goleak failed the package.
func issue(t testing.TB, opts uidcore.CachedOptions) *idCollector {
	t.Helper()
	opts.RingSeconds = 1
	g, err := uidcore.NewCached(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	c := &idCollector{stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(c.end) // before the generator closes: cleanups run last first
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

// end stops the collector and waits for it.
func (c *idCollector) end() {
	c.stopped.Do(func() { close(c.stop) })
	<-c.done
}

func (c *idCollector) finish() []uint64 {
	c.end()
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
	cfg, layout, a := lossStart(t, st)
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

// testForgottenClaim: the store forgets an owner's claim itself (and its
// first reservation), within the loss window: the record comes back as
// the previous owner released it, and a second claimer takes the worker
// ID, starting after the same recorded second as the first. With D1' the
// first owner has issued nothing, since no renewal W after its claim
// confirmed its reservation: every ID of the three instances issuing
// meanwhile (the two owners and a third on the other worker ID) is
// issued once. (Under the old takeover margin both owners issued the
// same seconds: lease.pml -DDESIGN_CLAIM_MARGIN.)
func testForgottenClaim(t *testing.T, st Store) {
	cfg, layout, a := lossStart(t, st)
	previous := claim(t, a, layout)
	other := claim(t, a, layout) // held throughout: the claims below take previous's worker ID
	defer release(t, other)
	otherIDs := issue(t, uidcore.CachedOptions{Layout: layout, Claim: other})
	// The previous owner gives the worker ID back, used up to a past
	// second: the record the store will come back to.
	recorded := time.Now().Unix() - 100
	if r, ok := previous.(uidcore.Retirer); ok {
		r.Retire(recorded)
	}
	release(t, previous)
	record := st.LeaseRecord(t, previous.WorkerID())
	// Each owner below starts after the recorded second. A claim attempt
	// whose first reservation was not acknowledged within TTL/3 (a loaded
	// machine, make test on CI's two cores), and whose release did not
	// get through either, leaves that reservation in the record: the
	// claim's retry then starts after it (10:30:02, not 10:28:03), which
	// is safe but not the case under test. Then the record is put back
	// and the worker ID claimed anew. A start below it fails at once.
	claimRecorded := func(addr string) *workerid.Lease {
		t.Helper()
		var l *workerid.Lease
		testwait.WaitFor(t, 20*time.Second, "the worker ID claimed after the recorded second", func() bool {
			st.PutLeaseRecord(t, previous.WorkerID(), record)
			c := reclaim(t, st.New(t, cfg, addr), layout, previous.WorkerID(), 20*time.Second, "the recorded worker ID claimed")
			switch {
			case c.After() < recorded:
				t.Fatalf("a claim starts after second %d, below the recorded %d", c.After(), recorded)
			case c.After() > recorded:
				t.Logf("a claim starts after second %d, not the recorded %d: a failed claim attempt's reservation; putting the record back", c.After(), recorded)
				release(t, c)
				return false
			}
			l = c
			return true
		})
		return l
	}

	// The first owner reaches the store through a proxy, cut right after
	// its claim: nothing it does later reaches the store, as if the loss
	// below had come before its next renewal.
	proxy := faultproxy.NewProxy(t, st.Addr)
	first := claimRecorded(proxy.Addr())
	defer releaseQuietly(first)
	firstIDs := issue(t, uidcore.CachedOptions{Layout: layout, Claim: first})
	proxy.Cut()

	// The store forgets the claim: the record is put back.
	second := claimRecorded(st.Addr)
	defer release(t, second)
	secondIDs := issue(t, uidcore.CachedOptions{Layout: layout, Claim: second})
	testwait.WaitFor(t, 60*time.Second, "IDs from the second owner", func() bool { return secondIDs.count() > 100 && otherIDs.count() > 100 })
	checkUnique(t, map[string][]uint64{"first owner": firstIDs.finish(), "second owner": secondIDs.finish(), "other worker ID": otherIDs.finish()})
}

// testRenewalAfterGap: an owner cut off from the store past its lease
// renews after a long gap (Renew succeeds on an expired lease that is
// still its own), which moves its reservation from an old second to a
// chunk after now; the store then forgets that renewal and a second
// claimer takes the worker ID after the old second. With D1' the first
// owner issues nothing of the forgotten reservation: no renewal W after
// it confirmed it.
func testRenewalAfterGap(t *testing.T, st Store) {
	cfg, layout, a := lossStart(t, st)
	other := claim(t, a, layout)
	defer release(t, other)
	proxy := faultproxy.NewProxy(t, st.Addr)
	first := asLease(t, claim(t, st.New(t, cfg, proxy.Addr()), layout))
	defer releaseQuietly(first)
	firstIDs := issue(t, uidcore.CachedOptions{Layout: layout, Claim: first})
	proxy.Cut()
	// The gap: past the lease, and past the reservation made before it by
	// more than the old takeover margin (W + TTL + chunk), which assumed
	// an owner renewing regularly up to a loss.
	old := first.Status().Reserved
	gap := int64((cfg.StoreLossWindow + cfg.LeaseTTL + cfg.ReserveChunk) / time.Second)
	testwait.WaitFor(t, 60*time.Second, "the wall clock past the reservation made before the gap", func() bool {
		return errors.Is(first.Expired(), workerid.ErrLeaseExpired) && time.Now().Unix() > old+gap+1
	})
	record := st.LeaseRecord(t, first.WorkerID())
	healed := time.Now()
	proxy.Restore()
	testwait.WaitFor(t, 30*time.Second, "the renewal after the gap", func() bool { return first.Status().Reserved > old })
	proxy.Cut()
	if time.Since(healed) >= cfg.StoreLossWindow {
		// The renewal may have been confirmed W after it: forgetting it
		// now is a loss longer than W, which nothing covers.
		t.Skipf("the machine took %s, more than the loss window %s, between the renewal and the cut", time.Since(healed), cfg.StoreLossWindow)
	}
	st.PutLeaseRecord(t, first.WorkerID(), record) // the store forgets the renewal after the gap
	second := reclaim(t, st.New(t, cfg, st.Addr), layout, first.WorkerID(), 20*time.Second, "the worker ID claimed after the forgotten renewal")
	defer release(t, second)
	secondIDs := issue(t, uidcore.CachedOptions{Layout: layout, Claim: second})
	otherIDs := issue(t, uidcore.CachedOptions{Layout: layout, Claim: other})
	testwait.WaitFor(t, 60*time.Second, "IDs from the second owner", func() bool { return secondIDs.count() > 100 })
	checkUnique(t, map[string][]uint64{"first owner": firstIDs.finish(), "second owner": secondIDs.finish(), "other worker ID": otherIDs.finish()})
}

// checkUnique fails when an ID was issued twice, by one issuer or two.
func checkUnique(t testing.TB, byIssuer map[string][]uint64) {
	t.Helper()
	seen := map[uint64]string{}
	dups, total := 0, 0
	for who, ids := range byIssuer {
		total += len(ids)
		for _, id := range ids {
			if prev, ok := seen[id]; ok {
				if dups == 0 {
					t.Errorf("ID %d issued by the %s and by the %s", id, prev, who)
				}
				dups++
			}
			seen[id] = who
		}
	}
	if dups > 0 {
		t.Fatalf("%d of %d IDs issued twice", dups, total)
	}
	t.Logf("%d IDs from %d issuers (%v), none twice", total, len(byIssuer), counts(byIssuer))
}

func counts(byIssuer map[string][]uint64) map[string]int {
	out := map[string]int{}
	for who, ids := range byIssuer {
		out[who] = len(ids)
	}
	return out
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

// testDurableReservation: with a loss window a fresh lease hands the
// generator nothing (Until is After) until a renewal W after its first
// reservation confirmed it (Ready), then only what was confirmed; with
// W = 0 (StoreLossWindow negative) every acknowledged reservation is
// durable at once, as before D1'.
func testDurableReservation(t *testing.T, st Store) {
	layout := twoWorkers()
	cfg := lossConfig()
	lease := asLease(t, claim(t, st.New(t, cfg, st.Addr), layout))
	defer release(t, lease)
	select {
	case <-lease.Ready():
		t.Fatal("a lease with a loss window was ready at its claim")
	default:
	}
	if u := until(t, lease); u != lease.After() || lease.Status().Reserved <= u {
		t.Fatalf("at the claim: Until %d, After %d, acknowledged %d: want Until = After below the acknowledged reservation", u, lease.After(), lease.Status().Reserved)
	}
	testwait.WaitFor(t, 30*time.Second, "the first reservation durable", func() bool {
		select {
		case <-lease.Ready():
			return true
		default:
			return false
		}
	})
	if st := lease.Status(); st.Durable <= st.After || st.Durable > st.Reserved {
		t.Fatalf("once ready: %+v: want After < Durable <= Reserved", st)
	}

	cfg.StoreLossWindow = -1
	now := asLease(t, claim(t, st.New(t, cfg, st.Addr), layout))
	defer release(t, now)
	select {
	case <-now.Ready():
	default:
		t.Fatal("a lease without a loss window was not ready at its claim")
	}
	if u, st := until(t, now), now.Status(); u != st.Reserved || u <= st.After {
		t.Fatalf("without a loss window: Until %d, %+v: want the acknowledged reservation", u, st)
	}
}

// claimRecorder is a store's assigner that keeps the claims it handed
// out, by worker ID, for the test to look at.
type claimRecorder struct {
	uidcore.Assigner
	mu     sync.Mutex
	claims map[uint64]uidcore.Claim
	count  int
}

func (r *claimRecorder) Claim(ctx context.Context, layout uidcore.Layout) (uidcore.Claim, error) {
	c, err := r.Assigner.Claim(ctx, layout)
	if err == nil {
		r.mu.Lock()
		r.claims[c.WorkerID()] = c
		r.count++
		r.mu.Unlock()
	}
	return c, err
}

// laneWatch records, at each lane padding adopts, whether its lease could
// issue then (its first reservation durable).
type laneWatch struct {
	uidcore.NopObserver
	rec *claimRecorder
	mu  sync.Mutex
	// added: worker IDs adopted; early: those adopted before their
	// lease was ready.
	added, early []uint64
}

func (w *laneWatch) LaneChanged(_ context.Context, e uidcore.LaneEvent) {
	if !e.Added {
		return
	}
	w.rec.mu.Lock()
	c := w.rec.claims[e.WorkerID]
	w.rec.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.added = append(w.added, e.WorkerID)
	select {
	case <-uidcore.Ready(c):
	default:
		w.early = append(w.early, e.WorkerID)
	}
}

// testLanesJoinWhenDurable: under a loss window an extra lane (a worker
// ID claimed under load) joins padding only once its lease's first
// reservation is durable, the generator claims no other lane while one
// waits, and the IDs of every lane are unique.
func testLanesJoinWhenDurable(t *testing.T, st Store) {
	cfg, layout := lossConfig(), SmallLayout()
	rec := &claimRecorder{Assigner: st.New(t, cfg, st.Addr), claims: map[uint64]uidcore.Claim{}}
	first := claim(t, rec, layout)
	t.Cleanup(func() { release(t, first) }) // the caller's lane, after Close
	watch := &laneWatch{rec: rec}
	g, err := uidcore.NewCached(uidcore.CachedOptions{Layout: layout, Claim: first, Lanes: rec, MaxLanes: 3,
		TakeWait: 2 * time.Second, MaxAhead: uidcore.NoAheadBound, Observer: watch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	var ids []uint64
	// Demand beyond one lane's 256 IDs a second asks for lanes.
	testwait.WaitFor(t, 60*time.Second, "the generator to hold three lanes", func() bool {
		dst := make([]uint64, 512)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		n, _ := g.NextN(ctx, dst)
		cancel()
		ids = append(ids, dst[:n]...)
		return len(g.State().Lanes) == 3
	})
	watch.mu.Lock()
	added, early := watch.added, watch.early
	watch.mu.Unlock()
	rec.mu.Lock()
	claims := rec.count
	rec.mu.Unlock()
	if len(early) > 0 {
		t.Errorf("lanes %v joined before their first reservation was durable", early)
	}
	if len(added) != 2 || claims != 3 {
		t.Errorf("%d lanes added with %d claims (the first included): want 2 and 3, one claim per lane, none while another waited", len(added), claims)
	}
	checkUnique(t, map[string][]uint64{"generator": ids})
}
