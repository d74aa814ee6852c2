package soak

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// The checks are what the soak's verdict rests on: each test feeds them a
// run in which one thing went wrong and asserts they say so, and a run in
// which nothing did and asserts they stay quiet.

const testSecond = 1_796_000_000 // a unix second after the default epoch

func id(t *testing.T, second int64, worker, seq uint64) uint64 {
	t.Helper()
	v, err := layout.Compose(second, worker, seq)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// logOf builds a client log from calls, each a list of IDs (nil: a
// failed call).
func logOf(rec *recorder, client int, kind callKind, calls ...[]uint64) *clientLog {
	l := &clientLog{id: client, kind: kind}
	for i, ids := range calls {
		start := rec.origin.Add(time.Duration(i) * time.Millisecond)
		var err error
		if ids == nil {
			err = fmt.Errorf("natsio: uid.next: %w after 3 attempt(s)", context.DeadlineExceeded)
		}
		l.record(rec, start, time.Millisecond, ids, err)
	}
	return l
}

func baseInput(rec *recorder, clients ...*clientLog) checkInput {
	return checkInput{
		layout: layout, clients: clients, kinds: rec.kinds,
		claims:   map[string]claimBook{"": {1: {0}, 2: {0}}},
		deadline: 3 * time.Second, grace: time.Second,
		// One long fault covering the synthetic calls explains their failures.
		faults: []faultRecord{{Kind: faultCutLong, Start: 0, End: time.Hour}},
		settle: 4 * time.Second,
	}
}

func TestCheckCleanRunHasNoViolations(t *testing.T) {
	rec := newRecorder(time.Now())
	a := logOf(rec, 0, kindNext, []uint64{id(t, testSecond, 1, 0)}, nil, []uint64{id(t, testSecond, 1, 5)}, []uint64{id(t, testSecond, 2, 0)})
	b := logOf(rec, 1, kindBatch, []uint64{id(t, testSecond, 1, 1), id(t, testSecond, 1, 2), id(t, testSecond+1, 1, 0)})
	res := check(baseInput(rec, a, b))
	if len(res.Violations) != 0 {
		t.Fatalf("violations in a clean run: %v", res.Violations)
	}
	if res.IDsChecked != 6 || res.Calls["next"] != 4 || res.IDs["batch"] != 3 {
		t.Fatalf("counted %d IDs, %d next calls, %d batch IDs; want 6, 4, 3", res.IDsChecked, res.Calls["next"], res.IDs["batch"])
	}
	if n := res.Errors["deadline, last: attempt timed out"]; n != 1 {
		t.Fatalf("errors by kind %v; want one timed-out call", res.Errors)
	}
}

func TestCheckFindsDuplicatesAcrossClients(t *testing.T) {
	rec := newRecorder(time.Now())
	dup := id(t, testSecond, 2, 7)
	a := logOf(rec, 0, kindPrefetch, []uint64{id(t, testSecond, 2, 6), dup})
	b := logOf(rec, 1, kindBlocks, []uint64{dup, id(t, testSecond, 2, 8)})
	res := check(baseInput(rec, a, b))
	if res.Duplicates != 1 {
		t.Fatalf("found %d duplicates, want 1", res.Duplicates)
	}
	if len(res.Violations) != 1 || !strings.Contains(res.Violations[0], "client 0 (prefetch") || !strings.Contains(res.Violations[0], "client 1 (blocks") {
		t.Fatalf("violations %q do not name both receivers", res.Violations)
	}
}

func TestCheckOrderWithinAClaim(t *testing.T) {
	rec := newRecorder(time.Now())
	next := logOf(rec, 0, kindNext, []uint64{id(t, testSecond, 1, 5)}, []uint64{id(t, testSecond, 1, 4)})
	res := check(baseInput(rec, next))
	if res.OrderViolations != 1 {
		t.Fatalf("order violations %d, want 1 (ID lower than the previous one of the same claim)", res.OrderViolations)
	}

	batch := logOf(rec, 1, kindBatch, []uint64{id(t, testSecond, 1, 9), id(t, testSecond, 1, 9)})
	res = check(baseInput(rec, batch))
	if res.OrderViolations == 0 {
		t.Fatal("a batch reply repeating an ID is not an order violation")
	}
	// An instance's lanes: one reply may span worker IDs, increasing.
	lanes := logOf(rec, 2, kindBatch, []uint64{id(t, testSecond, 1, 9), id(t, testSecond, 2, 10)})
	if res = check(baseInput(rec, lanes)); res.OrderViolations != 0 {
		t.Fatalf("a batch reply over two lanes, increasing, gave %d order violations, want 0", res.OrderViolations)
	}
	backwards := logOf(rec, 2, kindBatch, []uint64{id(t, testSecond, 2, 9), id(t, testSecond, 1, 10)})
	if res = check(baseInput(rec, backwards)); res.OrderViolations != 1 {
		t.Fatalf("a batch reply going back to a lower worker ID in one second gave %d order violations, want 1", res.OrderViolations)
	}
}

func TestCheckOrderAcrossClaimsIsAllowed(t *testing.T) {
	// Worker 1's second claim starts after second testSecond+10. A zombie
	// of the first claim answering after the successor is not an order
	// violation: the IDs belong to different claims.
	rec := newRecorder(time.Now())
	next := logOf(rec, 0, kindNext,
		[]uint64{id(t, testSecond+11, 1, 0)}, // second claim
		[]uint64{id(t, testSecond+5, 1, 0)},  // first claim (zombie)
		[]uint64{id(t, testSecond+12, 1, 0)}, // second claim again
	)
	in := baseInput(rec, next)
	in.claims[""] = newClaimBook(map[uint64][]int64{1: {testSecond + 10, 0}})
	if res := check(in); len(res.Violations) != 0 {
		t.Fatalf("violations across claims: %v", res.Violations)
	}
	// Within the second claim a decrease is still caught.
	next = logOf(rec, 0, kindNext, []uint64{id(t, testSecond+12, 1, 0)}, []uint64{id(t, testSecond+11, 1, 0)})
	in.clients = []*clientLog{next}
	if res := check(in); res.OrderViolations != 1 {
		t.Fatalf("order violations %d within the second claim, want 1", res.OrderViolations)
	}
}

func TestCheckBlockReordersAreCountedNotViolations(t *testing.T) {
	rec := newRecorder(time.Now())
	blocks := logOf(rec, 3, kindBlocks, []uint64{id(t, testSecond, 1, 100), id(t, testSecond, 1, 101)}, []uint64{id(t, testSecond, 1, 50)})
	res := check(baseInput(rec, blocks))
	if res.BlockReorders != 1 || len(res.Violations) != 0 {
		t.Fatalf("block reorders %d, violations %v; want 1 and none", res.BlockReorders, res.Violations)
	}
}

func TestCheckUnclaimedIDs(t *testing.T) {
	rec := newRecorder(time.Now())
	// Worker 7 was never claimed; worker 1's only claim starts after
	// testSecond+10.
	next := logOf(rec, 0, kindNext, []uint64{id(t, testSecond, 7, 0)}, []uint64{id(t, testSecond+3, 1, 0)})
	in := baseInput(rec, next)
	in.claims[""] = newClaimBook(map[uint64][]int64{1: {testSecond + 10}})
	if res := check(in); res.Unclaimed != 2 {
		t.Fatalf("unclaimed %d, want 2", res.Unclaimed)
	}
}

func TestCheckLateCalls(t *testing.T) {
	rec := newRecorder(time.Now())
	l := &clientLog{id: 0, kind: kindNext}
	l.record(rec, rec.origin, 3900*time.Millisecond, []uint64{id(t, testSecond, 1, 0)}, nil) // within the grace
	l.record(rec, rec.origin, 4100*time.Millisecond, []uint64{id(t, testSecond, 1, 1)}, nil) // beyond
	res := check(baseInput(rec, l))
	if res.Late != 1 || res.MaxOverrun != 1100*time.Millisecond {
		t.Fatalf("late %d, max overrun %s; want 1, 1.1s", res.Late, res.MaxOverrun)
	}
}

func TestCheckUnclearErrors(t *testing.T) {
	rec := newRecorder(time.Now())
	l := &clientLog{id: 0, kind: kindBatch}
	l.record(rec, rec.origin, time.Millisecond, nil, &uidclient.ServiceError{Subject: "uid.batch", Code: protocol.CodeBadRequest, Description: "count is 0"})
	l.record(rec, rec.origin, time.Millisecond, nil, errors.New("something odd"))
	res := check(baseInput(rec, l))
	if len(res.Violations) != 1 || !strings.Contains(res.Violations[0], "without a clear, expected error: 2") {
		t.Fatalf("violations %q; want the two unclear errors", res.Violations)
	}
}

func TestUnexplainedFailures(t *testing.T) {
	s := time.Second
	in := checkInput{
		faults: []faultRecord{
			{Kind: faultKill9, Start: 10 * s, End: 11 * s, Fleet: mysqlFleet.name},
			{Kind: faultCutShort, Start: 30 * s, End: 32 * s, Fleet: mysqlFleet.name},
			{Kind: faultNATSPause, Start: 50 * s, End: 53 * s},
			{Kind: faultMySQLKill, Start: 70 * s, End: 73 * s, Fleet: mysqlFleet.name},
			{Kind: faultPartitionShort, Start: 90 * s, End: 92 * s, Fleet: kvFleet.name},
			{Kind: faultMySQLPause, Start: 110 * s, End: 112 * s, Fleet: mysqlFleet.name},
			{Kind: faultKillKVLeader, Start: 111 * s, End: 113 * s},
		},
		settle: 4 * s, cutSettle: s,
	}
	mysql, kv := mysqlFleet.name, kvFleet.name
	for _, tc := range []struct {
		fleet      string
		start, end time.Duration
		want       string
	}{
		{mysql, 10 * s, 13 * s, ""},                          // during the kill
		{mysql, 14 * s, 17 * s, ""},                          // within the settle time
		{mysql, 16 * s, 19 * s, "while no fault was active"}, // after it
		{kv, 10 * s, 13 * s, "while no fault was active"},    // the kill was of a MySQL-fleet dispenser
		{mysql, 31 * s, 34 * s, "during mysql-cut-short, a store outage shorter than the lease TTL"},
		{mysql, 33 * s, 36 * s, "during mysql-cut-short, a store outage shorter than the lease TTL"}, // within its settle time
		{kv, 31 * s, 34 * s, "while no fault was active"},                                            // MySQL is not the KV fleet's store
		{mysql, 48 * s, 51 * s, ""},                                                                  // the NATS pause began while it ran
		{kv, 48 * s, 51 * s, ""},                                                                     // and touches both fleets
		{mysql, 71 * s, 72 * s, "during mysql-kill, a store outage shorter than the lease TTL"},
		{mysql, 68 * s, 71 * s, "during mysql-kill, a store outage shorter than the lease TTL"}, // it began while the call ran
		{kv, 90 * s, 91 * s, ""},
		{mysql, 90 * s, 91 * s, "while no fault was active"}, // k0's partition
		// A KV leader kill beside a MySQL ride-out fault: the KV fleet's
		// failure is the kill's; the MySQL fleet's must still ride out.
		{kv, 111 * s, 112 * s, ""},
		{mysql, 110 * s, 111 * s, "during mysql-pause, a store outage shorter than the lease TTL"},
		{mysql, 2 * s, 5 * s, "while no fault was active"},
	} {
		if got := in.unexplainedFailure(tc.fleet, tc.start, tc.end); got != tc.want {
			t.Errorf("%s failure %s..%s: %q, want %q", tc.fleet, tc.start, tc.end, got, tc.want)
		}
	}
}

func TestClassify(t *testing.T) {
	deadline := context.DeadlineExceeded
	for _, tc := range []struct {
		err   error
		kind  string
		clear bool
	}{
		{fmt.Errorf("natsio: uid.next: %w after 4 attempt(s); last error: %w", deadline,
			&uidclient.ServiceError{Subject: "uid.next", Code: protocol.CodeUnavailable, Description: "worker claim lost: lease expired"}),
			"deadline, last: 503 worker claim lost", true},
		{fmt.Errorf("natsio: uid.next: %w after 9 attempt(s); last error: %w", deadline, errors.New("nats: no responders available for request")),
			"deadline, last: no responders", true},
		{fmt.Errorf("natsio: uid.next: %w after 3 attempt(s)", deadline), "deadline, last: attempt timed out", true},
		{fmt.Errorf("natsio: prefetcher empty: %w", deadline), "deadline, prefetcher empty", true},
		{deadline, "deadline, no block", true},
		{&uidclient.ServiceError{Code: protocol.CodeBadRequest}, "400 bad request", false},
		{&uidclient.ServiceError{Code: protocol.CodeInternal, Description: "internal error: x"}, "unexpected reply 500 internal error: x", false},
		{uidclient.ErrPrefetcherClosed, "source closed", false},
		{&uidclient.HomeUnreachableError{Subject: "uid.seq.orders.next", Sequence: "orders", Home: "east", Err: nats.ErrNoResponders},
			kindHomeUnreachable, true},
		{errors.New("read 12 bytes"), "unclassified: read N bytes", false},
	} {
		kind, clear := classify(tc.err)
		if kind != tc.kind || clear != tc.clear {
			t.Errorf("classify(%v) = %q, %v; want %q, %v", tc.err, kind, clear, tc.kind, tc.clear)
		}
	}
}

func TestClaimBook(t *testing.T) {
	b := newClaimBook(map[uint64][]int64{3: {200, 0, 100, 100}})
	for _, tc := range []struct {
		second int64
		want   int
	}{{0, 0}, {1, 1}, {100, 1}, {101, 2}, {200, 2}, {201, 3}} {
		if got := b.claim(3, tc.second); got != tc.want {
			t.Errorf("claim(3, %d) = %d, want %d", tc.second, got, tc.want)
		}
	}
	if got := b.claim(4, 50); got != 0 {
		t.Errorf("claim of an unclaimed worker = %d, want 0", got)
	}
}

func TestGrowth(t *testing.T) {
	pol := growthPolicy{warmUp: 5 * time.Second, minLife: 30 * time.Second, early: 10 * time.Second, lateKeep: 3}
	series := func(lived time.Duration, goroutines func(at time.Duration) int) []sample {
		var out []sample
		for at := time.Duration(0); at <= lived; at += time.Second {
			out = append(out, sample{at: at, fds: 12, rssKiB: 40 << 10, goroutines: goroutines(at)})
		}
		return out
	}
	flat := series(60*time.Second, func(at time.Duration) int { return 30 + int(at/time.Second)%5 })
	if v, fig := pol.growth(flat, 60*time.Second, growthLimits); len(v) != 0 || fig["goroutines"] != [2]int64{34, 30} {
		t.Fatalf("flat series: violations %v, figures %v", v, fig)
	}
	leaking := series(120*time.Second, func(at time.Duration) int { return 30 + int(at/time.Second) })
	if v, _ := pol.growth(leaking, 120*time.Second, growthLimits); len(v) != 1 || !strings.HasPrefix(v[0], "goroutines grew") {
		t.Fatalf("a goroutine leak of one per second gave %v", v)
	}
	if v, fig := pol.growth(leaking[:20], 20*time.Second, growthLimits); v != nil || fig != nil {
		t.Fatalf("a short life was judged: %v %v", v, fig)
	}
}

func TestGoroutinesFromMetrics(t *testing.T) {
	text := "# HELP go_goroutines Number of goroutines that currently exist.\n# TYPE go_goroutines gauge\ngo_goroutines 37\ngo_threads 9\n"
	if n := goroutinesFromMetrics(strings.NewReader(text)); n != 37 {
		t.Fatalf("go_goroutines = %d, want 37", n)
	}
	if n := goroutinesFromMetrics(strings.NewReader("go_threads 9\n")); n != -1 {
		t.Fatalf("without the gauge: %d, want -1", n)
	}
}

func TestCheckExcusesCallsInAStallOfTheSoak(t *testing.T) {
	rec := newRecorder(time.Now())
	l := &clientLog{id: 0, kind: kindPrefetch}
	// Both late by 2.5s; the first overlaps a 3s stall of the soak.
	l.record(rec, rec.origin.Add(10*time.Second), 5500*time.Millisecond, []uint64{id(t, testSecond, 1, 0)}, nil)
	l.record(rec, rec.origin.Add(30*time.Second), 5500*time.Millisecond, []uint64{id(t, testSecond, 1, 1)}, nil)
	in := baseInput(rec, l)
	in.stalls = []stall{{At: 12 * time.Second, Length: 3 * time.Second}}
	res := check(in)
	if res.Late != 1 || res.Stalled != 1 {
		t.Fatalf("late %d, excused %d; want 1 and 1", res.Late, res.Stalled)
	}
	// A stall shorter than the overrun does not excuse it.
	in.stalls = []stall{{At: 12 * time.Second, Length: time.Second}}
	if res = check(in); res.Late != 2 || res.Stalled != 0 {
		t.Fatalf("with a short stall: late %d, excused %d; want 2 and 0", res.Late, res.Stalled)
	}
}

func TestCovering(t *testing.T) {
	stalls := []stall{{At: time.Second, Length: time.Second}, {At: 5 * time.Second, Length: 3 * time.Second}}
	if got := covering(stalls, 1500*time.Millisecond, 6*time.Second); got != 3*time.Second {
		t.Fatalf("covering = %s, want the longer overlapping stall, 3s", got)
	}
	if got := covering(stalls, 2500*time.Millisecond, 4*time.Second); got != 0 {
		t.Fatalf("covering a span between the stalls = %s, want 0", got)
	}
}

func TestCheckDuplicatesAreCountedPerFleet(t *testing.T) {
	rec := newRecorder(time.Now())
	same := id(t, testSecond, 1, 3)
	// The same value from both fleets: separate ID spaces, no duplicate.
	a := logOf(rec, 0, kindNext, []uint64{same})
	a.fleet = mysqlFleet.name
	b := logOf(rec, 1, kindNext, []uint64{same})
	b.fleet = kvFleet.name
	in := baseInput(rec, a, b)
	in.claims = map[string]claimBook{mysqlFleet.name: {1: {0}}, kvFleet.name: {1: {0}}}
	if res := check(in); res.Duplicates != 0 || len(res.Violations) != 0 || res.FleetIDs[kvFleet.name] != 1 {
		t.Fatalf("across fleets: %d duplicates, violations %q, KV fleet IDs %d; want 0, none, 1", res.Duplicates, res.Violations, res.FleetIDs[kvFleet.name])
	}
	// Twice within the KV fleet: a duplicate of that fleet.
	c := logOf(rec, 2, kindBatch, []uint64{same})
	c.fleet = kvFleet.name
	in.clients = append(in.clients, c)
	res := check(in)
	if res.Duplicates != 1 || res.FleetDuplicates[kvFleet.name] != 1 || res.FleetDuplicates[mysqlFleet.name] != 0 {
		t.Fatalf("within the KV fleet: %d duplicates (by fleet %v); want 1 in %s", res.Duplicates, res.FleetDuplicates, kvFleet.name)
	}
	if len(res.Violations) != 1 || !strings.Contains(res.Violations[0], "fleet uidkv") || strings.Contains(res.Violations[0], "client 0") {
		t.Fatalf("violations %q; want one naming fleet uidkv's clients 1 and 2 only", res.Violations)
	}
}

func TestFaultWindowsJudgeLeaderKills(t *testing.T) {
	rec := newRecorder(time.Now())
	// 200 calls a second for 10 s, one every 5 ms; the calls failing are
	// given by failing(i).
	calls := func(failing func(i int) bool) *clientLog {
		l := &clientLog{kind: kindNext}
		for i := range 2000 {
			var err error
			if failing(i) {
				err = fmt.Errorf("natsio: uid.next: %w after 3 attempt(s)", context.DeadlineExceeded)
			}
			l.record(rec, rec.origin.Add(time.Duration(i)*5*time.Millisecond), time.Millisecond, []uint64{uint64(i)}, err)
		}
		return l
	}
	s := time.Second
	kill := faultRecord{Kind: faultKillKVLeader, Start: 2 * s, End: 4 * s, Target: "soak-n1"}
	pause := faultRecord{Kind: faultNATSPause, Start: 6 * s, End: 8 * s, Target: "soak-n2"}
	// 3 s of window (with the settle second): 601 calls. 5 failing in
	// the kill's window are below 1%; so are 400 failing in the pause's,
	// which is not judged.
	few := calls(func(i int) bool { return (i >= 400 && i < 405) || (i >= 1200 && i < 1600) })
	w, v := faultWindows([]*clientLog{few}, []faultRecord{kill, pause}, leaderKill)
	if len(v) != 0 {
		t.Fatalf("violations %q; want none", v)
	}
	if got := *w[faultKillKVLeader]; got.Faults != 1 || got.Calls != 601 || got.Failed != 5 {
		t.Fatalf("kill window %+v; want 1 fault, 601 calls, 5 failed", got)
	}
	if got := w[faultNATSPause]; got.Failed != 400 {
		t.Fatalf("pause window %+v; want 400 failed", got)
	}
	// 7 failing: above 1% of 601.
	many := calls(func(i int) bool { return i >= 400 && i < 407 })
	if _, v := faultWindows([]*clientLog{many}, []faultRecord{kill}, leaderKill); len(v) != 1 || !strings.Contains(v[0], "7 of 601") {
		t.Fatalf("violations %q; want one for 7 of 601 calls", v)
	}
	// Too few calls to judge.
	sparse := &clientLog{kind: kindNext}
	for i := range 50 {
		sparse.record(rec, rec.origin.Add(2*s+time.Duration(i)*time.Millisecond), time.Millisecond, nil, context.DeadlineExceeded)
	}
	if _, v := faultWindows([]*clientLog{sparse}, []faultRecord{kill}, leaderKill); len(v) != 0 {
		t.Fatalf("violations %q on 50 calls; want none", v)
	}
}

// A fault of one fleet's store counts that fleet's calls only: the KV
// fleet's calls must not dilute (or fail) a MySQL outage's window.
func TestFaultWindowsCountTheFleetsAFaultTouches(t *testing.T) {
	rec := newRecorder(time.Now())
	logOf := func(fleet string, failing bool) *clientLog {
		l := &clientLog{kind: kindNext, fleet: fleet}
		for i := range 100 {
			var err error
			if failing {
				err = context.DeadlineExceeded
			}
			l.record(rec, rec.origin.Add(time.Duration(i)*10*time.Millisecond), time.Millisecond, []uint64{uint64(i)}, err)
		}
		return l
	}
	cut := faultRecord{Kind: faultCutShort, Start: 0, End: time.Second, Fleet: mysqlFleet.name}
	pause := faultRecord{Kind: faultNATSPause, Start: 0, End: time.Second}
	clients := []*clientLog{logOf(mysqlFleet.name, false), logOf(kvFleet.name, true)}
	w, _ := faultWindows(clients, []faultRecord{cut, pause}, leaderKill)
	if got := *w[faultCutShort]; got.Calls != 100 || got.Failed != 0 {
		t.Errorf("MySQL cut window %+v; want the MySQL fleet's 100 calls, none failed", got)
	}
	if got := *w[faultNATSPause]; got.Calls != 200 || got.Failed != 100 {
		t.Errorf("NATS pause window %+v; want both fleets' 200 calls, 100 failed", got)
	}
}
