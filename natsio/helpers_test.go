package natsio

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.uber.org/goleak"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// quietLogger discards logs unless UID_TEST_LOG=1.
func quietLogger() *slog.Logger {
	if os.Getenv("UID_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startNATS starts an embedded server; opts may be nil.
func startNATS(t testing.TB, opts *server.Options) string {
	t.Helper()
	return testenv.NATS(t, opts).ClientURL()
}

// instance is one dispenser as the natsio tests run it: its own
// connection, a cached generator on a static worker claim, the service.
type instance struct {
	conn *natsconn.Conn
	gen  *uidcore.CachedGenerator
	svc  *Service
}

type instanceOpts struct {
	cached  uidcore.CachedOptions
	service ServiceConfig
	// source, when set, is what the service takes IDs from, given the
	// instance's generator (a test's observer around it).
	source func(*uidcore.CachedGenerator) IDSource
}

func startInstance(t testing.TB, url string, worker uint64, o instanceOpts) *instance {
	t.Helper()
	conn := connect(t, url)
	o.cached.Claim = uidcore.StaticClaim{ID: worker}
	if o.cached.TakeWait == 0 {
		o.cached.TakeWait = 5 * time.Millisecond
	}
	gen, err := uidcore.NewCached(o.cached)
	if err != nil {
		t.Fatal(err)
	}
	if o.service.Logger == nil {
		o.service.Logger = quietLogger()
	}
	var src IDSource = gen
	if o.source != nil {
		src = o.source(gen)
	}
	svc, err := NewService(conn.Conn, src, o.service)
	if err != nil {
		gen.Close()
		t.Fatal(err)
	}
	inst := &instance{conn: conn, gen: gen, svc: svc}
	t.Cleanup(inst.close)
	return inst
}

// close stops abruptly (idempotent): no drain.
func (i *instance) close() {
	_ = i.svc.Stop()
	i.conn.Close()
	<-i.conn.Closed()
	i.gen.Close()
}

// crash closes the connection without leaving the queue group or
// draining: requests delivered and not yet answered are lost, as when the
// process dies.
func (i *instance) crash() {
	i.conn.Close()
	<-i.conn.Closed()
	i.gen.Close()
}

// stopGracefully leaves the queue group, answers what was delivered,
// closes the connection.
func (i *instance) stopGracefully(t testing.TB) {
	t.Helper()
	if err := i.svc.Stop(); err != nil {
		t.Error(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := i.conn.DrainAndWait(ctx); err != nil {
		t.Error(err)
	}
	i.gen.Close()
}

// requestID asks uid.next for one ID and fails t on an error reply or
// a reply that is not a decimal ID.
func requestID(t testing.TB, nc *nats.Conn, timeout time.Duration) uint64 {
	t.Helper()
	msg, err := nc.Request("uid.next", nil, timeout)
	if err != nil {
		t.Fatal(err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("uid.next: error reply %s: %s", code, msg.Header.Get(micro.ErrorHeader))
	}
	id, err := strconv.ParseUint(string(msg.Data), 10, 64)
	if err != nil {
		t.Fatalf("uid.next: reply %q is not a decimal ID", msg.Data)
	}
	return id
}

func connect(t testing.TB, url string) *natsconn.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := natsconn.Connect(ctx, natsconn.Config{URL: url, Name: t.Name(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		<-conn.Closed()
	})
	return conn
}

// workerShares counts IDs per worker ID under the default layout.
func workerShares(t testing.TB, ids []uint64) map[uint64]int {
	t.Helper()
	shares := map[uint64]int{}
	l := uidcore.DefaultLayout()
	for _, id := range ids {
		p := uidcoretest.MustParse(t, l.Parse, id)
		shares[p.WorkerID]++
	}
	return shares
}

// serviceInfo asks the service for its micro INFO.
func serviceInfo(t testing.TB, nc *nats.Conn) micro.Info {
	t.Helper()
	return microReply[micro.Info](t, nc, "$SRV.INFO.uid-dispenser")
}

// serviceStats asks the service for its micro STATS.
func serviceStats(t testing.TB, nc *nats.Conn) micro.Stats {
	t.Helper()
	return microReply[micro.Stats](t, nc, "$SRV.STATS.uid-dispenser")
}

// microReply is the JSON reply to a request on one of micro's subjects.
func microReply[T any](t testing.TB, nc *nats.Conn, subject string) T {
	t.Helper()
	var v T
	msg, err := nc.Request(subject, nil, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(msg.Data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
