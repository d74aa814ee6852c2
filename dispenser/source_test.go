package dispenser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
)

// leaseKey is worker's lease in the KV bucket, with its revision.
func leaseKey(t *testing.T, url, bucket string, worker uint64) (jetstream.KeyValue, string, map[string]any, uint64) {
	t.Helper()
	js, err := jetstream.New(testConn(t, url).Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("lease.%d", worker)
	e, err := kv.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var lease map[string]any
	if err := json.Unmarshal(e.Value(), &lease); err != nil {
		t.Fatal(err)
	}
	return kv, key, lease, e.Revision()
}

// takeOverLease rewrites worker's lease in the KV bucket as an instance
// that took it over would: another owner, valid far into the future. The
// holder's next renewal finds the lease lost for good, and no claim gets
// the worker ID again during the test.
func takeOverLease(t *testing.T, url, bucket string, worker uint64) {
	t.Helper()
	// A renewal between the read and the update moves the revision on:
	// read the lease again and retry.
	testenv.WaitFor(t, 10*time.Second, "the lease taken over", func() bool {
		kv, key, lease, revision := leaseKey(t, url, bucket, worker)
		lease["owner"] = "intruder"
		lease["expires_ms"] = time.Now().Add(time.Hour).UnixMilli()
		b, _ := json.Marshal(lease)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := kv.Update(ctx, key, b, revision)
		return err == nil
	})
}

// holdWorkerIDs claims n worker IDs of cfg's bucket with a real KV
// claimer, released when the test ends: the instances cannot have them.
func holdWorkerIDs(t *testing.T, url string, cfg Config, n int) []uidcore.Claim {
	t.Helper()
	claimer, err := kvstore.NewAssigner(context.Background(), testConn(t, url).Conn, cfg.kvConfig(cfg.workerIDConfig(testLogger())))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var held []uidcore.Claim
	for range n {
		c, err := claimer.Claim(ctx, cfg.Layout())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		t.Cleanup(func() { _ = c.Release(context.Background()) })
	}
	return held
}

// rawLoad takes IDs with plain NATS requests (next, a small batch and a
// bulk batch, which waits in the capacity queue), so that every reply is
// seen: the Go client would retry a 503 and hide it.
type rawLoad struct {
	layout uidcore.Layout
	stop   chan struct{}
	wg     sync.WaitGroup

	mu       sync.Mutex
	ids      []uint64
	byWorker map[uint64]int
	failures []string // error replies and failed requests
}

func startRawLoad(t *testing.T, url string, layout uidcore.Layout, callers int) *rawLoad {
	return startRequests(t, url, layout, callers, rawRequest{"uid.next", ""}, rawRequest{"uid.batch", "50"}, rawRequest{"uid.batch", "3000"})
}

// rawRequest is a request of a raw load: its subject and body.
type rawRequest struct{ subject, body string }

// startRequests is a raw load of callers that each send requests in
// turn (startRawLoad's without the bulk batch: fewer IDs to check).
func startRequests(t *testing.T, url string, layout uidcore.Layout, callers int, requests ...rawRequest) *rawLoad {
	l := &rawLoad{layout: layout, stop: make(chan struct{}), byWorker: map[uint64]int{}}
	runCallers(t, url, callers, l.stop, &l.wg, func(nc *nats.Conn, n int) {
		r := requests[n%len(requests)]
		msg, err := nc.Request(r.subject, []byte(r.body), 10*time.Second)
		l.record(r.subject, msg, err)
	})
	return l
}

// runCallers starts callers goroutines on connections of their own, each
// calling call with its connection and a count from its index up until
// stop is closed.
func runCallers(t *testing.T, url string, callers int, stop <-chan struct{}, wg *sync.WaitGroup, call func(nc *nats.Conn, n int)) {
	for i := range callers {
		nc := testConn(t, url).Conn
		wg.Go(func() {
			for n := i; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				call(nc, n)
			}
		})
	}
}

// decimalReply is a raw request's outcome: its error, the service's
// error status as one, or the reply's decimal values.
func decimalReply(msg *nats.Msg, err error) ([]uint64, error) {
	switch {
	case err != nil:
		return nil, err
	case msg.Header.Get(micro.ErrorCodeHeader) != "":
		return nil, fmt.Errorf("%s %s", msg.Header.Get(micro.ErrorCodeHeader), msg.Header.Get(micro.ErrorHeader))
	}
	return protocol.Decimal.Decode(nil, msg.Data)
}

func (l *rawLoad) record(subject string, msg *nats.Msg, err error) {
	ids, err := decimalReply(msg, err)
	for i := 1; err == nil && i < len(ids); i++ {
		if ids[i] <= ids[i-1] { // one generator's run per reply
			err = fmt.Errorf("reply not increasing: %d after %d", ids[i], ids[i-1])
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failures = append(l.failures, subject+": "+err.Error())
		return
	}
	l.ids = append(l.ids, ids...)
	for _, id := range ids {
		p, err := l.layout.Parse(id)
		if err != nil {
			l.failures = append(l.failures, fmt.Sprintf("%s: %v", subject, err))
			continue
		}
		l.byWorker[p.WorkerID]++
	}
}

// from is how many IDs of worker the load took so far.
func (l *rawLoad) from(worker uint64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byWorker[worker]
}

// finish stops the load and returns what it took and what failed.
func (l *rawLoad) finish() (ids []uint64, failures []string) {
	close(l.stop)
	l.wg.Wait()
	return l.ids, l.failures
}

// Requests in flight while the instance's claim is lost for good and a
// generator on a new worker ID is swapped in are answered with IDs from
// the new generator: no 503 and no duplicate among every ID handed out
// before, across and after the swap. When no worker ID can be claimed,
// the instance leaves the queue group of next and batch (its callers get
// no responders, parse still answers); once one is free again, it serves
// on it.
func TestRequestsCaughtByTheSwapGetIDs(t *testing.T) {
	url := testenv.NATS(t, nil).ClientURL()
	cfg := testConfig(url, "")
	cfg.LeaseTTL = time.Second // renewals, which find the loss, every ~333ms
	// Four worker IDs, one at a time: the test can take every one.
	cfg.TimeBits, cfg.WorkerBits, cfg.SeqBits, cfg.MaxLanes = 40, 2, 21, 1
	// Room for a reclaim on a loaded machine: the requests caught by the
	// swap wait for it up to this long.
	cfg.TakeWait = 3 * time.Second
	d := start(t, cfg)
	layout := cfg.Layout()

	first := d.WorkerID()
	load := startRawLoad(t, url, layout, 4)
	testenv.WaitFor(t, 10*time.Second, "IDs from the first worker ID", func() bool { return load.from(first) >= 5000 })
	takeOverLease(t, url, cfg.WorkerKVBucket, first)
	testenv.WaitFor(t, 10*time.Second, "a new worker ID after the lease was taken over", func() bool { return d.WorkerID() != first })
	second := d.WorkerID()
	testenv.WaitFor(t, 10*time.Second, "IDs from the new worker ID", func() bool { return load.from(second) >= 5000 })
	ids, failures := load.finish()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed across the swap, the first: %s", len(failures), failures[0])
	}
	testenv.CheckDistinct(t, ids)
	t.Logf("%d IDs distinct across the swap from worker %d to %d, no request failed", len(ids), first, second)

	// Lost for good with no worker ID to move to: the other two are
	// held by a real claimer, the instance's own is taken over.
	held := holdWorkerIDs(t, url, cfg, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	takeOverLease(t, url, cfg.WorkerKVBucket, second)
	nc := testConn(t, url).Conn
	testenv.WaitFor(t, 10*time.Second, "the instance to notice the loss", func() bool { return d.claimStatus() != nil })
	// A request NATS gives it before it finds no worker ID free waits
	// out the take wait and gets the documented 503 "worker claim lost";
	// then the instance leaves the queue group of next and batch, and a
	// lone instance's callers get no responders at once (clients retry
	// both).
	msg, err := nc.Request("uid.next", nil, 10*time.Second)
	if err == nil {
		code, desc := msg.Header.Get(micro.ErrorCodeHeader), msg.Header.Get(micro.ErrorHeader)
		if code != "503" || !strings.HasPrefix(desc, "worker claim lost") {
			t.Fatalf("with no worker ID to claim: %q %q %q, want 503 worker claim lost", code, desc, msg.Data)
		}
	} else if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the instance out of the queue group", func() bool {
		_, err := nc.Request("uid.next", nil, 10*time.Second)
		return errors.Is(err, nats.ErrNoResponders)
	})
	if err := d.ready(); err == nil {
		t.Error("/readyz while no worker ID can be claimed: ready")
	}
	// Out of the ID endpoints' group only: parse still answers.
	if msg, err := nc.Request("uid.parse", []byte(fmt.Sprint(ids[0])), 10*time.Second); err != nil || msg.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("parse while not issuing: %v %v", err, msg)
	}

	// A worker ID frees up: the instance moves to it and serves again.
	if err := held[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 15*time.Second, "a new worker ID once one was free", func() bool { return d.WorkerID() == held[0].WorkerID() })
	more, err := uidclient.New(nc, uidclient.Config{}).Batch(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	testenv.CheckDistinct(t, append(ids, more...))
}

// After Close (a shutdown) a take fails at once with ErrClosed, the 503
// "shutting down", instead of waiting the take wait for a replacement
// that will not come; before it, Replace hands the takes the new
// generator and the old one to close.
func TestGeneratorSourceCloseAndReplace(t *testing.T) {
	newGen := func(worker uint64) *uidcore.CachedGenerator {
		g, err := uidcore.NewCached(uidcore.CachedOptions{Claim: uidcore.StaticClaim{ID: worker}, TakeWait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	src := newGeneratorSource(newGen(1), time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	next := func() (uint64, error) {
		var id [1]uint64
		_, err := src.NextN(ctx, id[:])
		return id[0], err
	}
	a, err := next()
	if err != nil {
		t.Fatal(err)
	}
	old := src.Replace(newGen(2))
	if old.WorkerID() != 1 || src.WorkerID() != 2 {
		t.Fatalf("replaced worker %d, now %d", old.WorkerID(), src.WorkerID())
	}
	old.Close()
	b, err := next()
	if err != nil || b == a {
		t.Fatalf("after Replace: %d, %v (before: %d)", b, err, a)
	}
	if p := uidcoretest.MustParse(t, src.Layout().Parse, b); p.WorkerID != 2 {
		t.Fatalf("ID %d from worker %d, want 2", b, p.WorkerID)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	ids := make([]uint64, 1<<20) // more than the ring holds: the take reaches the closed end
	if _, err := src.NextN(ctx, ids); !errors.Is(err, uidcore.ErrClosed) {
		t.Fatalf("take after Close: %v, want ErrClosed", err)
	}
	// The replacement wait is a minute: 30 s is a safety net that still
	// tells the two apart on a loaded machine.
	if took := time.Since(begin); took > 30*time.Second {
		t.Fatalf("take after Close took %s: it waited for a replacement", took)
	}
}
