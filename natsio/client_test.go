package natsio

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// loadResult is what the clients of a load run collected.
type loadResult struct {
	mu         sync.Mutex
	ids        []uint64
	errs       []error
	maxLatency time.Duration
	calls      atomic.Int64
	// timedOut sums the clients' attempts that timed out (ClientStats),
	// once each client is done.
	timedOut atomic.Uint64
}

func (r *loadResult) add(ids []uint64, err error, latency time.Duration) {
	r.calls.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, ids...)
	if err != nil {
		r.errs = append(r.errs, err)
	}
	r.maxLatency = max(r.maxLatency, latency)
}

// runClients runs n clients that each loop until stop is closed or they
// have taken perClient IDs (0: no limit), mixing next and batch calls,
// every call bounded by callTimeout.
func runClients(t *testing.T, url string, n, perClient int, batch int, callTimeout time.Duration, opts uidclient.Config, stop <-chan struct{}) *loadResult {
	t.Helper()
	res, wait := startClients(t, url, n, perClient, batch, callTimeout, opts, stop)
	wait()
	return res
}

// startClients is runClients in the background: it connects the clients
// on the test's goroutine (where a failed connect may end the test),
// starts them and returns their result, which fills as they go, and a
// wait for them to finish. The clients' goroutines only record.
func startClients(t *testing.T, url string, n, perClient int, batch int, callTimeout time.Duration, opts uidclient.Config, stop <-chan struct{}) (res *loadResult, wait func()) {
	t.Helper()
	res = &loadResult{}
	var wg sync.WaitGroup
	for c := range n {
		conn := connect(t, url)
		client := uidclient.New(conn.Conn, opts)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { res.timedOut.Add(client.Stats().TimedOut) }()
			taken := 0
			for i := 0; perClient == 0 || taken < perClient; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				start := time.Now()
				var ids []uint64
				var err error
				if (i+c)%4 == 0 {
					var id uint64
					if id, err = client.Next(ctx); err == nil {
						ids = []uint64{id}
					}
				} else {
					ids, err = client.Batch(ctx, batch)
				}
				cancel()
				res.add(ids, err, time.Since(start))
				taken += len(ids)
			}
		}()
	}
	return res, wg.Wait
}

// loadThroughFault runs 16 clients against the instances, waits until
// every instance serves them, runs fault, waits until the load has moved
// on by 20 calls a client (well past any attempt timeout), then stops the
// clients and returns what they got.
func loadThroughFault(t *testing.T, url string, instances []*instance, callTimeout time.Duration, opts uidclient.Config, fault func()) *loadResult {
	t.Helper()
	stop := make(chan struct{})
	res, wait := startClients(t, url, 16, 0, 500, callTimeout, opts, stop)
	defer func() {
		close(stop)
		wait()
	}()
	testenv.WaitFor(t, 10*time.Second, "every instance serves the load", func() bool {
		for _, i := range instances {
			if i.served() < 20 {
				return false
			}
		}
		return true
	})
	fault()
	at := res.calls.Load()
	testenv.WaitFor(t, 10*time.Second, "the load moves on after the fault", func() bool { return res.calls.Load() >= at+16*20 })
	return res
}

// served is how many successful replies an instance has sent.
func (i *instance) served() uint64 {
	var n uint64
	for _, c := range i.svc.endpoints {
		n += c.ok.Load()
	}
	return n
}

func TestThreeInstancesSixteenClientsMillionIDs(t *testing.T) {
	url := startNATS(t, nil)
	for w := range uint64(3) {
		startInstance(t, url, w+1, instanceOpts{})
	}
	const clients, perClient = 16, 62_500 // 1,000,000 IDs
	res := runClients(t, url, clients, perClient, 5000, 10*time.Second, uidclient.Config{}, nil)
	if len(res.errs) > 0 {
		t.Fatalf("%d errors, first: %v", len(res.errs), res.errs[0])
	}
	if len(res.ids) < 1_000_000 {
		t.Fatalf("only %d IDs", len(res.ids))
	}
	testenv.CheckDistinct(t, res.ids)
	shares := workerShares(res.ids)
	for w := range uint64(3) {
		if shares[w+1] == 0 {
			t.Errorf("instance with worker %d served nothing: %v", w+1, shares)
		}
	}
	if len(shares) != 3 {
		t.Errorf("IDs from unexpected workers: %v", shares)
	}
	t.Logf("%d IDs in %d calls; per worker %v", len(res.ids), res.calls.Load(), shares)
}

func TestAbruptStopDuringLoad(t *testing.T) {
	url := startNATS(t, nil)
	var victims []*instance
	for w := range uint64(3) {
		victims = append(victims, startInstance(t, url, w+1, instanceOpts{}))
	}
	const callTimeout = 2 * time.Second
	var servedBefore uint64
	// A short attempt timeout: a request held by the dead instance is
	// asked again well within the call's deadline.
	res := loadThroughFault(t, url, victims, callTimeout, uidclient.Config{AttemptTimeout: 250 * time.Millisecond}, func() {
		servedBefore = victims[1].served()
		victims[1].crash()
	})
	if servedBefore == 0 {
		t.Fatal("the crashed instance served nothing before its crash; the test proves nothing")
	}
	if len(res.errs) > 0 {
		t.Fatalf("%d of %d calls failed, first: %v", len(res.errs), res.calls.Load(), res.errs[0])
	}
	testenv.CheckDistinct(t, res.ids)
	if shares := workerShares(res.ids); shares[1] == 0 || shares[3] == 0 {
		t.Fatalf("survivors did not serve: %v", shares)
	}
	t.Logf("%d IDs in %d calls, slowest %v, %d attempts timed out", len(res.ids), res.calls.Load(), res.maxLatency, res.timedOut.Load())
}

func TestGracefulStopDuringLoadLosesNoRequest(t *testing.T) {
	url := startNATS(t, nil)
	var instances []*instance
	for w := range uint64(3) {
		instances = append(instances, startInstance(t, url, w+1, instanceOpts{}))
	}
	var servedBefore uint64
	// One attempt only, as long as the call: a request lost by the
	// stopping instance shows as a failed call (a count, not a latency).
	res := loadThroughFault(t, url, instances, 5*time.Second, uidclient.Config{AttemptTimeout: 5 * time.Second}, func() {
		servedBefore = instances[1].svc.endpoints[protocol.Subject(protocol.DefaultSubjectPrefix, protocol.EndpointBatch)].ok.Load()
		instances[1].stopGracefully(t)
	})
	if len(res.errs) > 0 {
		t.Fatalf("%d of %d calls failed, first: %v", len(res.errs), res.calls.Load(), res.errs[0])
	}
	if servedBefore == 0 {
		t.Fatal("the stopped instance served nothing before its stop; the test proves nothing")
	}
	testenv.CheckDistinct(t, res.ids)
	t.Logf("%d IDs in %d calls, slowest %v", len(res.ids), res.calls.Load(), res.maxLatency)
}

func TestClientRetriesUntilAServiceAppears(t *testing.T) {
	srv := testenv.NATS(t, nil)
	url := srv.ClientURL()
	nc := connect(t, url)
	client := uidclient.New(nc.Conn, uidclient.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	type reply struct {
		id  uint64
		err error
	}
	got := make(chan reply, 1)
	start := time.Now()
	go func() {
		id, err := client.Next(ctx)
		got <- reply{id, err}
	}()
	// No responders yet: the client asks again and again.
	testenv.WaitFor(t, 5*time.Second, "three requests with nobody to answer", func() bool {
		v, err := srv.Varz(nil)
		return err == nil && v.InMsgs >= 3
	})
	select {
	case r := <-got:
		t.Fatalf("Next returned %d, %v before any service existed", r.id, r.err)
	default:
	}
	waited := time.Since(start)
	startInstance(t, url, 9, instanceOpts{})
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if p, _ := uidcore.DefaultLayout().Parse(r.id); p.WorkerID != 9 || time.Since(start) < waited {
		t.Fatalf("id %d (worker %d) after %v", r.id, p.WorkerID, time.Since(start))
	}
}

func TestClientGivesUpAtTheDeadline(t *testing.T) {
	url := startNATS(t, nil)
	nc := connect(t, url)
	client := uidclient.New(nc.Conn, uidclient.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := client.Next(ctx)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no responders") {
		t.Fatalf("err = %v; want the deadline and the last error (no responders)", err)
	}
	// A safety net, not a speed bound: a client that kept asking past its
	// deadline would not return at all.
	if took > 10*time.Second {
		t.Fatalf("gave up after %v, deadline 300ms", took)
	}
}

func TestClientTypedErrorsAndParse(t *testing.T) {
	url := startNATS(t, nil)
	startInstance(t, url, 4, instanceOpts{})
	nc := connect(t, url)
	client := uidclient.New(nc.Conn, uidclient.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	_, err := client.Batch(ctx, DefaultMaxBatch+1)
	var se *protocol.ServiceError
	if !errors.Is(err, protocol.ErrBadRequest) || !errors.As(err, &se) || se.Code != 400 || !strings.Contains(se.Description, "too large") || se.Subject != "uid.batch" {
		t.Fatalf("oversized batch: %v", err)
	}
	if _, err := client.Batch(ctx, 0); !errors.Is(err, protocol.ErrBadRequest) {
		t.Fatalf("zero batch: %v", err)
	}
	ids, err := client.Batch(ctx, DefaultMaxBatch)
	if err != nil || len(ids) != DefaultMaxBatch {
		t.Fatalf("full batch: %d, %v", len(ids), err)
	}
	parts, err := client.Parse(ctx, ids[7])
	if err != nil {
		t.Fatal(err)
	}
	want, _ := uidcore.DefaultLayout().Parse(ids[7])
	if parts != want {
		t.Fatalf("Parse = %+v, want %+v", parts, want)
	}
	if _, err := client.Parse(ctx, 1<<63); !errors.Is(err, protocol.ErrBadRequest) {
		t.Fatalf("sign-bit ID: %v", err)
	}
}

func TestClientRetries503(t *testing.T) {
	url := startNATS(t, nil)
	// A ring of 1,024 IDs at most 1 s ahead: batches of 1,000 drain it
	// and get 503s until padding catches up with the clock.
	layout := uidcore.Layout{TimeBits: 43, WorkerBits: 10, SeqBits: 10, Epoch: uidcore.DefaultEpoch}
	startInstance(t, url, 2, instanceOpts{cached: uidcore.CachedOptions{Layout: layout, RingSeconds: 1, MaxAhead: time.Second, TakeWait: time.Nanosecond}})
	nc := connect(t, url)
	client := uidclient.New(nc.Conn, uidclient.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var all []uint64
	for range 5 {
		ids, err := client.Batch(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ids...)
	}
	testenv.CheckDistinct(t, all)
	p0, _ := layout.Parse(all[0])
	p1, _ := layout.Parse(all[len(all)-1])
	if p1.Time.Sub(p0.Time) < 2*time.Second {
		t.Fatalf("5,000 IDs of a 1,024-per-second worker span %v: no 503 was met and retried", p1.Time.Sub(p0.Time))
	}
}

func TestPrefetcherConcurrentDistinct(t *testing.T) {
	url := startNATS(t, nil)
	startInstance(t, url, 1, instanceOpts{})
	startInstance(t, url, 2, instanceOpts{})
	nc := connect(t, url)
	p := uidclient.NewPrefetcher(uidclient.New(nc.Conn, uidclient.Config{}), uidclient.PrefetchConfig{BatchSize: 1000, LowWater: 3000})
	defer p.Close()
	const goroutines, each = 8, 25_000
	results := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for range each {
				id, err := p.Next(ctx)
				if err != nil {
					errs <- err
					return
				}
				results[g] = append(results[g], id)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var all []uint64
	for _, r := range results {
		all = append(all, r...)
	}
	if len(all) != goroutines*each {
		t.Fatalf("%d IDs", len(all))
	}
	testenv.CheckDistinct(t, all)
	if avail := p.Available(); avail > 3000+1000 {
		t.Fatalf("reserve %d exceeds LowWater+BatchSize", avail)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Next(context.Background()); !errors.Is(err, uidclient.ErrPrefetcherClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
}

func TestPrefetcherReportsBadBatchSize(t *testing.T) {
	url := startNATS(t, nil)
	startInstance(t, url, 1, instanceOpts{service: ServiceConfig{MaxBatch: 100}})
	nc := connect(t, url)
	p := uidclient.NewPrefetcher(uidclient.New(nc.Conn, uidclient.Config{}), uidclient.PrefetchConfig{BatchSize: 101})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := p.Next(ctx)
	if !errors.Is(err, protocol.ErrBadRequest) || ctx.Err() != nil {
		t.Fatalf("Next = %v; want the 400 at once", err)
	}
}

func TestPrefetcherWaitsWithinDeadlineWithoutService(t *testing.T) {
	url := startNATS(t, nil)
	nc := connect(t, url)
	p := uidclient.NewPrefetcher(uidclient.New(nc.Conn, uidclient.Config{}), uidclient.PrefetchConfig{FetchTimeout: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Next(ctx)
	// 10 s: a safety net for a prefetcher that ignores the deadline, not
	// a bound on speed.
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Fatalf("Next = %v after %v", err, time.Since(start))
	}
	if !strings.Contains(err.Error(), "last refill") {
		t.Errorf("error %q does not say why the refill failed", err)
	}
	p.Close() // goleak (TestMain) checks the fetcher is gone
}

func TestLocalServerStartsOnceThenReuses(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx := context.Background()
	cfg := EmbeddedConfig{Addr: addr, StoreDir: t.TempDir(), Logger: quietLogger()}
	url, emb, err := LocalServer(ctx, cfg)
	if err != nil || emb == nil {
		t.Fatalf("first LocalServer: %v, embedded %v", err, emb)
	}
	defer emb.Shutdown()
	url2, emb2, err := LocalServer(ctx, cfg)
	if err != nil || emb2 != nil || url2 != "nats://"+addr {
		t.Fatalf("second LocalServer: %s %v %v; want the running one", url2, emb2, err)
	}
	if _, err := startEmbedded(cfg); !errors.Is(err, ErrAddrInUse) {
		t.Fatalf("startEmbedded on a used address: %v", err)
	}
	// JetStream is on: the KV assigner needs it.
	conn := connect(t, url)
	if _, err := conn.Request("$JS.API.INFO", nil, 2*time.Second); err != nil {
		t.Fatalf("JetStream: %v", err)
	}
}

// Two instances of the jssafe layout: every ID handed out concurrently,
// by batch (binary and base32 on the wire) and next, is distinct and
// exact as a JavaScript Number; the client parses it with the fleet's
// layout and, with ParseWithLayout, UidGenerator's IDs (wrapped ones too)
// with another.
func TestClientJSSafeFleetAndParseWithLayout(t *testing.T) {
	url := startNATS(t, nil)
	layout := uidcore.JSSafeLayout()
	for w := range uint64(2) {
		startInstance(t, url, 5+w, instanceOpts{cached: uidcore.CachedOptions{Layout: layout, TakeWait: time.Second}})
	}
	nc := connect(t, url)
	client := uidclient.New(nc.Conn, uidclient.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	const takers, rounds = 4, 20
	var (
		mu  sync.Mutex
		all []uint64
		wg  sync.WaitGroup
	)
	errs := make(chan error, takers)
	for w := range takers {
		wg.Go(func() {
			for r := range rounds {
				var ids []uint64
				var err error
				switch (w + r) % 3 {
				case 0:
					ids, err = client.Batch(ctx, 300)
				case 1:
					var reply *nats.Msg
					reply, err = nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: "uid.batch", Data: []byte("300"), Header: nats.Header{protocol.EncodingHeader: {protocol.EncodingBase32}}})
					if err == nil {
						ids, err = protocol.Base32.Decode(nil, reply.Data)
					}
				default:
					var id uint64
					id, err = client.Next(ctx)
					ids = []uint64{id}
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				all = append(all, ids...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	testenv.CheckDistinct(t, all)
	testenv.CheckJSSafe(t, all)
	for _, id := range all {
		if back, err := uidclient.FromBase32(uidclient.ToBase32(id)); back != id || err != nil {
			t.Fatalf("base32 round trip of %d: %d, %v", id, back, err)
		}
	}
	parts, err := client.Parse(ctx, all[0])
	if want, _ := layout.Parse(all[0]); err != nil || parts != want {
		t.Fatalf("Parse(%d) = %+v, %v; want %+v", all[0], parts, err, want)
	}

	ug, err := client.ParseWithLayout(ctx, 9223372002495045632, "uidgenerator")
	if err != nil || ug != (uidcore.ParsedJSON{UID: "9223372002495045632", Timestamp: "2024-11-20 13:24:15", WorkerID: "1", Sequence: "0"}) {
		t.Fatalf("UidGenerator's last second: %+v, %v", ug, err)
	}
	wrapped, err := client.ParseWithLayout(ctx, uint64(1<<64-7024218214296920064), "28/22/13@2016-05-20T00:00:00+08:00")
	if err != nil || wrapped.UID != "-7024218214296920064" || wrapped.WorkerID != "7" || wrapped.Timestamp != "2026-12-01 08:14:16" || !strings.HasPrefix(wrapped.Wrapped, "true") {
		t.Fatalf("a wrapped ID: %+v, %v", wrapped, err)
	}
	if _, err := client.ParseWithLayout(ctx, 1, "nosuch"); !errors.Is(err, protocol.ErrBadRequest) || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Fatalf("a bad layout: %v", err)
	}
	t.Logf("%d distinct JS-safe IDs", len(all))
}
