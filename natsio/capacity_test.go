package natsio

import (
	"context"
	"encoding/binary"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
)

// smallTakeObserver counts the small takes (single IDs and batches of up
// to uidcore.SmallTake) that the ring could not serve at once, so had to
// wait for padding: it tries each without waiting first, which takes
// exactly what NextN would when the ring holds enough.
type smallTakeObserver struct {
	IDSource
	small, waited atomic.Uint64
}

func (o *smallTakeObserver) NextN(ctx context.Context, dst []uint64) (int, error) {
	if len(dst) > uidcore.SmallTake {
		return o.IDSource.NextN(ctx, dst)
	}
	o.small.Add(1)
	if got, err := o.IDSource.TryNextN(dst); err != nil || got == len(dst) {
		return got, err
	}
	o.waited.Add(1)
	return o.IDSource.NextN(ctx, dst)
}

// An instance whose one lane sustains 16,384 IDs/s, with bulk callers
// asking for far more: it must still hand out its whole capacity, answer
// single IDs and small batches of other callers without an error and from
// the reserve bulk takes leave them (not after waiting for padding, as a
// bulk batch does), and tell bulk callers its rate when they must back
// off. Whether small requests are served at once is counted, not timed,
// so a loaded machine does not fail it; latency is for the benchmarks
// (BenchmarkQueueGroup's p99).
func TestAtCapacitySmallRequestsStayFastAndBulkGetsTheRest(t *testing.T) {
	url := startNATS(t, nil)
	layout := uidcore.Layout{TimeBits: 41, WorkerBits: 8, SeqBits: 14, Epoch: uidcore.DefaultEpoch}
	var log testenv.LogBuffer
	var obs *smallTakeObserver
	startInstance(t, url, 2, instanceOpts{cached: uidcore.CachedOptions{
		Layout: layout, RingSeconds: 2, MaxAhead: time.Second, TakeWait: 800 * time.Millisecond,
	}, service: ServiceConfig{Logger: log.Logger(slog.LevelInfo)},
		source: func(g *uidcore.CachedGenerator) IDSource {
			obs = &smallTakeObserver{IDSource: g}
			return obs
		}})
	const run = 3 * time.Second
	var mu sync.Mutex
	var all []uint64
	keep := func(ids []uint64) {
		mu.Lock()
		all = append(all, ids...)
		mu.Unlock()
	}
	end := time.Now().Add(run)
	var wg sync.WaitGroup
	var bulkOK, bulk503 int
	var bulkDesc string
	for range 2 {
		nc := connect(t, url)
		wg.Go(func() {
			for time.Now().Before(end) {
				msg, err := nc.RequestMsg(&nats.Msg{Subject: "uid.batch", Data: []byte("4096"),
					Header: nats.Header{protocol.EncodingHeader: {protocol.EncodingBinary}}}, 2*time.Second)
				if err != nil {
					t.Errorf("bulk request: %v", err)
					return
				}
				mu.Lock()
				if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
					bulk503++
					bulkDesc = code + " " + msg.Header.Get(micro.ErrorHeader)
				} else {
					bulkOK++
				}
				mu.Unlock()
				keep(decodeBinary(msg.Data))
			}
		})
	}
	var small int
	var smallErrors []string
	for _, req := range []struct{ subject, body string }{{"uid.next", ""}, {"uid.batch", "16"}, {"uid.batch", "64"}} {
		nc := connect(t, url)
		wg.Go(func() {
			for time.Now().Before(end) {
				msg, err := nc.Request(req.subject, []byte(req.body), 2*time.Second)
				mu.Lock()
				small++
				switch {
				case err != nil:
					smallErrors = append(smallErrors, err.Error())
				case msg.Header.Get(micro.ErrorCodeHeader) != "":
					smallErrors = append(smallErrors, msg.Header.Get(micro.ErrorCodeHeader)+" "+msg.Header.Get(micro.ErrorHeader))
				default:
					for _, f := range strings.Fields(string(msg.Data)) {
						id, err := strconv.ParseUint(f, 10, 64)
						if err != nil {
							smallErrors = append(smallErrors, "reply "+strconv.Quote(f)+" is not an ID")
							continue
						}
						all = append(all, id)
					}
				}
				mu.Unlock()
				time.Sleep(50 * time.Millisecond) // 1,620 IDs/s in all: a tenth of the capacity
			}
		})
	}
	wg.Wait()
	if len(smallErrors) > 0 {
		t.Errorf("%d of %d small requests failed, e.g. %q", len(smallErrors), small, smallErrors[0])
	}
	// One in a hundred may meet a ring that bulk takes emptied before the
	// instance knew it was throttled (the first moments of the run).
	waited, taken := obs.waited.Load(), obs.small.Load()
	if taken < uint64(small) || waited > taken/100 {
		t.Errorf("%d of %d small takes (%d requests) waited for padding while bulk callers saturate the instance, want at most 1%%",
			waited, taken, small)
	}
	testenv.CheckDistinct(t, all)
	// The whole capacity, counted by the IDs' own seconds rather than by
	// the wall clock of a machine that may be loaded: no second holds more
	// than the lane's 16,384, and the callers saturating the instance took
	// every ID of some second.
	perSecond := map[int64]int{}
	for _, id := range all {
		perSecond[uidcoretest.MustParse(t, layout.Parse, id).Time.Unix()]++
	}
	full := 0
	for sec, n := range perSecond {
		if n > 16384 {
			t.Errorf("second %d: %d IDs, more than the lane's 16384", sec, n)
		}
		if n == 16384 {
			full++
		}
	}
	if full == 0 {
		t.Errorf("no second of the %d handed out all 16384 of its IDs (%v): the instance's capacity was not used", len(perSecond), perSecond)
	}
	if bulkOK == 0 || (bulk503 > 0 && !strings.Contains(bulkDesc, "sustains 16384 IDs/s")) {
		t.Errorf("bulk: %d answered, %d 503 (last %q)", bulkOK, bulk503, bulkDesc)
	}
	if !strings.Contains(log.String(), "at capacity: demand exceeds what this instance sustains") {
		t.Errorf("saturated for %s and no at-capacity line in the log:\n%s", run, log.String())
	}
	t.Logf("%d IDs in %s; %d of %d small takes waited; bulk %d answered, %d 503", len(all), run, waited, taken, bulkOK, bulk503)
}

// A bulk batch larger than what padding keeps ready waits for the rest
// while the instance is far below its capacity: it gets its IDs, and the
// log does not call it capacity (an operator would add instances for
// nothing).
func TestBulkWaitBelowCapacityIsNotLoggedAsCapacity(t *testing.T) {
	url := startNATS(t, nil)
	// 2^20 IDs/s per lane and 4 s ahead: 100,000 IDs are a tenth of a
	// second's capacity, but more than the 65,536 a fresh ring holds.
	layout := uidcore.Layout{TimeBits: 37, WorkerBits: 6, SeqBits: 20, Epoch: uidcore.DefaultEpoch}
	var log testenv.LogBuffer
	inst := startInstance(t, url, 1, instanceOpts{cached: uidcore.CachedOptions{
		Layout: layout, RingSeconds: 1, MaxAhead: 4 * time.Second, TakeWait: 800 * time.Millisecond,
	}, service: ServiceConfig{Logger: log.Logger(slog.LevelInfo), CapacityWait: 5 * time.Second}})
	nc := connect(t, url)
	binary := nats.Header{protocol.EncodingHeader: {protocol.EncodingBinary}}
	var all []uint64
	for range 3 {
		msg, err := nc.RequestMsg(&nats.Msg{Subject: "uid.batch", Data: []byte("100000"), Header: binary}, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
			t.Fatalf("bulk batch below capacity: %s %s", code, msg.Header.Get(micro.ErrorHeader))
		}
		all = append(all, decodeBinary(msg.Data)...)
		if len(all) == 100_000 && inst.svc.capacity.deferredInRun() == 0 {
			t.Fatal("the first bulk batch did not wait: the test does not make its case")
		}
	}
	if len(all) != 300_000 {
		t.Fatalf("%d IDs, want 300000", len(all))
	}
	testenv.CheckDistinct(t, all)
	if strings.Contains(log.String(), "at capacity") {
		t.Errorf("a wait below capacity was logged as capacity:\n%s", log.String())
	}
}

// At one request a second an ID carries the current second or the one
// before, never what the ring was filled with seconds ago.
func TestLowLoadIDsCarryTheCurrentSecond(t *testing.T) {
	url := startNATS(t, nil)
	startInstance(t, url, 3, instanceOpts{})
	nc := connect(t, url)
	for range 4 {
		// Bounds from the request's own start and end, not a latency: a
		// slow reply on a loaded machine widens them instead of failing.
		asked := time.Now().Unix()
		msg, err := nc.Request("uid.next", nil, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		answered := time.Now().Unix()
		id, _ := strconv.ParseUint(string(msg.Data), 10, 64)
		p, err := uidcore.DefaultLayout().Parse(id)
		if err != nil {
			t.Fatal(err)
		}
		// The second before the request's is the oldest a fresh ID may
		// carry; the ahead bound (2 s, as padding runs ahead) the newest.
		if sec := p.Time.Unix(); sec < asked-1 || sec > answered+2 {
			t.Errorf("ID of second %d for a request asked at %d, answered at %d", sec, asked, answered)
		}
		time.Sleep(time.Second) // the pace under test: one request a second
	}
}

func decodeBinary(b []byte) []uint64 {
	ids := make([]uint64, len(b)/8)
	for i := range ids {
		ids[i] = binary.BigEndian.Uint64(b[i*8:])
	}
	return ids
}
