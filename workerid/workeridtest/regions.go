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

// twoRegions splits SmallLayout's 8 worker IDs in two.
const twoRegions = "east=0-3,west=4-7"

// regionConfig is the leased configuration of an instance of region.
func regionConfig(t testing.TB, region string) workerid.Config {
	t.Helper()
	m, err := workerid.ParseRegions(twoRegions)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config(workerid.ModeLeased)
	cfg.Region, cfg.Regions = region, m
	return cfg
}

// testRegionsConcurrentClaimers: instances of two regions claiming at
// once on one store, more of them than the ranges hold, get worker IDs
// only inside their own region's range, never one twice, and the
// surplus fails with ErrWorkerIDsExhausted (never spilling into the other
// region's range).
func testRegionsConcurrentClaimers(t *testing.T, st Store) {
	const perRegion = 6 // the ranges hold 4 each
	regions := []string{"east", "west"}
	type result struct {
		region string
		claim  uidcore.Claim
		err    error
	}
	var assigners []uidcore.Assigner
	var of []string
	for _, r := range regions {
		for range perRegion {
			assigners = append(assigners, st.New(t, regionConfig(t, r), st.Addr))
			of = append(of, r)
		}
	}
	results := make([]result, len(assigners))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, a := range assigners {
		wg.Go(func() {
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := a.Claim(ctx, SmallLayout())
			results[i] = result{of[i], c, err}
		})
	}
	close(start)
	wg.Wait()
	owner := map[uint64]string{}
	granted := map[string]int{}
	for _, r := range results {
		if r.err != nil {
			if !errors.Is(r.err, workerid.ErrWorkerIDsExhausted) {
				t.Errorf("%s: %v, want ErrWorkerIDsExhausted or a worker ID", r.region, r.err)
			}
			continue
		}
		id := r.claim.WorkerID()
		span, _ := regionConfig(t, r.region).WorkerRange(SmallLayout())
		if !span.Contains(id) {
			t.Errorf("%s got worker ID %d, outside its range %s", r.region, id, span)
		}
		if o, dup := owner[id]; dup {
			t.Errorf("worker ID %d handed out twice (%s and %s)", id, o, r.region)
		}
		owner[id] = r.region
		granted[r.region]++
	}
	for _, r := range regions {
		if granted[r] != 4 {
			t.Errorf("%s: %d worker IDs granted, want its whole range of 4", r, granted[r])
		}
	}
	for _, r := range results {
		if r.claim != nil {
			release(t, r.claim)
		}
	}
}

// testRegionsLanes: a generator of each region on one store grows to as
// many lanes as its range holds; every lane is inside the region's range
// and the IDs both issue meanwhile are unique.
func testRegionsLanes(t *testing.T, st Store) {
	layout := SmallLayout()
	type instance struct {
		span workerid.WorkerRange
		g    *uidcore.CachedGenerator
		ids  []uint64
	}
	var insts []*instance
	for _, r := range []string{"east", "west"} {
		cfg := regionConfig(t, r)
		a := st.New(t, cfg, st.Addr)
		span, err := cfg.WorkerRange(layout)
		if err != nil {
			t.Fatal(err)
		}
		first := claim(t, a, layout)
		t.Cleanup(func() { release(t, first) }) // the caller's lane, after Close
		g, err := uidcore.NewCached(uidcore.CachedOptions{Layout: layout, Claim: first, Lanes: a,
			MaxLanes: int(span.Len()) + 2, TakeWait: 2 * time.Second, MaxAhead: uidcore.NoAheadBound})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		insts = append(insts, &instance{span: span, g: g})
	}
	// Demand beyond one lane's 256 IDs a second makes each generator claim
	// lanes until its range is exhausted.
	testwait.WaitFor(t, 20*time.Second, "each region's generator to hold every worker ID of its range", func() bool {
		full := true
		for _, in := range insts {
			dst := make([]uint64, 512)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			n, _ := in.g.NextN(ctx, dst)
			cancel()
			in.ids = append(in.ids, dst[:n]...)
			full = full && uint64(len(in.g.State().Lanes)) == in.span.Len()
		}
		return full
	})
	seen := map[uint64]bool{}
	for _, in := range insts {
		for _, w := range in.g.State().Lanes {
			if !in.span.Contains(w) {
				t.Errorf("lane on worker ID %d, outside the region's range %s", w, in.span)
			}
		}
		for _, id := range in.ids {
			p := uidcoretest.MustParse(t, layout.Parse, id)
			if !in.span.Contains(p.WorkerID) {
				t.Fatalf("ID %d has worker ID %d, outside the region's range %s", id, p.WorkerID, in.span)
			}
			if seen[id] {
				t.Fatalf("ID %d issued twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) == 0 {
		t.Fatal("no IDs issued")
	}
	t.Logf("%d IDs from two regions' generators, lanes %v and %v", len(seen), insts[0].g.State().Lanes, insts[1].g.State().Lanes)
}
