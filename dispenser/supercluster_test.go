package dispenser

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/supercluster"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

const eastWest = "east=0-511,west=512-1023"

// regionOf is the region whose range holds id's worker ID.
func regionOf(t testing.TB, id uint64) string {
	t.Helper()
	m, _ := workerid.ParseRegions(eastWest)
	p, _ := uidcore.DefaultLayout().Parse(id)
	r, ok := m.Of(p.WorkerID)
	if !ok {
		t.Fatalf("ID %d has worker ID %d, in no region", id, p.WorkerID)
	}
	return r
}

// twoRegions starts a supercluster of east and west with one dispenser
// in each, on the cluster's own server, and checks that each region's
// bucket is placed in its own cluster.
func twoRegions(t *testing.T) (*supercluster.Supercluster, map[string]*Dispenser) {
	sc := supercluster.Start(t, "east", "west")
	ds := map[string]*Dispenser{}
	for _, region := range []string{"east", "west"} {
		c := sc.Cluster(region)
		ds[region] = start(t, withRegions(t, testConfig(c.URL, ""), region, eastWest))
		js, _ := jetstream.New(c.Connect(t))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		kv, err := js.KeyValue(ctx, "uid_workers_"+region)
		if err != nil {
			cancel()
			t.Fatalf("%s's bucket: %v", region, err)
		}
		st, err := kv.Status(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if placed := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Cluster.Name; placed != region {
			t.Fatalf("%s's bucket is placed in cluster %q", region, placed)
		}
	}
	return sc, ds
}

// timedCalls makes n calls one after another and returns the IDs and
// each call's latency.
func timedCalls(t *testing.T, c *uidclient.Client, n int) ([]uint64, []time.Duration) {
	t.Helper()
	var ids []uint64
	var took []time.Duration
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		begin := time.Now()
		id, err := c.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		took = append(took, time.Since(begin))
		ids = append(ids, id)
	}
	slices.Sort(took)
	return ids, took
}

// With a WAN-like 30 ms each way on the gateway: a client is served by
// its own region's dispenser (the IDs' worker IDs say which, and the
// latency is below a gateway round trip); once every dispenser of its
// region is gone, it is served by the other region through the gateway,
// with no change on its side, and the latency shows the round trip.
func TestRegionsServeLocallyAndFailOver(t *testing.T) {
	sc, ds := twoRegions(t)
	const delay = 30 * time.Millisecond
	sc.Delay(delay)
	clients := map[string]*uidclient.Client{}
	var all []uint64
	for _, region := range []string{"east", "west"} {
		clients[region] = client(t, sc.Cluster(region).URL)
		ids, took := timedCalls(t, clients[region], 40)
		for _, id := range ids {
			if r := regionOf(t, id); r != region {
				t.Fatalf("a client in %s was served by %s", region, r)
			}
		}
		// Any call crossing the gateway takes at least its round trip.
		if p50 := took[len(took)/2]; p50 >= 2*delay {
			t.Errorf("%s: p50 of local calls %s, not below a gateway round trip (%s)", region, p50, 2*delay)
		}
		t.Logf("%s, local: p50 %s, max %s", region, took[len(took)/2], took[len(took)-1])
		all = append(all, ids...)
	}
	shutdown(t, ds["east"])
	// The client notices nothing but the latency: the first calls may
	// still find east's departing subscription, so wait for west.
	testenv.WaitFor(t, 20*time.Second, "east's client to be served by west", func() bool {
		ids, _ := timedCalls(t, clients["east"], 1)
		all = append(all, ids...)
		return regionOf(t, ids[0]) == "west"
	})
	ids, took := timedCalls(t, clients["east"], 20)
	for _, id := range ids {
		if r := regionOf(t, id); r != "west" {
			t.Fatalf("with east's dispensers gone, east's client was served by %s", r)
		}
	}
	if took[0] < 2*delay {
		t.Errorf("a failed-over call took %s, less than a gateway round trip (%s)", took[0], 2*delay)
	}
	t.Logf("east, failed over to west: p50 %s, min %s, max %s", took[len(took)/2], took[0], took[len(took)-1])
	checkDistinct(t, append(all, ids...))
}

// With the gateway cut, both regions go on serving their clients and
// renewing their leases in their own buckets; the IDs of both regions,
// before, during and after the cut, have no duplicate.
func TestRegionsServeThroughACutGateway(t *testing.T) {
	sc, ds := twoRegions(t)
	var mu sync.Mutex
	var all []uint64
	take := func(region string, n int) {
		t.Helper()
		ids := collect(t, client(t, sc.Cluster(region).URL), 4, n, nil)
		for _, id := range ids {
			if r := regionOf(t, id); r != region {
				t.Fatalf("a client in %s was served by %s", region, r)
			}
		}
		mu.Lock()
		all = append(all, ids...)
		mu.Unlock()
	}
	take("east", 200)
	take("west", 200)
	revisions := map[string]uint64{}
	leaseRevision := func(region string) uint64 {
		js, _ := jetstream.New(sc.Cluster(region).Connect(t))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		kv, err := js.KeyValue(ctx, "uid_workers_"+region)
		if err != nil {
			return 0
		}
		e, err := kv.Get(ctx, "lease."+strconv.FormatUint(ds[region].WorkerID(), 10))
		if err != nil {
			return 0
		}
		return e.Revision()
	}
	for _, r := range []string{"east", "west"} {
		revisions[r] = leaseRevision(r)
	}
	sc.Cut(t)
	var wg sync.WaitGroup
	for _, r := range []string{"east", "west"} {
		wg.Go(func() { take(r, 500) })
	}
	wg.Wait()
	for _, r := range []string{"east", "west"} {
		testenv.WaitFor(t, 10*time.Second, r+"'s lease to be renewed in its own bucket during the cut", func() bool {
			return leaseRevision(r) > revisions[r]
		})
	}
	take("east", 200)
	take("west", 200)
	sc.Heal(t)
	take("east", 200)
	take("west", 200)
	checkDistinct(t, all)
	t.Logf("%d IDs from both regions, before, during and after the cut: no duplicate", len(all))
}
