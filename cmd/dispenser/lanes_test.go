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
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// laneLayout sustains 32,768 IDs per second a lane, so that a test's load
// needs several lanes, and has 8 worker IDs, so that two instances of 4
// lanes hold them all.
var laneLayout = uidcore.Layout{TimeBits: 45, WorkerBits: 3, SeqBits: 15, Epoch: uidcore.DefaultEpoch}

// ringStats asks every instance in the queue group for its stats.
func ringStats(t *testing.T, nc *nats.Conn) map[string]natsio.RingStats {
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
		msg, err := sub.NextMsg(300 * time.Millisecond)
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
		"DISPENSER_MAX_LANES=4", "DISPENSER_LANE_IDLE=2s", "DISPENSER_LEASE_TTL=2s", "DISPENSER_RESERVE_CHUNK=4s"}
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
	load := func(d time.Duration) {
		t.Helper()
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for time.Now().Before(end) {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					ids, err := client.Batch(ctx, 4096)
					cancel()
					if err != nil {
						t.Errorf("batch: %v", err)
						return
					}
					p, _ := laneLayout.Parse(ids[len(ids)-1])
					mu.Lock()
					ahead = max(ahead, p.Time.Unix()-time.Now().Unix())
					all = append(all, ids...)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	load(3 * time.Second)
	before := ringStats(t, conn.Conn)
	grown := 0
	var aLanes []uint64
	for _, st := range before {
		if len(st.WorkerIDs) > 1 {
			grown++
		}
	}
	if grown == 0 {
		t.Fatalf("no instance claimed a lane under load: %+v", before)
	}
	aLanes = a.lanes(t, before)

	// kill -9 an instance holding several lanes; once its leases expire
	// another instance joins, and must take its worker IDs over (there
	// are no others), starting after the seconds they had reserved.
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testenv.WaitFor(t, 10*time.Second, "the killed instance's leases expired", func() bool {
		var live int
		if err := db.QueryRow("SELECT COUNT(*) FROM WORKER_LEASE WHERE LEASE_EXPIRY > UTC_TIMESTAMP(6)").Scan(&live); err != nil {
			t.Fatal(err)
		}
		return live < 8
	})
	startProc()
	load(5 * time.Second) // past the killed instance's reservations (4s)
	after := ringStats(t, conn.Conn)
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
	testenv.WaitFor(t, 20*time.Second, "the extra lanes given back after the load stopped", func() bool {
		idle := ringStats(t, conn.Conn)
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
				Msg       string `json:"msg"`
				ServiceID string `json:"service_id"`
				IDs       string `json:"ids"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving" {
				serving <- &procHandle{cmd: cmd, serviceID: line.ServiceID, ids: line.IDs}
			}
		}
	}()
	select {
	case p := <-serving:
		return p
	case <-time.After(20 * time.Second):
		t.Fatal("dispenser not serving within 20s")
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		mu  sync.Mutex
		all []uint64
		wg  sync.WaitGroup
	)
	end := time.Now().Add(3 * time.Second)
	for range 4 {
		wg.Go(func() {
			for time.Now().Before(end) {
				ids, err := client.Batch(ctx, 5000)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				all = append(all, ids...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	seen := make(map[uint64]bool, len(all))
	for _, id := range all {
		if seen[id] {
			t.Fatalf("ID %d handed out twice", id)
		}
		seen[id] = true
		if id > uidcore.MaxJSSafeID || uint64(float64(id)) != id {
			t.Fatalf("ID %d is not exact as a JavaScript Number", id)
		}
	}
	lanes := p.lanes(t, ringStats(t, nc))
	if len(lanes) < 2 {
		t.Errorf("%d IDs in 3s on lanes %v: the load should have needed more than one", len(all), lanes)
	}
	t.Logf("%d distinct JS-safe IDs in 3s, lanes %v", len(all), lanes)
}
