package dispenser

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/supercluster"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

const eastWest = "east=0-511,west=512-1023"

// regionOf is the region whose range holds id's worker ID.
func regionOf(t testing.TB, id uint64) string {
	t.Helper()
	m, _ := workerid.ParseRegions(eastWest)
	p := uidcoretest.MustParse(t, uidcore.DefaultLayout().Parse, id)
	r, ok := m.Of(p.WorkerID)
	if !ok {
		t.Fatalf("ID %d has worker ID %d, in no region", id, p.WorkerID)
	}
	return r
}

// twoRegions starts a supercluster of east and west with one dispenser
// in each (with blocks, if asked), on the cluster's own server, and
// checks that each region's bucket (and blocks stream) is placed in its
// own cluster.
func twoRegions(t *testing.T, blocks bool) (*supercluster.Supercluster, map[string]*Dispenser) {
	sc := supercluster.Start(t, "east", "west")
	ds := map[string]*Dispenser{}
	for _, region := range []string{"east", "west"} {
		c := sc.Cluster(region)
		cfg := withRegions(t, testConfig(c.URL, ""), region, eastWest)
		streams := []string{"KV_uid_workers_" + region}
		if blocks {
			cfg = withBlocks(cfg)
			streams = append(streams, protocol.DefaultBlocksStream+"_"+region)
		}
		ds[region] = start(t, cfg)
		js, _ := jetstream.New(c.Connect(t))
		for _, name := range streams {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			s, err := js.Stream(ctx, name)
			cancel()
			if err != nil {
				t.Fatalf("%s's stream %s: %v", region, name, err)
			}
			if info := s.CachedInfo(); info.Cluster == nil || info.Cluster.Name != region {
				t.Fatalf("%s's stream %s is placed in %+v", region, name, info.Cluster)
			}
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
	sc, ds := twoRegions(t, false)
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
	testenv.CheckDistinct(t, append(all, ids...))
}

// With the gateway cut, both regions go on serving their clients, their
// block consumers (pulling from the region's own stream) and renewing
// their leases in their own buckets; the IDs of both regions, requests
// and blocks, before, during and after the cut, have no duplicate.
func TestRegionsServeThroughACutGateway(t *testing.T) {
	sc, ds := twoRegions(t, true)
	var all []uint64
	regions := []string{"east", "west"}
	clients, sources := map[string]*uidclient.Client{}, map[string]*uidclient.BlockSource{}
	for _, r := range regions {
		clients[r] = client(t, sc.Cluster(r).URL)
		sources[r] = blockSourceOf(t, sc.Cluster(r).URL, protocol.DefaultBlocksStream+"_"+r)
	}
	// round has every region's client and block source take IDs at once;
	// each must get only its own region's.
	round := func(requests int) {
		t.Helper()
		got := make([][]uint64, 2*len(regions))
		var wg sync.WaitGroup
		for i, r := range regions {
			wg.Go(func() { got[2*i] = collect(t, clients[r], 4, requests, nil) })
			wg.Go(func() { got[2*i+1] = takeBlocks(t, 3000, sources[r]) })
		}
		wg.Wait()
		for i, ids := range got {
			for _, id := range ids {
				if r := regionOf(t, id); r != regions[i/2] {
					t.Fatalf("a caller in %s got an ID of %s", regions[i/2], r)
				}
			}
			all = append(all, ids...)
		}
	}
	round(200)
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
	for _, r := range regions {
		revisions[r] = leaseRevision(r)
	}
	sc.Cut(t)
	round(500)
	for _, r := range regions {
		testenv.WaitFor(t, 10*time.Second, r+"'s lease to be renewed in its own bucket during the cut", func() bool {
			return leaseRevision(r) > revisions[r]
		})
	}
	round(200)
	sc.Heal(t)
	round(200)
	testenv.CheckDistinct(t, all)
	t.Logf("%d IDs from both regions, before, during and after the cut: no duplicate", len(all))
}

// At start-up an instance compares the fleet records of the other
// regions it reaches: another configuration than east's is refused in
// west, naming east's store, before west records anything; west then
// starts with the fleet's configuration. (A region cut off is logged and
// skipped; with two clusters a cut also leaves the JetStream meta group
// without quorum, and a start needs it to create consumers, so that case
// is not tested here: see docs/operations.md.)
func TestRegionsCompareOtherRegionsRecords(t *testing.T) {
	sc := supercluster.Start(t, "east", "west")
	start(t, withRegions(t, testConfig(sc.Cluster("east").URL, ""), "east", eastWest))
	west := withRegions(t, testConfig(sc.Cluster("west").URL, ""), "west", eastWest)
	other := west
	other.SubjectPrefix = "ids"
	err := startErr(other)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Var != "DISPENSER_SUBJECT_PREFIX" || !strings.Contains(err.Error(), "region east's store") {
		t.Fatalf("west with another prefix than east's record: %v, want a ConfigError naming east's store", err)
	}
	// West's own store took nothing from the refused instance.
	d := start(t, west)
	if w := d.WorkerID(); w < 512 || w > 1023 {
		t.Fatalf("west's worker ID %d", w)
	}
	testenv.CheckDistinct(t, collect(t, client(t, sc.Cluster("west").URL), 2, 100, nil))
}
