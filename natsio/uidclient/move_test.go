package uidclient_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/uid-dispenser/uid-dispenser/internal/faultproxy"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
)

// The user and password of the move tests' servers: in the client's URLs,
// so that a test can check that no log line carries the password.
const moveTestUser, moveTestPassword = "app", "s3cret-in-url"

// moveTestNode starts an embedded nats-server named name (no JetStream),
// with user and password; in cluster "move" when clustered, its routes
// dialling routes. Shut down when the test ends.
func moveTestNode(t *testing.T, name string, clustered bool, routes ...string) *server.Server {
	t.Helper()
	opts := &server.Options{ServerName: name, Host: "127.0.0.1", Port: -1, NoSigs: true,
		Username: moveTestUser, Password: moveTestPassword}
	if clustered {
		opts.Cluster = server.ClusterOpts{Name: "move", Host: "127.0.0.1", Port: -1}
	}
	for _, r := range routes {
		u, err := url.Parse(r)
		if err != nil {
			t.Fatal(err)
		}
		opts.Routes = append(opts.Routes, u)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		t.Fatalf("nats-server %s not ready after 10s", name)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

// withUser is a server's client URL with the tests' user and password.
func withUser(srv *server.Server) string {
	return strings.Replace(srv.ClientURL(), "nats://", "nats://"+moveTestUser+":"+moveTestPassword+"@", 1)
}

// moveTestConn connects to servers in their order (nats.DontRandomize),
// as the pool [first, second, ...], and reconnects for ever.
func moveTestConn(t *testing.T, servers ...*server.Server) *nats.Conn {
	t.Helper()
	return moveTestConnWith(t, servers, nats.MaxReconnects(-1))
}

// moveTestConnWith is moveTestConn with the options opts.
func moveTestConnWith(t *testing.T, servers []*server.Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	var urls []string
	for _, s := range servers {
		urls = append(urls, withUser(s))
	}
	nc, err := nats.Connect(strings.Join(urls, ","), append(opts, nats.DontRandomize())...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// moveTestLeakCheck registers the goroutine-leak check before any server
// starts, so that it runs after every server and connection shut down.
func moveTestLeakCheck(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// TestClientMovesOffAServerCutOffFromItsCluster: node A's routes to node
// B go through a proxy; a dispenser serves on B; a client whose pool is
// [A, B] sits on A. When the proxy cuts A off from B (the client's own
// connection to A stays healthy), A has no route to the dispenser and
// answers every request with no responders. With the move (the default)
// the client forces its connection to B once and every call succeeds;
// with MoveAfter negative it stays on A and its calls keep failing with
// no responders. Every ID handed out, by four callers, before and after
// the cut, is distinct.
func TestClientMovesOffAServerCutOffFromItsCluster(t *testing.T) {
	for _, tc := range []struct {
		name      string
		moveAfter int
	}{{"default", 0}, {"off", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			moveTestLeakCheck(t)
			b := moveTestNode(t, "B", true)
			proxy := faultproxy.NewProxy(t, b.ClusterAddr().String())
			a := moveTestNode(t, "A", true, "nats://"+proxy.Addr())
			testwait.WaitFor(t, 5*time.Second, "A routed to B through the proxy", func() bool {
				return a.NumRoutes() > 0 && b.NumRoutes() > 0
			})
			startClientTestService(t, withUser(b), 1, clientTestOpts{})
			subject := protocol.Subject(protocol.DefaultSubjectPrefix, protocol.EndpointNext)
			// A probe on A tells when A reaches the dispenser, and when it
			// no longer does.
			probe := moveTestConn(t, a)
			probeErr := func() error {
				_, err := probe.Request(subject, nil, time.Second)
				return err
			}
			testwait.WaitFor(t, 5*time.Second, "the dispenser on B answering through A", func() bool { return probeErr() == nil })

			nc := moveTestConn(t, a, b)
			if got := nc.ConnectedServerName(); got != "A" {
				t.Fatalf("connected to %s, want A (the pool's first)", got)
			}
			var logs testenv.LogBuffer
			// Short pauses: the off case counts 20 failed attempts.
			client := uidclient.New(nc, uidclient.Config{MoveAfter: tc.moveAfter, MaxBackoff: 10 * time.Millisecond, Logger: logs.JSONLogger(slog.LevelInfo)})
			const callers, calls = 4, 10
			var ids []uint64
			var mu sync.Mutex
			callAll := func() {
				t.Helper()
				// The calls end when they succeed, or once the client has
				// failed far more attempts than a move needs: a client
				// that does not move fails here, not at the binary's
				// timeout.
				ctx, cancel := context.WithCancel(testwait.Context(t))
				defer cancel()
				go cancelAfterFailures(ctx, cancel, client, 100)
				var wg sync.WaitGroup
				errs := make(chan error, callers)
				for range callers {
					wg.Go(func() {
						for range calls {
							id, err := client.Next(ctx)
							if err != nil {
								errs <- err
								return
							}
							mu.Lock()
							ids = append(ids, id)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
			}
			// Before the cut: the calls go through A.
			callAll()
			if st := client.Stats(); st.Moves != 0 || len(ids) != callers*calls {
				t.Fatalf("before the cut: %d moves, %d IDs; want 0 and %d", st.Moves, len(ids), callers*calls)
			}

			proxy.Cut()
			testwait.WaitFor(t, 5*time.Second, "A cut off from B: no responders through A", func() bool {
				return errors.Is(probeErr(), nats.ErrNoResponders)
			})
			if tc.moveAfter < 0 {
				stuckOnA(t, client, nc)
				return
			}
			callAll()
			st := client.Stats()
			if st.Moves != 1 || st.NoResponders+st.TimedOut < uidclient.DefaultMoveAfter {
				t.Errorf("after the cut: %d moves after %d no responders and %d timeouts; want 1 after at least %d",
					st.Moves, st.NoResponders, st.TimedOut, uidclient.DefaultMoveAfter)
			}
			if got := nc.ConnectedServerName(); got != "B" {
				t.Errorf("connected to %s after the move, want B", got)
			}
			checkMoveLogged(t, &logs, a)
			testenv.CheckDistinct(t, ids)
			if len(ids) != 2*callers*calls {
				t.Fatalf("%d IDs, want %d", len(ids), 2*callers*calls)
			}
		})
	}
}

// cancelAfterFailures cancels when client has failed more than limit
// attempts (no responders, timeouts), or ctx is done.
func cancelAfterFailures(ctx context.Context, cancel context.CancelFunc, client *uidclient.Client, limit uint64) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if st := client.Stats(); st.NoResponders+st.TimedOut > limit {
				cancel()
				return
			}
		}
	}
}

// nextUntilCancelled asks client for an ID in the background, retrying
// until cancel; the call's error comes on the channel.
func nextUntilCancelled(client *uidclient.Client) (context.CancelFunc, <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() {
		_, err := client.Next(ctx)
		ended <- err
	}()
	return cancel, ended
}

// stuckOnA checks the mutation: a client that does not move keeps
// getting no responders from the cut-off server.
func stuckOnA(t *testing.T, client *uidclient.Client, nc *nats.Conn) {
	t.Helper()
	cancel, failed := nextUntilCancelled(client)
	defer cancel()
	before := client.Stats().NoResponders
	testwait.WaitFor(t, 5*time.Second, "20 attempts with no responders", func() bool {
		return client.Stats().NoResponders >= before+20
	})
	cancel()
	err := testwait.Receive(t, 5*time.Second, "the cancelled call's end", failed)
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("the call ended with %v, want the last attempt's no responders", err)
	}
	if st := client.Stats(); st.Moves != 0 {
		t.Errorf("%d moves with MoveAfter negative", st.Moves)
	}
	if got := nc.ConnectedServerName(); got != "A" || nc.Stats().Reconnects != 0 {
		t.Errorf("on %s after %d reconnects; want A, never reconnected", got, nc.Stats().Reconnects)
	}
}

// checkMoveLogged checks the one event=client.moved record: it names the
// server left by its URL without the user information, and no log line
// holds the password.
func checkMoveLogged(t *testing.T, logs *testenv.LogBuffer, left *server.Server) {
	t.Helper()
	var moved []map[string]any
	for _, rec := range logs.Records(t) {
		if rec[event.Key] == event.ClientMoved {
			moved = append(moved, rec)
		}
	}
	if len(moved) != 1 || moved[0][event.AttrServer] != left.ClientURL() || moved[0]["server_name"] != "A" {
		t.Errorf("moves logged: %v; want one, server %s (A)", moved, left.ClientURL())
	}
	if strings.Contains(logs.String(), moveTestPassword) {
		t.Errorf("the log holds the password: %s", logs.String())
	}
}

// TestMoverKeepsItsLimits holds the rule's limits on servers no
// dispenser serves: a pool of one server is never left, nor a connection
// made not to reconnect, and a client moves at most once every MoveEvery
// (an hour: once; a nanosecond, the mutation: again and again, between
// two servers of its pool).
func TestMoverKeepsItsLimits(t *testing.T) {
	moveTestLeakCheck(t)
	s1 := moveTestNode(t, "S1", false)
	s2 := moveTestNode(t, "S2", false)
	for _, tc := range []struct {
		name      string
		servers   []*server.Server
		every     time.Duration
		wantMoves uint64 // at least; exactly for no more than one
		opt       nats.Option
	}{
		{"a pool of one", []*server.Server{s1}, time.Nanosecond, 0, nats.MaxReconnects(-1)},
		{"no reconnects", []*server.Server{s1, s2}, time.Nanosecond, 0, nats.NoReconnect()},
		{"once an hour", []*server.Server{s1, s2}, time.Hour, 1, nats.MaxReconnects(-1)},
		{"every nanosecond", []*server.Server{s1, s2}, time.Nanosecond, 3, nats.MaxReconnects(-1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := moveTestConnWith(t, tc.servers, tc.opt)
			client := uidclient.New(nc, uidclient.Config{MoveEvery: tc.every, MaxBackoff: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
			cancel, ended := nextUntilCancelled(client)
			defer cancel()
			// Past the moves wanted, then 20 more attempts that could
			// move the client again.
			var from uint64
			testwait.WaitFor(t, 5*time.Second, "the moves wanted, or 200 attempts", func() bool {
				from = client.Stats().NoResponders
				return client.Stats().Moves >= tc.wantMoves || from > 200
			})
			if got := client.Stats().Moves; got < tc.wantMoves {
				t.Fatalf("%d moves after %d attempts with no responders, want %d", got, from, tc.wantMoves)
			}
			testwait.WaitFor(t, 5*time.Second, "20 attempts more", func() bool {
				return client.Stats().NoResponders >= from+20
			})
			cancel()
			if err := testwait.Receive(t, 5*time.Second, "the cancelled call's end", ended); !errors.Is(err, context.Canceled) {
				t.Errorf("the call ended with %v, want its cancel", err)
			}
			testwait.WaitFor(t, time.Second, "the last move's reconnect", nc.IsConnected)
			if got := client.Stats().Moves; tc.wantMoves <= 1 && got != tc.wantMoves {
				t.Errorf("%d moves, want %d", got, tc.wantMoves)
			}
			if got := nc.Stats().Reconnects; got != client.Stats().Moves {
				t.Errorf("%d reconnects of the connection for %d moves", got, client.Stats().Moves)
			}
		})
	}
}

// TestTimeoutsDoNotCountTowardAMove: a server whose responder never
// answers is not a cut-off server (a paused or slow dispenser times out
// too): however many attempts time out, the client stays on it. The
// mutation, timeouts counted, moves it at the second.
func TestTimeoutsDoNotCountTowardAMove(t *testing.T) {
	moveTestLeakCheck(t)
	s1 := moveTestNode(t, "S1", false)
	s2 := moveTestNode(t, "S2", false)
	silent := moveTestConn(t, s1)
	if _, err := silent.Subscribe("silent.next", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if err := silent.Flush(); err != nil {
		t.Fatal(err)
	}
	nc := moveTestConn(t, s1, s2)
	client := uidclient.New(nc, uidclient.Config{SubjectPrefix: "silent", AttemptTimeout: 20 * time.Millisecond,
		MoveEvery: time.Nanosecond, MaxBackoff: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	cancel, ended := nextUntilCancelled(client)
	defer cancel()
	const timeouts = 10 * uidclient.DefaultMoveAfter
	testwait.WaitFor(t, 5*time.Second, "attempts timed out", func() bool { return client.Stats().TimedOut >= timeouts })
	cancel()
	if err := testwait.Receive(t, 5*time.Second, "the cancelled call's end", ended); err == nil {
		t.Error("a call no responder answers succeeded")
	}
	if st := client.Stats(); st.Moves != 0 || st.NoResponders != 0 {
		t.Errorf("%d moves, %d no responders after %d timeouts; want none", st.Moves, st.NoResponders, st.TimedOut)
	}
	if got := nc.ConnectedServerName(); got != "S1" || nc.Stats().Reconnects != 0 {
		t.Errorf("on %s after %d reconnects; want S1, never reconnected", got, nc.Stats().Reconnects)
	}
}

// Two clients of two fleets on one connection have a Mover each. Once
// one of them moved the connection, the other takes that reconnect for a
// move of its own: its no responders counted on the server left, and
// those on the next one within Every, move nothing. Before, the second
// Mover moved the connection again at once (the fault harness: two moves
// a few milliseconds apart, the second off the server just reached).
func TestMoverTakesAnotherMoversMoveForItsOwn(t *testing.T) {
	moveTestLeakCheck(t)
	s1 := moveTestNode(t, "S1", false)
	s2 := moveTestNode(t, "S2", false)
	nc := moveTestConn(t, s1, s2)
	log := slog.New(slog.DiscardHandler)
	first := uidclient.NewMover(nc, uidclient.MoveConfig{Every: time.Hour, Logger: log})
	second := uidclient.NewMover(nc, uidclient.MoveConfig{Every: time.Hour, Logger: log})
	second.Observe(nats.ErrNoResponders) // on S1, before the move
	first.Observe(nats.ErrNoResponders)
	if !first.Observe(nats.ErrNoResponders) {
		t.Fatal("the first Mover did not move after 2 no responders")
	}
	testwait.WaitFor(t, 5*time.Second, "the move's reconnect to S2", func() bool {
		return nc.Stats().Reconnects == 1 && nc.IsConnected() && nc.ConnectedServerName() == "S2"
	})
	for range 10 {
		if second.Observe(nats.ErrNoResponders) {
			t.Fatal("the second Mover moved the connection again, within its Every of an hour after the first's move")
		}
	}
	if got := second.Moves(); got != 0 {
		t.Fatalf("the second Mover made %d moves, want 0", got)
	}
}
