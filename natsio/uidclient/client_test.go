package uidclient_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
)

// clientTestConn is a plain nats.go connection, as a client program has.
func clientTestConn(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

type clientTestOpts struct {
	cached  uidcore.CachedOptions
	service natsio.ServiceConfig
}

// startClientTestService runs a service over a cached generator on a
// static worker claim, on its own connection, until the test ends.
func startClientTestService(t testing.TB, url string, worker uint64, o clientTestOpts) {
	t.Helper()
	nc := clientTestConn(t, url)
	o.cached.Claim = uidcore.StaticClaim{ID: worker}
	if o.cached.TakeWait == 0 {
		o.cached.TakeWait = 5 * time.Millisecond
	}
	gen, err := uidcore.NewCached(o.cached)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gen.Close() })
	if o.service.Logger == nil {
		o.service.Logger = slog.New(slog.DiscardHandler)
	}
	svc, err := natsio.NewService(nc, gen, o.service)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
}

// startThrottledService runs a service whose ring holds 1,024 IDs at
// most 1 s ahead, on worker ID 2, and whose batches wait for capacity no
// more than a millisecond: then 503 at capacity, with the retry hint. It
// returns the service's layout.
func startThrottledService(t *testing.T, url string) uidcore.Layout {
	t.Helper()
	layout := uidcore.Layout{TimeBits: 43, WorkerBits: 10, SeqBits: 10, Epoch: uidcore.DefaultEpoch}
	startClientTestService(t, url, 2, clientTestOpts{cached: uidcore.CachedOptions{Layout: layout, RingSeconds: 1, MaxAhead: time.Second, TakeWait: time.Nanosecond},
		service: natsio.ServiceConfig{CapacityWait: time.Millisecond}})
	return layout
}

func TestClientRetriesUntilAServiceAppears(t *testing.T) {
	srv := blocksTestServer(t)
	url := srv.ClientURL()
	nc := clientTestConn(t, url)
	client := uidclient.New(nc, uidclient.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	type reply struct {
		id  uint64
		err error
	}
	got := make(chan reply, 1)
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
	startClientTestService(t, url, 9, clientTestOpts{})
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	// In order: the attempts nobody answered, then the ID of the service
	// started after them (worker 9, the only one).
	st := client.Stats()
	if p := uidcoretest.MustParse(t, uidcore.DefaultLayout().Parse, r.id); p.WorkerID != 9 || st.NoResponders < 3 || st.Retries < st.NoResponders {
		t.Fatalf("id %d (worker %d) after %d attempts without responders, %d retries; want worker 9 after at least 3", r.id, p.WorkerID, st.NoResponders, st.Retries)
	}
}

func TestClientGivesUpAtTheDeadline(t *testing.T) {
	url := blocksTestServer(t).ClientURL()
	nc := clientTestConn(t, url)
	client := uidclient.New(nc, uidclient.Config{})
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
	url := blocksTestServer(t).ClientURL()
	startClientTestService(t, url, 4, clientTestOpts{})
	nc := clientTestConn(t, url)
	client := uidclient.New(nc, uidclient.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	_, err := client.Batch(ctx, 1<<22+1) // above the ranges limit, a lane-second
	var se *protocol.ServiceError
	if !errors.Is(err, protocol.ErrBadRequest) || !errors.As(err, &se) || se.Code != 400 || !strings.Contains(se.Description, "too large") || se.Subject != "uid.batch" {
		t.Fatalf("oversized batch: %v", err)
	}
	if _, err := client.Batch(ctx, 0); !errors.Is(err, protocol.ErrBadRequest) {
		t.Fatalf("zero batch: %v", err)
	}
	ids, err := client.Batch(ctx, natsio.DefaultMaxBatch)
	if err != nil || len(ids) != natsio.DefaultMaxBatch {
		t.Fatalf("full batch: %d, %v", len(ids), err)
	}
	parts, err := client.Parse(ctx, ids[7])
	if err != nil {
		t.Fatal(err)
	}
	want := uidcoretest.MustParse(t, uidcore.DefaultLayout().Parse, ids[7])
	if parts != want {
		t.Fatalf("Parse = %+v, want %+v", parts, want)
	}
	if _, err := client.Parse(ctx, 1<<63); !errors.Is(err, protocol.ErrBadRequest) {
		t.Fatalf("sign-bit ID: %v", err)
	}
}

func TestClientRetries503(t *testing.T) {
	url := blocksTestServer(t).ClientURL()
	// Batches of 1,000 drain the ring and get 503s until padding catches
	// up with the clock.
	layout := startThrottledService(t, url)
	nc := clientTestConn(t, url)
	client := uidclient.New(nc, uidclient.Config{})
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
	p0 := uidcoretest.MustParse(t, layout.Parse, all[0])
	p1 := uidcoretest.MustParse(t, layout.Parse, all[len(all)-1])
	if p1.Time.Sub(p0.Time) < 2*time.Second {
		t.Fatalf("5,000 IDs of a 1,024-per-second worker span %v: no 503 was met and retried", p1.Time.Sub(p0.Time))
	}
}

func TestPrefetcherConcurrentDistinct(t *testing.T) {
	url := blocksTestServer(t).ClientURL()
	startClientTestService(t, url, 1, clientTestOpts{})
	startClientTestService(t, url, 2, clientTestOpts{})
	nc := clientTestConn(t, url)
	p := uidclient.NewPrefetcher(uidclient.New(nc, uidclient.Config{}), uidclient.PrefetchConfig{BatchSize: 1000, LowWater: 3000})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all := takeConcurrently(ctx, t, p, 8, 25_000)
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
	url := blocksTestServer(t).ClientURL()
	startClientTestService(t, url, 1, clientTestOpts{service: natsio.ServiceConfig{MaxBatch: 100}})
	nc := clientTestConn(t, url)
	// Above the ranges limit too: a lane-second (2^22), as MaxBatch is less.
	p := uidclient.NewPrefetcher(uidclient.New(nc, uidclient.Config{}), uidclient.PrefetchConfig{BatchSize: 1<<22 + 1})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := p.Next(ctx)
	if !errors.Is(err, protocol.ErrBadRequest) || ctx.Err() != nil {
		t.Fatalf("Next = %v; want the 400 at once", err)
	}
}

func TestPrefetcherWaitsWithinDeadlineWithoutService(t *testing.T) {
	url := blocksTestServer(t).ClientURL()
	nc := clientTestConn(t, url)
	p := uidclient.NewPrefetcher(uidclient.New(nc, uidclient.Config{}), uidclient.PrefetchConfig{FetchTimeout: 100 * time.Millisecond})
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
	p.Close() // goleak (clientTestServer) checks the fetcher is gone
}

// Two instances of the jssafe layout: every ID handed out concurrently,
// by batch (binary and base32 on the wire) and next, is distinct and
// exact as a JavaScript Number; the client parses it with the fleet's
// layout and, with ParseWithLayout, UidGenerator's IDs (wrapped ones too)
// with another.
func TestClientJSSafeFleetAndParseWithLayout(t *testing.T) {
	url := blocksTestServer(t).ClientURL()
	layout := uidcore.JSSafeLayout()
	for w := range uint64(2) {
		startClientTestService(t, url, 5+w, clientTestOpts{cached: uidcore.CachedOptions{Layout: layout, TakeWait: time.Second}})
	}
	nc := clientTestConn(t, url)
	client := uidclient.New(nc, uidclient.Config{})
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
	if want := uidcoretest.MustParse(t, layout.Parse, all[0]); err != nil || parts != want {
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

// A 503 with Uid-Retry-After-Ms is retried no sooner than it says: with
// an hour's hint (read as protocol.MaxRetryAfter) and a two-second
// deadline the client asks once and gives up at the deadline with the
// 503, which carries the hint; with a short hint it retries until the
// responder answers.
func TestClientWaitsTheRetryAfterOfA503(t *testing.T) {
	srv := blocksTestServer(t)
	nc := clientTestConn(t, srv.ClientURL())
	var asked atomic.Int64
	var hint atomic.Value
	hint.Store("3600000")
	sub, err := clientTestConn(t, srv.ClientURL()).Subscribe(protocol.Subject(protocol.DefaultSubjectPrefix, protocol.EndpointNext), func(m *nats.Msg) {
		if asked.Add(1) <= 3 {
			_ = m.RespondMsg(&nats.Msg{Header: nats.Header{
				micro.ErrorCodeHeader:     {"503"},
				micro.ErrorHeader:         {"at capacity: retry later"},
				protocol.RetryAfterHeader: {hint.Load().(string)},
			}})
			return
		}
		_ = m.Respond([]byte("42"))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	client := uidclient.New(nc, uidclient.Config{})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = client.Next(ctx)
	var se *protocol.ServiceError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &se) || se.RetryAfter != protocol.MaxRetryAfter {
		t.Fatalf("Next = %v; want the deadline and the 503 with its hint (%v)", err, protocol.MaxRetryAfter)
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("asked %d times within the hour the 503 said to wait", n)
	}

	hint.Store("20")
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if id, err := client.Next(ctx); err != nil || id != 42 {
		t.Fatalf("Next after short hints = %d, %v", id, err)
	}
	if n := asked.Load(); n != 4 {
		t.Fatalf("asked %d times in all, want 4 (one, then two more 503s and the answer)", n)
	}
}

// A real service at its capacity sends the hint, and the client's
// *ServiceError carries it: the time to the service's next second.
func TestClientReadsTheRetryAfterOfARealService(t *testing.T) {
	url := blocksTestServer(t).ClientURL()
	startThrottledService(t, url)
	client := uidclient.New(clientTestConn(t, url), uidclient.Config{})
	var se *protocol.ServiceError
	// Until padding has met its bound once, an empty ring is padding
	// running behind (503 "buffer empty", no hint); after that it is
	// capacity. A loaded machine may keep padding behind for long: the
	// bound is a safety net, not a speed.
	testenv.WaitFor(t, 3*time.Minute, "a 503 at capacity", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := client.Batch(ctx, 1000)
		return errors.As(err, &se) && strings.HasPrefix(se.Description, "at capacity")
	})
	if se.Code != protocol.CodeUnavailable || se.RetryAfter <= 0 || se.RetryAfter > time.Second {
		t.Fatalf("%+v: want a 503 with a hint of at most a second", se)
	}
}
