package dispenser

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/supercluster"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// homedSequences declares orders in east and invoices in west, the same
// value on every instance of both regions.
const homedSequences = "orders@east,invoices@west=1000"

// homedRegions starts a supercluster of east and west with one dispenser
// in each, both declaring homedSequences with small segments (so that a
// run takes several), and a client in each region. On MySQL each region
// has a database of its own. storeNames lists the sequences a region's
// store holds.
func homedRegions(t *testing.T, onMySQL bool) (sc *supercluster.Supercluster, ds map[string]*Dispenser, clients map[string]*uidclient.Client, storeNames func(region string) []string) {
	sc = supercluster.Start(t, "east", "west")
	ds, clients = map[string]*Dispenser{}, map[string]*uidclient.Client{}
	dsns := map[string]string{}
	for _, region := range []string{"east", "west"} {
		if onMySQL {
			dsns[region] = testenv.MySQL(t)
		}
		cfg := withRegions(t, testConfig(sc.Cluster(region).URL, dsns[region]), region, eastWest)
		cfg.Sequences, cfg.SequenceStep, cfg.SequenceMaxStep = homedSequences, 50, 50
		ds[region] = start(t, cfg)
		// One attempt per call (the calls' deadlines are 10 s): a number
		// is lost only in a reply the client gave up on, and the tests
		// check that none is skipped.
		clients[region] = uidclient.New(testConn(t, sc.Cluster(region).URL).Conn, uidclient.Config{AttemptTimeout: 10 * time.Second, HomeWait: 300 * time.Millisecond})
	}
	storeNames = func(region string) []string {
		if onMySQL {
			return mysqlSequenceNames(t, dsns[region])
		}
		return kvSequenceNames(t, sc.Cluster(region), "uid_workers_"+region)
	}
	return sc, ds, clients, storeNames
}

// kvSequenceNames are the sequences (keys seq.<name>) of a bucket.
func kvSequenceNames(t *testing.T, c *supercluster.Cluster, bucket string) []string {
	t.Helper()
	js, _ := jetstream.New(c.Connect(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeysFiltered(ctx, "seq.>")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range keys.Keys() {
		names = append(names, strings.TrimPrefix(k, "seq."))
	}
	return names
}

// mysqlSequenceNames are the sequences of a database's UID_SEQUENCE.
func mysqlSequenceNames(t *testing.T, dsn string) []string {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT BIZ_TAG FROM UID_SEQUENCE ORDER BY BIZ_TAG")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// homeNumbers collects a sequence's numbers with the instance that
// answered each: every one must come from the home's instance.
type homeNumbers struct {
	mu   sync.Mutex
	nums map[string][]uint64 // by sequence
}

// take has each region's client take rounds batches of 3 and rounds
// single numbers of each sequence, all regions at once, and checks that
// the home region's instance answered every one.
func (h *homeNumbers) take(t *testing.T, ds map[string]*Dispenser, clients map[string]*uidclient.Client, rounds int) {
	t.Helper()
	homes := map[string]string{"orders": "east", "invoices": "west"}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, c := range clients {
		for name, home := range homes {
			wg.Go(func() {
				for range rounds {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					nums, inst, err := c.SeqBatchFrom(ctx, name, 3)
					var one uint64
					var inst2 string
					if err == nil {
						one, inst2, err = c.SeqNextFrom(ctx, name)
					}
					cancel()
					if err != nil {
						errs <- err
						return
					}
					if want := ds[home].ServiceID(); inst != want || inst2 != want {
						errs <- errors.New(name + " answered by an instance not of its home " + home + ": " + inst + " " + inst2)
						return
					}
					h.mu.Lock()
					h.nums[name] = append(append(h.nums[name], nums...), one)
					h.mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// checkDense: with one instance in the home region, every number of a
// sequence is handed out once and none is skipped, from its first number
// on: no duplicate across the regions' callers and no gap between the
// segments (one instance takes them all, one after another).
func (h *homeNumbers) checkDense(t *testing.T) {
	t.Helper()
	for name, first := range map[string]uint64{"orders": 1, "invoices": 1000} {
		nums := slices.Clone(h.nums[name])
		slices.Sort(nums)
		for i, n := range nums {
			if n != first+uint64(i) {
				t.Fatalf("%s: the %d numbers from both regions are not %d.. dense: at %d found %d", name, len(nums), first, i, n)
			}
		}
		t.Logf("%s: %d numbers from both regions, %d..%d, dense, no duplicate", name, len(nums), first, nums[len(nums)-1])
	}
}

// wantHomeUnreachable: a call of c for name fails with the typed error
// naming home after the client's HomeWait, well before its deadline.
func wantHomeUnreachable(t *testing.T, c *uidclient.Client, name, home string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.SeqNext(ctx, name)
	var he *uidclient.HomeUnreachableError
	if !errors.As(err, &he) || !errors.Is(err, uidclient.ErrHomeUnreachable) || he.Home != home || he.Sequence != name ||
		!strings.Contains(err.Error(), "home region "+home) || ctx.Err() != nil {
		t.Fatalf("%s with its home %s unreachable: %v (deadline: %v), want a HomeUnreachableError naming %s before the deadline", name, home, err, ctx.Err(), home)
	}
	if _, err := c.SeqBatch(ctx, name, 2); !errors.As(err, &he) || he.Home != home {
		t.Fatalf("%s batch with its home %s unreachable: %v", name, home, err)
	}
}

// A sequence homed in a region lives in that region's store alone and is
// answered by its instances only, from both regions (NATS routes the
// other region's requests through the gateway). With the gateway cut,
// each home region's callers are still served and the other region's
// get the typed error naming the home; healed, both are served again.
// The numbers collected from both regions throughout are dense and have
// no duplicate.
func TestRegionsHomedSequencesThroughACutGateway(t *testing.T) {
	t.Run("KV", func(t *testing.T) { homedThroughACut(t, false) })
	t.Run("MySQL", func(t *testing.T) { homedThroughACut(t, true) })
}

func homedThroughACut(t *testing.T, onMySQL bool) {
	sc, ds, clients, storeNames := homedRegions(t, onMySQL)
	for region, want := range map[string]string{"east": "orders", "west": "invoices"} {
		if got := storeNames(region); !slices.Equal(got, []string{want}) {
			t.Fatalf("%s's store holds the sequences %v, want only its own %s", region, got, want)
		}
	}
	h := &homeNumbers{nums: map[string][]uint64{}}
	h.take(t, ds, clients, 60)

	sc.Cut(t)
	// Each home's own callers are served.
	for _, c := range []struct{ region, name string }{{"east", "orders"}, {"west", "invoices"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		nums, err := clients[c.region].SeqBatch(ctx, c.name, 5)
		cancel()
		if err != nil {
			t.Fatalf("%s's own caller during the cut: %v", c.name, err)
		}
		h.nums[c.name] = append(h.nums[c.name], nums...)
	}
	wantHomeUnreachable(t, clients["west"], "orders", "east")
	wantHomeUnreachable(t, clients["east"], "invoices", "west")

	sc.Heal(t)
	for _, c := range []struct{ region, name string }{{"west", "orders"}, {"east", "invoices"}} {
		testenv.WaitFor(t, 30*time.Second, c.region+"'s caller of "+c.name+" served again after the heal", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			n, err := clients[c.region].SeqNext(ctx, c.name)
			if err == nil {
				h.nums[c.name] = append(h.nums[c.name], n)
			}
			return err == nil
		})
	}
	h.take(t, ds, clients, 60)
	h.checkDense(t)
}

// With every dispenser of a sequence's home region gone, callers of both
// regions get the typed error naming the home (the surviving region's
// instance answers where the home is), while the other region's own
// sequence is still served; the numbers handed out have no duplicate.
func TestRegionsHomedSequenceWithItsHomeGone(t *testing.T) {
	_, ds, clients, _ := homedRegions(t, false)
	h := &homeNumbers{nums: map[string][]uint64{}}
	h.take(t, ds, clients, 30)
	shutdown(t, ds["east"])
	for _, region := range []string{"west", "east"} {
		wantHomeUnreachable(t, clients[region], "orders", "east")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		n, inst, err := clients[region].SeqNextFrom(ctx, "invoices")
		cancel()
		if err != nil || inst != ds["west"].ServiceID() {
			t.Fatalf("%s's caller of invoices with east gone: %d from %q, %v", region, n, inst, err)
		}
		h.nums["invoices"] = append(h.nums["invoices"], n)
	}
	// A sequence declared nowhere is still a 404, not a lost home.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := clients["west"].SeqNext(ctx, "nosuch"); !errors.Is(err, uidclient.ErrNotFound) || ctx.Err() != nil {
		t.Fatalf("a sequence declared nowhere: %v, want a 404 at once", err)
	}
	h.checkDense(t)
}
