package workeridtest

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// runFleet is the part of the suite for the fleet record
// (workerid.FleetStore), which every store must implement.
func runFleet(t *testing.T, newStore func(t *testing.T) Store) {
	runEach(t, "fleet/", newStore, map[string]func(*testing.T, Store){
		"FirstRecordWins":        testFirstFleetRecordWins,
		"ReplaceIsCompareAndSet": testReplaceFleetIsCompareAndSet,
		"LeaseHorizon":           testLeaseHorizon,
		"RevokeLeases":           testRevokeLeases,
		"Regions":                testFleetRegions,
		"Sealed":                 testFleetSealed,
		"Reset":                  testResetFleet,
	})
}

func fleetStore(t testing.TB, s Store, mode workerid.Mode) workerid.FleetStore {
	t.Helper()
	fs, ok := s.New(t, Config(mode), s.Addr).(workerid.FleetStore)
	if !ok {
		t.Fatal("the assigner does not implement workerid.FleetStore")
	}
	return fs
}

func testFleet(layout uidcore.Layout, mode workerid.Mode, prefix string) workerid.Fleet {
	return workerid.Fleet{Generation: 1, Layout: layout.String(), WorkerMode: mode, SubjectPrefix: prefix}
}

// Ten instances with ten different identities record at once: one
// record wins and every one of them reads that same record, also later.
func testFirstFleetRecordWins(t *testing.T, s Store) {
	ctx := testwait.Context(t)
	const n = 10
	stores := make([]workerid.FleetStore, n)
	for i := range stores {
		stores[i] = fleetStore(t, s, workerid.ModeLeased)
	}
	got := make([]workerid.Fleet, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = stores[i].RecordFleet(ctx, testFleet(SmallLayout(), workerid.ModeLeased, "p"+string(rune('a'+i))))
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("RecordFleet %d: %v", i, errs[i])
		}
		if got[i] != got[0] {
			t.Fatalf("instance %d read %+v, instance 0 %+v: two records", i, got[i], got[0])
		}
	}
	if got[0].SubjectPrefix == "" || got[0].Layout != SmallLayout().String() || got[0].Generation != 1 {
		t.Fatalf("record %+v is none of those written", got[0])
	}
	later, err := fleetStore(t, s, workerid.ModeDisposable).RecordFleet(ctx, testFleet(uidcore.DefaultLayout(), workerid.ModeDisposable, "other"))
	if err != nil || later != got[0] {
		t.Fatalf("a later instance read %+v, %v; want the first record %+v", later, err, got[0])
	}
}

// Two instances replace the same record with different generations: one
// succeeds, the other gets ErrFleetChanged, and the store holds the
// winner's record.
func testReplaceFleetIsCompareAndSet(t *testing.T, s Store) {
	ctx := testwait.Context(t)
	a, b := fleetStore(t, s, workerid.ModeLeased), fleetStore(t, s, workerid.ModeLeased)
	first, err := a.RecordFleet(ctx, testFleet(SmallLayout(), workerid.ModeLeased, "uid"))
	if err != nil {
		t.Fatal(err)
	}
	next := func(prefix string) workerid.Fleet {
		f := testFleet(uidcore.DefaultLayout(), workerid.ModeLeased, prefix)
		f.Generation, f.StartsAfter = 2, time.Now().Unix()
		return f
	}
	errA, errB := a.ReplaceFleet(ctx, first, next("a")), b.ReplaceFleet(ctx, first, next("b"))
	if errA != nil || !errors.Is(errB, workerid.ErrFleetChanged) {
		t.Fatalf("replacements: %v, %v; want the first to win and the second ErrFleetChanged", errA, errB)
	}
	now, err := b.RecordFleet(ctx, first)
	if err != nil || now.SubjectPrefix != "a" || now.Generation != 2 || now.StartsAfter == 0 {
		t.Fatalf("the store holds %+v (%v), want the winner's record, generation 2 with its start", now, err)
	}
}

// The horizon counts live leases and the highest reserved second, and a
// release leaves the reservation (at most what was used) with no lease
// live.
func testLeaseHorizon(t *testing.T, s Store) {
	ctx := testwait.Context(t)
	fs := fleetStore(t, s, workerid.ModeLeased)
	if last, live, err := fs.LeaseHorizon(ctx); err != nil || last != 0 || live != 0 {
		t.Fatalf("empty store: %d, %d, %v", last, live, err)
	}
	a := s.New(t, Config(workerid.ModeLeased), s.Addr)
	c1, c2 := claim(t, a, SmallLayout()), claim(t, a, SmallLayout())
	reserved := max(until(t, c1), until(t, c2))
	last, live, err := fs.LeaseHorizon(ctx)
	if err != nil || live != 2 || last < reserved {
		t.Fatalf("two leases reserving up to %d: horizon %d, %d live, %v", reserved, last, live, err)
	}
	release(t, c1)
	release(t, c2)
	last, live, err = fs.LeaseHorizon(ctx)
	if err != nil || live != 0 || last == 0 || last > reserved {
		t.Fatalf("after release: horizon %d (reserved %d), %d live, %v", last, reserved, live, err)
	}
	// A disposable instance on the same store sees the leases too: a
	// fleet moving from one mode to the other must start after them.
	if l2, _, err := fleetStore(t, s, workerid.ModeDisposable).LeaseHorizon(ctx); err != nil || l2 != last {
		t.Fatalf("disposable instance: horizon %d, %v; want %d", l2, err, last)
	}
}

// Leases renewing as fast as they can (each renewal asking for a chunk
// more) are revoked: every one is then lost (ErrLeaseTaken), none was
// told of a reservation beyond the horizon read after the revocation,
// and the next owner of a worker ID starts after its revoked
// reservation. This is what a new generation relies on to fence an old
// instance paused or cut off past its TTL.
func testRevokeLeases(t *testing.T, s Store) {
	ctx := testwait.Context(t)
	fs := fleetStore(t, s, workerid.ModeLeased)
	if n, err := fs.RevokeLeases(ctx); err != nil || n != 0 {
		t.Fatalf("revoke on an empty store: %d, %v", n, err)
	}
	a := s.New(t, Config(workerid.ModeLeased), s.Addr)
	const n = 4
	leases := make([]*workerid.Lease, n)
	start := make([]int64, n)
	for i := range leases {
		leases[i] = asLease(t, claim(t, a, SmallLayout()))
		defer releaseQuietly(leases[i])
		start[i] = until(t, leases[i])
	}
	// Load, not a wait: each lease's generator keeps wanting the last
	// second reserved, so its heartbeat renews again and again (up to a
	// day ahead).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, l := range leases {
		wg.Go(func() {
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-l.Done():
					return
				case <-tick.C:
					if r := l.Status().Reserved; r < time.Now().Unix()+86400 {
						l.Reserve(r)
					}
				}
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	testwait.WaitFor(t, 10*time.Second, "every lease renewed under load", func() bool {
		for i, l := range leases {
			if l.Status().Reserved <= start[i] {
				return false
			}
		}
		return true
	})
	revoked, err := fs.RevokeLeases(ctx)
	if err != nil || revoked != n {
		t.Fatalf("RevokeLeases = %d, %v; want the %d leases", revoked, err, n)
	}
	testwait.WaitFor(t, 10*time.Second, "every revoked lease lost", func() bool {
		for _, l := range leases {
			if l.Err() == nil {
				return false
			}
		}
		return true
	})
	last, live, err := fs.LeaseHorizon(ctx)
	if err != nil || live != 0 {
		t.Fatalf("after the revocation: %d live, %v", live, err)
	}
	for _, l := range leases {
		st := l.Status()
		if !errors.Is(st.Err, workerid.ErrLeaseTaken) || !errors.Is(st.Err, uidcore.ErrClaimLost) {
			t.Fatalf("worker %d after the revocation: %v, want lost (ErrLeaseTaken)", st.WorkerID, st.Err)
		}
		if st.Reserved > last {
			t.Fatalf("worker %d was told second %d is reserved, after the horizon %d read after the revocation", st.WorkerID, st.Reserved, last)
		}
	}
	// The reservations stay: the next owner of a worker ID skips them.
	next := asLease(t, claim(t, a, SmallLayout()))
	defer release(t, next)
	for _, l := range leases {
		if l.WorkerID() == next.WorkerID() && next.After() < l.Status().Reserved {
			t.Fatalf("worker %d: the next owner starts after %d, the revoked lease had reserved %d", next.WorkerID(), next.After(), l.Status().Reserved)
		}
	}
}

// The map of regions is part of the record: it reads back as written, a
// later instance with another map reads the first one, and a replacement
// matches the map too (a record with another map is ErrFleetChanged).
func testFleetRegions(t *testing.T, s Store) {
	ctx := testwait.Context(t)
	a, b := fleetStore(t, s, workerid.ModeLeased), fleetStore(t, s, workerid.ModeLeased)
	f := testFleet(SmallLayout(), workerid.ModeLeased, "uid")
	f.Regions = twoRegions
	got, err := a.RecordFleet(ctx, f)
	if err != nil || got != f {
		t.Fatalf("recorded %+v, read %+v, %v", f, got, err)
	}
	other := f
	other.Regions = "east=0-1,west=2-7"
	if got, err := b.RecordFleet(ctx, other); err != nil || got.Regions != twoRegions {
		t.Fatalf("a later instance with another map read %+v, %v; want the first map", got, err)
	}
	if err := b.ReplaceFleet(ctx, other, f); !errors.Is(err, workerid.ErrFleetChanged) {
		t.Fatalf("replacing a record of another map: %v, want ErrFleetChanged", err)
	}
	added := f
	added.Regions = twoRegions + ",north=8-9"
	if err := b.ReplaceFleet(ctx, f, added); err != nil {
		t.Fatalf("replacing the record with an extended map: %v", err)
	}
	if got, err := a.RecordFleet(ctx, f); err != nil || got != added {
		t.Fatalf("after the replacement the store holds %+v, %v; want %+v", got, err, added)
	}
}

// A sealed record reads back sealed with its StartsAfter, compares (for
// ReplaceFleet) only with itself sealed, and unseals.
func testFleetSealed(t *testing.T, s Store) {
	ctx := testwait.Context(t)
	fs := fleetStore(t, s, workerid.ModeLeased)
	first, err := fs.RecordFleet(ctx, testFleet(SmallLayout(), workerid.ModeLeased, "uid"))
	if err != nil {
		t.Fatal(err)
	}
	second := first
	second.Generation, second.StartsAfter = 2, 1_800_000_000
	if err := fs.ReplaceFleet(ctx, first, second); err != nil {
		t.Fatal(err)
	}
	sealed := second
	sealed.Sealed = true
	if err := fs.ReplaceFleet(ctx, second, sealed); err != nil {
		t.Fatal(err)
	}
	got, err := fs.RecordFleet(ctx, first)
	if err != nil || got != sealed {
		t.Fatalf("the sealed record reads %+v, %v; want %+v", got, err, sealed)
	}
	if err := fs.ReplaceFleet(ctx, second, first); !errors.Is(err, workerid.ErrFleetChanged) {
		t.Fatalf("replacing the record unsealed while it is sealed: %v, want ErrFleetChanged", err)
	}
	if err := fs.ReplaceFleet(ctx, sealed, second); err != nil {
		t.Fatal(err)
	}
	if got, err := fs.RecordFleet(ctx, first); err != nil || got != second {
		t.Fatalf("unsealed, the record reads %+v, %v; want %+v", got, err, second)
	}
}

// A record written by a start that should never have written it binds
// every later start to its configuration (RecordFleet returns it). With
// no lease ever reserved, workerid.ResetFleet removes it, and the next
// start records its own. A fleet with a live lease, or one whose leases
// reserved seconds, or a generation recorded by a change, is refused
// (ErrFleetInUse) and its record stays as it was, unsealed.
func testResetFleet(t *testing.T, s Store) {
	ctx := testwait.Context(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	fs := fleetStore(t, s, workerid.ModeLeased)
	if _, found, err := workerid.ResetFleet(ctx, fs, log); err != nil || found {
		t.Fatalf("reset of a store without a record: found %v, %v", found, err)
	}
	stray := testFleet(uidcore.DefaultLayout(), workerid.ModeLeased, "uid")
	if _, err := fs.RecordFleet(ctx, stray); err != nil {
		t.Fatal(err)
	}
	wanted := testFleet(SmallLayout(), workerid.ModeLeased, "uid")
	if got, err := fs.RecordFleet(ctx, wanted); err != nil || got != stray {
		t.Fatalf("the stray record binds later starts: got %+v, %v", got, err)
	}
	removed, found, err := workerid.ResetFleet(ctx, fs, log)
	if err != nil || !found || removed != stray {
		t.Fatalf("reset: removed %+v, found %v, %v; want the stray record", removed, found, err)
	}
	if f, found, err := fs.(workerid.FleetRemover).ReadFleet(ctx); err != nil || found {
		t.Fatalf("after the reset the store holds %+v (found %v, %v)", f, found, err)
	}
	if got, err := fs.RecordFleet(ctx, wanted); err != nil || got != wanted {
		t.Fatalf("the next start after the reset reads %+v, %v; want its own record %+v", got, err, wanted)
	}

	refused := func(what string) {
		t.Helper()
		if _, _, err := workerid.ResetFleet(ctx, fs, log); !errors.Is(err, workerid.ErrFleetInUse) {
			t.Fatalf("reset with %s: %v; want ErrFleetInUse", what, err)
		}
		if got, found, err := fs.(workerid.FleetRemover).ReadFleet(ctx); err != nil || !found || got != wanted {
			t.Fatalf("after a refused reset (%s) the store holds %+v (found %v, %v); want %+v, unsealed", what, got, found, err, wanted)
		}
	}
	c := claim(t, s.New(t, Config(workerid.ModeLeased), s.Addr), SmallLayout())
	refused("a live lease")
	release(t, c)
	refused("a released lease that reserved seconds")

	next := wanted
	next.Generation, next.StartsAfter = 2, time.Now().Unix()
	if err := fs.ReplaceFleet(ctx, wanted, next); err != nil {
		t.Fatal(err)
	}
	wanted = next
	refused("a generation recorded by a change")
}
