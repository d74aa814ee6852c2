package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
)

// laneLayout sustains 32,768 IDs per second a lane, so that a test's load
// needs several lanes, and has 8 worker IDs, so that two instances of 4
// lanes hold them all.
var laneLayout = uidcore.Layout{TimeBits: 45, WorkerBits: 3, SeqBits: 15, Epoch: uidcore.DefaultEpoch}

// ringStats asks every instance in the queue group for its stats and
// waits for want replies (a loaded machine may answer late; 30 s is a
// safety net), then for any straggler until a short quiet.
func ringStats(t *testing.T, nc *nats.Conn, want int) map[string]natsio.RingStats {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$SRV.STATS."+protocol.ServiceName, inbox, nil); err != nil {
		t.Fatal(err)
	}
	out := map[string]natsio.RingStats{}
	for {
		wait := 30 * time.Second
		if len(out) >= want {
			wait = 300 * time.Millisecond
		}
		msg, err := sub.NextMsg(wait)
		if err != nil {
			return out
		}
		var st micro.Stats
		if err := json.Unmarshal(msg.Data, &st); err != nil || len(st.Endpoints) == 0 {
			t.Fatalf("stats %s: %v", msg.Data, err)
		}
		var d natsio.EndpointData
		if err := json.Unmarshal(st.Endpoints[0].Data, &d); err != nil {
			t.Fatal(err)
		}
		out[st.ID] = d.Ring
	}
}

// TestLanesThroughTheBinary runs dispenser processes on MySQL under a load
// no single worker ID sustains: they must claim lanes, keep IDs within 2 s
// of the clock, survive a kill -9 of an instance holding several lanes
// (its worker IDs taken over after their leases expire) without a
// duplicate, and give lanes back once the load stops.
func TestLanesThroughTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs dispenser processes for about 20s")
	}
	dsn := testenv.MySQL(t)
	url := testenv.NATS(t, nil).ClientURL()
	env := []string{"DISPENSER_NATS_URL=" + url, "DISPENSER_MYSQL_DSN=" + dsn,
		"DISPENSER_TIME_BITS=45", "DISPENSER_WORKER_BITS=3", "DISPENSER_SEQ_BITS=15",
		"DISPENSER_MAX_LANES=4", "DISPENSER_LANE_IDLE=2s", "DISPENSER_LEASE_TTL=2s", "DISPENSER_RESERVE_CHUNK=4s",
		"DISPENSER_STORE_LOSS_WINDOW=0"} // the takeover test starts right after the reservation
	startProc := func() *procHandle {
		t.Helper()
		p := startDispenser(t, command(t, nil, env...))
		return p
	}
	a := startProc()
	startProc()

	conn, err := natsconn.Connect(context.Background(), natsconn.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := uidclient.New(conn.Conn, uidclient.Config{})
	var mu sync.Mutex
	var all []uint64
	var ahead int64
	// The load runs until the state it is for is reached, not for a fixed
	// time: a loaded machine makes fewer requests a second.
	startLoad := func() (stop func()) {
		return batchLoad(t, client, 4096, func(ids []uint64) {
			p, err := laneLayout.Parse(ids[len(ids)-1])
			if err != nil { // on the load's goroutine: no Fatal
				t.Error(err)
				return
			}
			mu.Lock()
			ahead = max(ahead, p.Time.Unix()-time.Now().Unix())
			all = append(all, ids...)
			mu.Unlock()
		})
	}
	stop := startLoad()
	var before map[string]natsio.RingStats
	testenv.WaitFor(t, 60*time.Second, "an instance claimed a lane under load", func() bool {
		before = ringStats(t, conn.Conn, 2)
		for _, st := range before {
			if len(st.WorkerIDs) > 1 {
				return true
			}
		}
		return false
	})
	stop()
	aLanes := a.lanes(t, before)

	// kill -9 an instance holding several lanes; once its leases expire
	// another instance joins, and must take its worker IDs over (there
	// are no others), starting after the seconds they had reserved.
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	killed := time.Now().Unix()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testenv.WaitFor(t, 30*time.Second, "the killed instance's leases expired", func() bool {
		var live int
		if err := db.QueryRow("SELECT COUNT(*) FROM WORKER_LEASE WHERE LEASE_EXPIRY > UTC_TIMESTAMP(6)").Scan(&live); err != nil {
			t.Fatal(err)
		}
		return live < 8
	})
	startProc()
	// Load until IDs of a taken-over worker ID come from seconds past the
	// killed instance's reservations (4 s from the kill): those are the
	// ones that would collide.
	stop = startLoad()
	reserved := killed + 4
	testenv.WaitFor(t, 60*time.Second, "IDs of a taken-over worker ID from past the killed instance's reservations", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range all[max(0, len(all)-4096*64):] {
			if p := uidcoretest.MustParse(t, laneLayout.Parse, id); slices.Contains(aLanes, p.WorkerID) && p.Time.Unix() > reserved {
				return true
			}
		}
		return false
	})
	stop()
	after := ringStats(t, conn.Conn, 2)
	var later []uint64
	for _, st := range after {
		later = append(later, st.WorkerIDs...)
	}
	takenOver := 0
	for _, w := range aLanes {
		if slices.Contains(later, w) {
			takenOver++
		}
	}
	t.Logf("%d IDs, at most %ds ahead; killed instance's lanes %v, lanes afterwards %v (%d taken over)", len(all), ahead, aLanes, later, takenOver)
	if takenOver == 0 {
		t.Errorf("none of the killed instance's worker IDs %v was taken over: %v", aLanes, later)
	}
	if ahead > 2 {
		t.Errorf("an ID ran %ds ahead of the clock, want at most 2", ahead)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("duplicate ID %d among %d", all[i], len(all))
		}
	}
	// Idle: extra lanes go back after DISPENSER_LANE_IDLE.
	testenv.WaitFor(t, 60*time.Second, "the extra lanes given back after the load stopped", func() bool {
		idle := ringStats(t, conn.Conn, 2)
		shrunk := len(idle) == 2
		for _, st := range idle {
			shrunk = shrunk && len(st.WorkerIDs) == 1 && st.LanesReleased > 0
		}
		return shrunk
	})
}

// procHandle is a dispenser process started by startDispenser.
type procHandle struct {
	cmd       *exec.Cmd
	serviceID string
	ids       string // the "serving" line's note on the IDs' range
}

// startDispenser starts cmd (with JSON logs) and waits until it serves;
// the test's end stops it with SIGTERM.
func startDispenser(t *testing.T, cmd *exec.Cmd) *procHandle {
	t.Helper()
	cmd.Env = append(cmd.Env, "DISPENSER_LOG_FORMAT=json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	serving := make(chan *procHandle, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct {
				Event     string `json:"event"`
				ServiceID string `json:"service_id"`
				IDs       string `json:"ids"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Event == event.Serving {
				serving <- &procHandle{cmd: cmd, serviceID: line.ServiceID, ids: line.IDs}
			}
		}
	}()
	select {
	case p := <-serving:
		return p
	case <-time.After(60 * time.Second):
		t.Fatal("dispenser not serving within 60s")
		return nil
	}
}

// lanes is the worker IDs the process holds, from the stats of the fleet.
func (p *procHandle) lanes(t *testing.T, stats map[string]natsio.RingStats) []uint64 {
	t.Helper()
	st, ok := stats[p.serviceID]
	if !ok {
		t.Fatalf("no stats of service %s among %d", p.serviceID, len(stats))
	}
	return st.WorkerIDs
}

// TestJSSafeThroughTheBinary: DISPENSER_LAYOUT=jssafe starts, says in its
// start-up log that the IDs are JS-safe, claims lanes under a load one
// worker ID (65,536 a second) does not sustain, and every ID handed out
// concurrently is distinct and exact as a JavaScript Number.
func TestJSSafeThroughTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a dispenser process for a few seconds")
	}
	url := testenv.NATS(t, nil).ClientURL()
	p := startDispenser(t, command(t, nil, "DISPENSER_NATS_URL="+url, "DISPENSER_LAYOUT=jssafe", "DISPENSER_MAX_LANES=4"))
	if !strings.Contains(p.ids, "JS-safe") || !strings.Contains(p.ids, "9007199254740991") {
		t.Fatalf("the start-up log says of the IDs %q", p.ids)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	client := uidclient.New(nc, uidclient.Config{})
	var (
		mu    sync.Mutex
		all   []uint64
		lanes []uint64
	)
	// The load runs until the instance holds a second lane (the ring's
	// state says so), not for a fixed time.
	stop := batchLoad(t, client, 5000, func(ids []uint64) {
		mu.Lock()
		all = append(all, ids...)
		mu.Unlock()
	})
	testenv.WaitFor(t, 60*time.Second, "a second lane under load", func() bool {
		lanes = p.lanes(t, ringStats(t, nc, 1))
		return len(lanes) >= 2
	})
	stop()
	testenv.CheckDistinct(t, all)
	testenv.CheckJSSafe(t, all)
	t.Logf("%d distinct JS-safe IDs, lanes %v", len(all), lanes)
}

// batchLoad runs four callers of client.Batch(n), each reply passed to
// got, until stop is called (at the latest when the test ends): tests load
// an instance until the state the load is for is reached, not for a fixed
// time.
func batchLoad(t *testing.T, client *uidclient.Client, n int, got func(ids []uint64)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				ids, err := client.Batch(ctx, n)
				cancel()
				if err != nil {
					t.Errorf("batch: %v", err)
					return
				}
				got(ids)
			}
		})
	}
	stop = sync.OnceFunc(func() {
		close(done)
		wg.Wait()
	})
	t.Cleanup(stop)
	return stop
}
