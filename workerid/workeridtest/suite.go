// Package workeridtest holds what the tests of every worker-ID store
// share: the conformance suite of the two modes (Run), with a
// faultproxy in front of the store to simulate losing it.
package workeridtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/faultproxy"
	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// Store is a fresh, empty worker-ID store under test.
type Store struct {
	// Addr is the host:port of the server the store lives on; the suite
	// puts a faultproxy.Proxy in front of it to cut connections.
	Addr string
	// New builds an assigner on the store for cfg, with the store's own
	// settings added (DSN, tables, bucket), that talks to the server at
	// addr (Addr or a proxy's). It closes the assigner when the test
	// ends and must be called from the test's goroutine.
	New func(t testing.TB, cfg workerid.Config, addr string) uidcore.Assigner
	// LeaseRecord reads worker ID workerID's lease record as the store
	// holds it (opaque bytes), and PutLeaseRecord writes such a record
	// back behind its owner's back: what a store that forgot writes (a
	// power loss, a failover) looks like. Nil: the loss tests skip.
	LeaseRecord    func(t testing.TB, workerID uint64) []byte
	PutLeaseRecord func(t testing.TB, workerID uint64, record []byte)

	// The disposable starts' tests (runDisposable) skip without the
	// first three.
	//
	// SetLossWait replaces a's wait of W between a disposable start's
	// record and its read-back: the tests' clock, which lets a test put
	// a loss inside the wait.
	SetLossWait func(a uidcore.Assigner, wait func(ctx context.Context, w time.Duration) error)
	// Starts reads the disposable starts' records the store holds: the
	// host of each worker ID's.
	Starts func(t testing.TB) map[uint64]string
	// ForgetStart makes the store forget the newest start's record,
	// worker ID workerID's, and the counter's increment that handed it
	// out, together: what a failover to a replica that lacked the last
	// writes, or a power loss, looks like.
	ForgetStart func(t testing.TB, workerID uint64)
	// OtherWriter, nil where the store is the dispenser's alone, takes a
	// worker ID as another program sharing the store does (UidGenerator
	// inserting its own rows). It is called from a goroutine of its own.
	OtherWriter func() (uint64, error)
	// FleetMax, nil where the store keeps none, reads the fleet's
	// recorded highest disposable worker ID.
	FleetMax func(t testing.TB) uint64
}

// Config is the configuration the suite starts from: short leases so the
// tests finish in seconds, and a store that keeps what it acknowledged
// (no loss window; the loss tests set one).
func Config(mode workerid.Mode) workerid.Config {
	cfg := workerid.DefaultConfig()
	cfg.Mode = mode
	cfg.LeaseTTL = 2 * time.Second
	cfg.ReserveChunk = 5 * time.Second
	// A claim retries a store that a loaded machine slows (a first
	// reservation not acknowledged within TTL/3) until the test binary's
	// timeout, not for 10 s (make test: ZombieOwner's claim gave up after
	// 6 attempts); a test of giving up sets its own deadline.
	cfg.StoreStartupDeadline = time.Hour
	cfg.StoreLossWindow = -1
	return cfg
}

// SmallLayout has 8 worker IDs (0..7) and 256 IDs per second.
func SmallLayout() uidcore.Layout {
	return uidcore.Layout{TimeBits: 52, WorkerBits: 3, SeqBits: 8, Epoch: uidcore.DefaultEpoch}
}

// Run runs the conformance suite of both modes; newStore gives each test a
// fresh, empty store. The tests run in parallel.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	for _, mode := range []workerid.Mode{workerid.ModeLeased, workerid.ModeDisposable} {
		t.Run(string(mode)+"/FiftyConcurrentClaimers", func(t *testing.T) {
			t.Parallel()
			testConcurrentClaimers(t, newStore(t), mode, 50)
		})
		t.Run(string(mode)+"/FullRange", func(t *testing.T) {
			t.Parallel()
			testFullRange(t, newStore(t), mode)
		})
	}
	runEach(t, "leased/", newStore, map[string]func(*testing.T, Store){
		"ReleaseFreesAtOnce":   testReleaseFreesAtOnce,
		"RetiredGenerator":     testRetiredGenerator,
		"ExpiredLeaseRecycled": testExpiredLeaseRecycled,
		"ZombieOwner":          testZombieOwner,
		"StoreOutage":          testStoreOutage,
		"ReserveOnDemand":      testReserveOnDemand,
		"RegionsConcurrent":    testRegionsConcurrentClaimers,
		"RegionsLanes":         testRegionsLanes,
		"ForgottenRenewal":     testForgottenRenewal,
		"ForgottenClaim":       testForgottenClaim,
		"RenewalAfterGap":      testRenewalAfterGap,
		"DurableReservation":   testDurableReservation,
		"LanesJoinWhenDurable": testLanesJoinWhenDurable,
	})
	// Disposable starts under a store that forgets (issue 31's D5,
	// verify/disposable.pml).
	runEach(t, "disposable/", newStore, map[string]func(*testing.T, Store){
		"ForgottenStartRefused": testDisposableForgottenStart,
		"ConcurrentStarts":      testDisposableConcurrentStarts,
	})
	runFleet(t, newStore)
}

// runEach runs each test as prefix+name, in parallel, each on a fresh
// store from newStore.
func runEach(t *testing.T, prefix string, newStore func(t *testing.T) Store, tests map[string]func(*testing.T, Store)) {
	for name, test := range tests {
		t.Run(prefix+name, func(t *testing.T) {
			t.Parallel()
			test(t, newStore(t))
		})
	}
}

func claim(t testing.TB, a uidcore.Assigner, layout uidcore.Layout) uidcore.Claim {
	t.Helper()
	c, err := a.Claim(testwait.Context(t), layout)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return c
}

func asLease(t testing.TB, c uidcore.Claim) *workerid.Lease {
	t.Helper()
	l, ok := c.(*workerid.Lease)
	if !ok {
		t.Fatalf("leased claim is a %T, want *workerid.Lease", c)
	}
	return l
}

func release(t testing.TB, c uidcore.Claim) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Release(ctx); err != nil {
		t.Errorf("Release worker %d: %v", c.WorkerID(), err)
	}
}

// checkReserved fails the test when who issued an ID twice or for a
// second after reserved, the end of its reservation; it returns the IDs as
// a set.
func checkReserved(t testing.TB, layout uidcore.Layout, ids []uint64, reserved int64, who string) map[uint64]bool {
	t.Helper()
	seen := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		p := uidcoretest.MustParse(t, layout.Parse, id)
		if p.Time.Unix() > reserved {
			t.Fatalf("%s issued ID %d for second %d beyond its reservation %d", who, id, p.Time.Unix(), reserved)
		}
		if seen[id] {
			t.Fatalf("%s issued ID %d twice", who, id)
		}
		seen[id] = true
	}
	return seen
}

// reclaim claims on a until it is given workerID, releasing any other
// worker ID it gets meanwhile, and fails the test after limit. The store
// may keep a lost lease a moment longer than its owner's local deadline,
// so a new owner claims until the worker ID comes free.
func reclaim(t testing.TB, a uidcore.Assigner, layout uidcore.Layout, workerID uint64, limit time.Duration, what string) *workerid.Lease {
	t.Helper()
	var lease *workerid.Lease
	testwait.WaitFor(t, limit, what, func() bool {
		c := asLease(t, claim(t, a, layout))
		if c.WorkerID() == workerID {
			lease = c
			return true
		}
		release(t, c)
		return false
	})
	return lease
}

// releaseQuietly releases a claim whose store may be cut off; errors do
// not matter, stopping its heartbeat does.
func releaseQuietly(c uidcore.Claim) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = c.Release(ctx)
}

func until(t testing.TB, c uidcore.Claim) int64 {
	t.Helper()
	u, err := c.Until()
	if err != nil {
		t.Fatalf("Until: %v", err)
	}
	return u
}

// testConcurrentClaimers: n instances claim at once and get n distinct
// worker IDs; leased ones get exactly the lowest n.
func testConcurrentClaimers(t *testing.T, st Store, mode workerid.Mode, n int) {
	cfg := Config(mode)
	// n claimers racing on one store retry each other's lost
	// compare-and-sets (disposable KV: n(n+1)/2 rounds): on a loaded
	// machine that took longer than 10 s (make test, CI), and no lease
	// may expire meanwhile: with the suite's 2 s TTL one whose renewals a
	// loaded machine delayed was taken over by a later claimer (the same
	// worker ID twice in the list, the first owner's lease lost).
	cfg.LeaseTTL = time.Hour
	ctx := testwait.Context(t)
	assigners := make([]uidcore.Assigner, n)
	for i := range assigners {
		assigners[i] = st.New(t, cfg, st.Addr)
	}
	claims := make([]uidcore.Claim, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, a := range assigners {
		wg.Go(func() {
			<-start
			claims[i], errs[i] = a.Claim(ctx, uidcore.DefaultLayout())
		})
	}
	close(start)
	wg.Wait()
	seen := map[uint64]int{}
	for i, c := range claims {
		if errs[i] != nil {
			t.Errorf("claimer %d: %v", i, errs[i])
			continue
		}
		if j, dup := seen[c.WorkerID()]; dup {
			t.Errorf("claimers %d and %d both got worker ID %d", j, i, c.WorkerID())
		}
		seen[c.WorkerID()] = i
	}
	if mode == workerid.ModeLeased {
		for id := range uint64(n) {
			if _, ok := seen[id]; !ok {
				t.Errorf("worker ID %d not handed out: leased claims should take the lowest free IDs", id)
			}
		}
	}
	for _, c := range claims {
		if c != nil {
			release(t, c)
		}
	}
	if len(seen) != n && !t.Failed() {
		t.Errorf("%d distinct worker IDs for %d claimers", len(seen), n)
	}
}

// testFullRange: with every worker ID of a small layout taken, a claim
// fails with ErrWorkerIDsExhausted instead of handing out a duplicate.
func testFullRange(t *testing.T, st Store, mode workerid.Mode) {
	layout := SmallLayout()
	cfg := Config(mode)
	cfg.StoreStartupDeadline = 30 * time.Second // exhaustion must fail fast all the same
	a := st.New(t, cfg, st.Addr)
	seen := map[uint64]bool{}
	var claims []uidcore.Claim
	var lastErr error
	for range layout.MaxWorkerID() + 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		begin := time.Now()
		c, err := a.Claim(ctx, layout)
		cancel()
		if err != nil {
			lastErr = err
			if took := time.Since(begin); took > 5*time.Second {
				t.Errorf("exhausted claim took %s: it should not be retried", took)
			}
			continue
		}
		if c.WorkerID() > layout.MaxWorkerID() {
			t.Errorf("worker ID %d beyond the layout's %d", c.WorkerID(), layout.MaxWorkerID())
		}
		if seen[c.WorkerID()] {
			t.Errorf("worker ID %d handed out twice", c.WorkerID())
		}
		seen[c.WorkerID()] = true
		claims = append(claims, c)
	}
	if !errors.Is(lastErr, workerid.ErrWorkerIDsExhausted) {
		t.Fatalf("claims past the range: err = %v, want ErrWorkerIDsExhausted", lastErr)
	}
	if mode == workerid.ModeDisposable && !errors.Is(lastErr, uidcore.ErrWorkerRange) {
		t.Errorf("disposable exhaustion error %v does not wrap uidcore.ErrWorkerRange", lastErr)
	}
	if mode == workerid.ModeLeased {
		if len(seen) != int(layout.MaxWorkerID()+1) {
			t.Errorf("%d leases in a range of %d", len(seen), layout.MaxWorkerID()+1)
		}
		// A released worker ID is free again at once.
		freed := claims[3]
		release(t, freed)
		c := claim(t, a, layout)
		if c.WorkerID() != freed.WorkerID() {
			t.Errorf("after releasing worker %d the next claim got %d", freed.WorkerID(), c.WorkerID())
		}
		claims[3] = c
	}
	t.Logf("%d claims, then: %v", len(claims), lastErr)
	for _, c := range claims {
		release(t, c)
	}
}

// testReleaseFreesAtOnce: Release frees the worker ID for the next owner
// without waiting for the lease to expire, and keeps the reserved second.
func testReleaseFreesAtOnce(t *testing.T, st Store) {
	cfg := Config(workerid.ModeLeased)
	cfg.LeaseTTL = time.Minute
	a := st.New(t, cfg, st.Addr)
	// Two worker IDs. A released one keeps its reservation (a reserve
	// chunk ahead): a claim passes it over for a never-used one, which
	// serves at once, and takes it when it is all that is left.
	layout := uidcore.Layout{TimeBits: 40, WorkerBits: 1, SeqBits: 22, Epoch: uidcore.DefaultEpoch}
	first := asLease(t, claim(t, a, layout))
	reserved := until(t, first)
	if now := time.Now().Unix(); reserved < now {
		t.Errorf("reserved second %d is before the clock %d", reserved, now)
	}
	release(t, first)
	if _, err := first.Until(); !errors.Is(err, workerid.ErrReleased) || !errors.Is(err, uidcore.ErrClaimLost) {
		t.Errorf("Until after Release: %v, want ErrReleased and ErrClaimLost", err)
	}
	select {
	case <-first.Done():
	default:
		t.Error("Done not closed after Release")
	}
	fresh := asLease(t, claim(t, a, layout))
	defer release(t, fresh)
	if fresh.WorkerID() == first.WorkerID() || fresh.After() != 0 {
		t.Errorf("with a never-used worker ID left, the claim got worker %d (After %d)", fresh.WorkerID(), fresh.After())
	}
	begin := time.Now()
	second := asLease(t, claim(t, a, layout))
	defer release(t, second)
	if second.WorkerID() != first.WorkerID() {
		t.Fatalf("released worker %d, the next claim got %d", first.WorkerID(), second.WorkerID())
	}
	if took := time.Since(begin); took > cfg.LeaseTTL/2 {
		t.Errorf("claim of a released worker ID took %s", took)
	}
	if second.After() < reserved {
		t.Errorf("new owner's After %d is before the old reservation %d", second.After(), reserved)
	}
	if u := until(t, second); u <= second.After() {
		t.Errorf("new owner's reservation %d does not go beyond After %d", u, second.After())
	}
}

// testRetiredGenerator: a generator closed on a lease retires it at the
// last second it filled, so the next owner starts right after that second
// instead of after the whole reservation, and no ID repeats across a chain
// of quick restarts that would otherwise drift ahead of the clock.
func testRetiredGenerator(t *testing.T, st Store) {
	cfg := Config(workerid.ModeLeased)
	cfg.LeaseTTL = time.Minute
	cfg.ReserveChunk = time.Hour // a chain of restarts would run an hour ahead each
	a := st.New(t, cfg, st.Addr)
	// 262,144 IDs a second: the start-up fill (65,536) leaves most of a
	// second, so each restart may start in the second the last one ended.
	layout := uidcore.Layout{TimeBits: 37, WorkerBits: 8, SeqBits: 18, Epoch: uidcore.DefaultEpoch}
	var all []uint64
	for restart := range 4 {
		lease := asLease(t, claim(t, a, layout))
		if after, now := lease.After(), time.Now().Unix(); after > now+2 {
			t.Fatalf("restart %d: After %d runs %ds ahead of the clock", restart, after, after-now)
		}
		// Instant restarts each start a second after the last one's first
		// second (which it may have used up): allow four of them.
		gen, err := uidcore.NewCached(uidcore.CachedOptions{Layout: layout, Claim: lease, RingSeconds: 1, MaxAhead: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]uint64, 1000)
		if _, err := gen.NextN(context.Background(), ids); err != nil {
			t.Fatal(err)
		}
		all = append(all, ids...)
		gen.Close()
		release(t, lease)
	}
	seen := make(map[uint64]bool, len(all))
	for _, id := range all {
		if seen[id] {
			t.Fatalf("ID %d issued twice across restarts", id)
		}
		seen[id] = true
	}
}

// testExpiredLeaseRecycled: an owner cut off from the store loses its
// lease after the TTL; another instance then gets the same worker ID and
// starts after the old reservation; when the old owner reaches the store
// again it learns that it lost the worker ID for good.
func testExpiredLeaseRecycled(t *testing.T, st Store) {
	cfg := Config(workerid.ModeLeased)
	cfg.LeaseTTL = time.Second
	proxy := faultproxy.NewProxy(t, st.Addr)
	old := asLease(t, claim(t, st.New(t, cfg, proxy.Addr()), uidcore.DefaultLayout()))
	defer releaseQuietly(old)
	oldReserved := until(t, old)
	proxy.Cut()
	testwait.WaitFor(t, 3*time.Second, "old lease expiring", func() bool {
		return errors.Is(old.Expired(), workerid.ErrLeaseExpired)
	})
	next := reclaim(t, st.New(t, cfg, st.Addr), uidcore.DefaultLayout(), old.WorkerID(), 5*time.Second, "old worker ID recycled")
	defer release(t, next)
	if next.After() < oldReserved {
		t.Fatalf("new owner's After %d < old owner's reserved second %d", next.After(), oldReserved)
	}
	// The old reservation runs a reserve chunk ahead of the clock: this
	// generator may follow it there (a dispenser would use another lane).
	g, err := uidcore.NewCached(uidcore.CachedOptions{Claim: next, RingSeconds: 1, MaxAhead: uidcore.NoAheadBound})
	if err != nil {
		t.Fatal(err)
	}
	id, err := g.Next(context.Background())
	g.Close()
	if err != nil {
		t.Fatal(err)
	}
	parts := uidcoretest.MustParse(t, uidcore.DefaultLayout().Parse, id)
	if parts.WorkerID != old.WorkerID() || parts.Time.Unix() <= oldReserved {
		t.Errorf("new owner's first ID %+v: want worker %d, second > %d", parts, old.WorkerID(), oldReserved)
	}
	proxy.Restore()
	select {
	case <-old.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("old owner did not learn it lost the worker ID within 10s of the store coming back")
	}
	if err := old.Err(); !errors.Is(err, workerid.ErrLeaseTaken) || !errors.Is(err, uidcore.ErrClaimLost) {
		t.Errorf("old owner's Err = %v, want ErrLeaseTaken and ErrClaimLost", err)
	}
	if _, err := old.Until(); !errors.Is(err, workerid.ErrLeaseTaken) {
		t.Errorf("old owner's Until = %v, want ErrLeaseTaken", err)
	}
	release(t, old) // nothing to give back; must not fail or free the new owner's lease
	if _, err := next.Until(); err != nil {
		t.Errorf("new owner's lease after the old one's Release: %v", err)
	}
}

// zombie is an owner that does not notice it lost its lease (a paused or
// cut-off process): its Until keeps returning the last reservation it saw.
// It does not implement uidcore.Reserver, so it never asks for more.
type zombie struct {
	uidcore.Claim
	last atomic.Int64
}

func (z *zombie) Until() (int64, error) {
	if u, err := z.Claim.Until(); err == nil {
		z.last.Store(u)
	}
	return z.last.Load(), nil
}

// collect takes IDs from g every pause until stop is closed or g fails for
// good, returning them with the times of the first and last.
func collect(g *uidcore.CachedGenerator, pause time.Duration, stop <-chan struct{}) (ids []uint64, first, last time.Time) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(pause):
		}
		id, err := g.Next(context.Background())
		if err != nil {
			continue // an empty ring at the end of the reservation
		}
		if first.IsZero() {
			first = time.Now()
		}
		last = time.Now()
		ids = append(ids, id)
	}
}

// testZombieOwner: an old owner cut off from the store keeps issuing IDs
// from its reservation while the new owner of the same worker ID issues
// its own: the two sets are disjoint because the new owner starts after
// the old reservation.
func testZombieOwner(t *testing.T, st Store) {
	cfg := Config(workerid.ModeLeased)
	cfg.LeaseTTL = time.Second
	cfg.ReserveChunk = 4 * time.Second
	layout := uidcore.Layout{TimeBits: 39, WorkerBits: 16, SeqBits: 8, Epoch: uidcore.DefaultEpoch}
	proxy := faultproxy.NewProxy(t, st.Addr)
	oldLease := asLease(t, claim(t, st.New(t, cfg, proxy.Addr()), layout))
	defer releaseQuietly(oldLease)
	old := &zombie{Claim: oldLease}
	old.Until()
	oldGen, err := uidcore.NewCached(uidcore.CachedOptions{Layout: layout, Claim: old, RingSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer oldGen.Close()
	proxy.Cut()
	oldReserved := old.last.Load()

	stopOld := make(chan struct{})
	var oldIDs []uint64
	var oldLast time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		oldIDs, _, oldLast = collect(oldGen, 5*time.Millisecond, stopOld)
	}()
	defer func() {
		select {
		case <-stopOld:
		default:
			close(stopOld)
		}
		<-done
	}()

	next := reclaim(t, st.New(t, cfg, st.Addr), layout, oldLease.WorkerID(), 6*time.Second, "zombie's worker ID recycled")
	defer release(t, next)
	if next.After() < oldReserved {
		t.Fatalf("new owner's After %d < zombie's reserved second %d", next.After(), oldReserved)
	}
	newGen, err := uidcore.NewCached(uidcore.CachedOptions{Layout: layout, Claim: next, RingSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer newGen.Close()
	stopNew := make(chan struct{})
	time.AfterFunc(2*time.Second, func() { close(stopNew) })
	newIDs, newFirst, _ := collect(newGen, 5*time.Millisecond, stopNew)
	close(stopOld)
	<-done

	if len(oldIDs) == 0 || len(newIDs) == 0 {
		t.Fatalf("zombie issued %d IDs, new owner %d: both must issue", len(oldIDs), len(newIDs))
	}
	if !oldLast.After(newFirst) {
		t.Errorf("zombie's last ID at %s came before the new owner's first at %s: they never issued at the same time", oldLast.Format(time.StampMilli), newFirst.Format(time.StampMilli))
	}
	oldSet := checkReserved(t, layout, oldIDs, oldReserved, "zombie")
	dups := 0
	for _, id := range newIDs {
		p := uidcoretest.MustParse(t, layout.Parse, id)
		if p.WorkerID != oldLease.WorkerID() || p.Time.Unix() <= next.After() {
			t.Fatalf("new owner's ID %d is %+v: want worker %d after second %d", id, p, oldLease.WorkerID(), next.After())
		}
		if oldSet[id] {
			dups++
		}
	}
	if dups > 0 {
		t.Fatalf("%d of the new owner's %d IDs were issued by the zombie too", dups, len(newIDs))
	}
	t.Logf("zombie issued %d IDs up to second %d, new owner %d IDs from second %d: disjoint", len(oldIDs), oldReserved, len(newIDs), next.After()+1)
}

// testStoreOutage: cut off from the store an owner keeps issuing past its
// lease deadline, from the seconds it reserved (a later owner would start
// after them), stops when they run out (ErrNotReserved), never beyond
// them, and resumes when the store is back (nobody took the worker ID).
func testStoreOutage(t *testing.T, st Store) {
	cfg := Config(workerid.ModeLeased)
	cfg.LeaseTTL = 2 * time.Second
	// Seconds reserved ahead: between half a chunk and a chunk, so the
	// outage outlasts the lease (2s) and then the reservation.
	cfg.ReserveChunk = 4 * time.Second
	proxy := faultproxy.NewProxy(t, st.Addr)
	lease := asLease(t, claim(t, st.New(t, cfg, proxy.Addr()), uidcore.DefaultLayout()))
	defer release(t, lease)
	gen, err := uidcore.NewCached(uidcore.CachedOptions{Claim: lease, RingSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Close()
	seen := map[uint64]bool{}
	newest := int64(0)
	next := func() error {
		id, err := gen.Next(context.Background())
		if err == nil {
			if seen[id] {
				t.Fatalf("ID %d issued twice", id)
			}
			seen[id] = true
			newest = max(newest, uidcoretest.MustParse(t, uidcore.DefaultLayout().Parse, id).Time.Unix())
		}
		return err
	}
	if err := next(); err != nil {
		t.Fatal(err)
	}

	proxy.Cut()
	// The cut does not end the lease: it is valid, with time left, until
	// its window (last renewal + TTL) ends, and the instance keeps serving
	// meanwhile. Checked in that order, not timed: a loaded machine may
	// take the whole window to get here.
	left, expiredAtCut := lease.TimeLeft(), lease.Expired()
	for range 5 {
		if err := next(); err != nil {
			t.Fatalf("after the cut, inside the lease: %v", err)
		}
	}
	if expiredAtCut != nil || left <= 0 || left > cfg.LeaseTTL {
		t.Errorf("at the cut: Expired %v, TimeLeft %s, want a valid lease with time left within (0, %s]", expiredAtCut, left, cfg.LeaseTTL)
	}
	testwait.WaitFor(t, cfg.LeaseTTL+time.Second, "lease expiring during the outage", func() bool {
		return errors.Is(lease.Expired(), workerid.ErrLeaseExpired)
	})
	// Expired, the lease still owns the seconds it reserved (a later owner
	// starts after them): the instance rides the outage out on them, and
	// stops when they run out, at no second beyond the reservation.
	reserved := lease.Status().Reserved
	if err := next(); err != nil {
		t.Fatalf("Next after the lease expired, within its reservation (up to %d): %v", reserved, err)
	}
	var stopped error
	testwait.WaitFor(t, cfg.ReserveChunk+3*time.Second, "the reservation running out", func() bool {
		stopped = next()
		return stopped != nil
	})
	// The ring runs dry (its last round may have filled what was left,
	// so the cause is not always named): what matters is the bound below.
	if !errors.Is(stopped, uidcore.ErrBufferEmpty) || lease.TimeLeft() != 0 {
		t.Errorf("after the reservation ran out: %v (TimeLeft %s), want an empty ring", stopped, lease.TimeLeft())
	}
	if newest > reserved {
		t.Fatalf("an ID of second %d was issued beyond the reservation %d during the outage", newest, reserved)
	}
	select {
	case <-lease.Done():
		t.Fatalf("Done closed by an outage: %v", lease.Err())
	default:
	}

	proxy.Restore()
	took := testwait.WaitFor(t, 10*time.Second, "lease resuming after the store came back", func() bool {
		return lease.Expired() == nil
	})
	testwait.WaitFor(t, 5*time.Second, "IDs again after resuming", func() bool { return next() == nil })
	if lease.Err() != nil || lease.TimeLeft() <= 0 {
		t.Errorf("after resuming: Err %v, TimeLeft %s", lease.Err(), lease.TimeLeft())
	}
	t.Logf("resumed %s after the store came back; %d IDs, no duplicate", took.Round(time.Millisecond), len(seen))
}

// testReserveOnDemand: a generator that runs ahead of its reservation gets
// it extended at once (Reserve wakes the heartbeat) rather than at the
// next heartbeat, and never issues beyond it.
func testReserveOnDemand(t *testing.T, st Store) {
	cfg := Config(workerid.ModeLeased)
	cfg.LeaseTTL = 30 * time.Second // heartbeat every 10s: too late to help
	cfg.ReserveChunk = 2 * time.Second
	layout := uidcore.Layout{TimeBits: 39, WorkerBits: 16, SeqBits: 8, Epoch: uidcore.DefaultEpoch}
	lease := asLease(t, claim(t, st.New(t, cfg, st.Addr), layout))
	defer release(t, lease)
	initial := until(t, lease)
	// Borrowing eight seconds is the point here: the ahead bound must not
	// be what holds the generator back.
	gen, err := uidcore.NewCached(uidcore.CachedOptions{Layout: layout, Claim: lease, RingSeconds: 1, TakeWait: 2 * time.Second, MaxAhead: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Close()
	// Eight seconds' worth of IDs at once: the generator borrows seconds
	// beyond the first reservation.
	ids := make([]uint64, 8*(layout.MaxSequence()+1))
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	begin := time.Now()
	n, err := gen.NextN(ctx, ids)
	took := time.Since(begin)
	if err != nil {
		t.Fatalf("NextN: %d of %d IDs, then %v", n, len(ids), err)
	}
	if took > 5*time.Second {
		t.Errorf("%d IDs took %s: the reservation waited for the heartbeat", n, took)
	}
	reserved := until(t, lease)
	if reserved <= initial {
		t.Fatalf("reservation %d did not grow from %d", reserved, initial)
	}
	checkReserved(t, layout, ids, reserved, "owner")
	t.Logf("%d IDs in %s; reservation %d -> %d", n, took.Round(time.Millisecond), initial, reserved)
}
