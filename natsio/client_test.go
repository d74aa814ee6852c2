package natsio

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
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
	shares := workerShares(t, res.ids)
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
	if shares := workerShares(t, res.ids); shares[1] == 0 || shares[3] == 0 {
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
