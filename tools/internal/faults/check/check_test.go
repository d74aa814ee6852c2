package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/history"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// ops builds a history: each call an invoke and, unless typ is "", its
// completion.
type builder struct {
	ops  []history.Op
	t    int64
	call int64
}

func (b *builder) add(process, f, name string, n int, typ string, values ...uint64) {
	b.call++
	b.t += int64(time.Millisecond)
	b.ops = append(b.ops, history.Op{Time: b.t, Process: process, Call: b.call, Type: history.Invoke, Func: f, Name: name, Count: n})
	if typ == "" {
		return
	}
	b.t += int64(time.Millisecond)
	b.ops = append(b.ops, history.Op{Time: b.t, Process: process, Call: b.call, Type: typ, Func: f, Name: name, Count: n, Values: values})
}

func writeLog(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "d.log")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// cleanInput is a history and logs with nothing wrong: every later test
// adds one fault to it.
func cleanInput(t *testing.T) (*builder, []Log) {
	b := &builder{}
	b.add("c0/0", history.FuncIDs, "", 3, history.OK, 1, 2, 3)
	b.add("c0/1", history.FuncIDs, "", 2, history.OK, 4, 5)
	b.add("c0/1", history.FuncIDs, "", 2, history.Fail)
	b.add("c0/2", history.FuncIDs, "", 2, history.Unknown)
	b.add("c0/0", history.FuncSeq, "orders", 2, history.OK, 10, 11)
	b.add("c0/1", history.FuncSeq, "orders", 2, history.OK, 12, 13)
	b.add("c0/1", history.FuncSeq, "invoices", 2, history.OK, 10, 11) // another name: no duplicate
	d0 := writeLog(t,
		`{"level":"INFO","msg":"x","event":"lease.acquired","worker_id":0,"owner":"a","after":100,"reserved":160}`,
		`{"level":"DEBUG","msg":"x","event":"lease.reserved","worker_id":0,"owner":"a","reserved":220}`,
		`{"level":"INFO","msg":"x","event":"lease.released","worker_id":0,"owner":"a","reserved":220,"kept":180}`,
		`{"level":"DEBUG","msg":"x","event":"sequence.segment","name":"orders","first":1,"last":100}`,
		`not JSON: the runtime's own output`,
	)
	d1 := writeLog(t,
		// Starts right after what a kept: no overlap.
		`{"level":"INFO","msg":"x","event":"lease.acquired","worker_id":0,"owner":"b","after":180,"reserved":240}`,
		`{"level":"INFO","msg":"x","event":"lease.acquired","worker_id":1,"owner":"b","after":100,"reserved":240}`,
		`{"level":"DEBUG","msg":"x","event":"sequence.segment","name":"orders","first":101,"last":200}`,
		`{"level":"DEBUG","msg":"x","event":"sequence.segment","name":"invoices","first":1,"last":200}`,
	)
	return b, []Log{{Process: "d0#1", Path: d0}, {Process: "d1#1", Path: d1}}
}

func check(b *builder, logs []Log) *Result {
	return Check(Input{Ops: b.ops, Logs: logs, Layout: uidcore.DefaultLayout()})
}

func TestCleanHistoryPasses(t *testing.T) {
	b, logs := cleanInput(t)
	r := check(b, logs)
	if !r.Valid {
		t.Fatalf("a clean history failed: %+v", r)
	}
	want := Calls{OK: 5, Failed: 1, Unknown: 1}
	if r.Calls != want {
		t.Errorf("calls %+v, want %+v", r.Calls, want)
	}
	if r.IDs.Acknowledged != 5 || r.IDs.Attempted != 9 || r.IDs.Indeterminate != 2 || r.Numbers.Acknowledged != 6 {
		t.Errorf("ids %+v numbers %+v", r.IDs, r.Numbers)
	}
	if r.Claims != 3 || r.Segments != 3 || r.Events["lease.acquired"] != 3 {
		t.Errorf("claims %d segments %d events %v", r.Claims, r.Segments, r.Events)
	}
}

func TestDuplicateIDCaught(t *testing.T) {
	b, logs := cleanInput(t)
	layout := uidcore.DefaultLayout()
	id, err := layout.Compose(layout.EpochSecond()+1000, 7, 3)
	if err != nil {
		t.Fatal(err)
	}
	b.add("c1/0", history.FuncIDs, "", 2, history.OK, 9, id)
	b.add("c2/5", history.FuncIDs, "", 1, history.OK, id)
	r := check(b, logs)
	if r.Valid || r.IDs.Duplicated != 1 || len(r.Duplicates) != 1 {
		t.Fatalf("duplicate not caught: %+v", r)
	}
	d := r.Duplicates[0]
	if d.Value != id || d.Worker != 7 || d.Second != layout.EpochSecond()+1000 || len(d.Calls) != 2 || len(d.Acked) != 2 {
		t.Errorf("duplicate reported as %+v", d)
	}
	if r.DuplicatesAfter["none (IDs of )"] != 1 {
		t.Errorf("duplicates after: %v", r.DuplicatesAfter)
	}
}

// Fleets are independent: the same value from two fleets is no
// duplicate.
func TestFleetsApart(t *testing.T) {
	b, logs := cleanInput(t)
	b.add("c1/0", history.FuncIDs, "", 1, history.OK, 1)
	b.ops[len(b.ops)-1].Fleet, b.ops[len(b.ops)-2].Fleet = "uidmy", "uidmy"
	if r := check(b, logs); !r.Valid || r.IDs.Duplicated != 0 {
		t.Fatalf("a value of another fleet counted as a duplicate: %+v", r)
	}
	b.add("c1/0", history.FuncIDs, "", 1, history.OK, 1)
	b.ops[len(b.ops)-1].Fleet, b.ops[len(b.ops)-2].Fleet = "uidmy", "uidmy"
	if r := check(b, logs); r.Valid || r.IDs.Duplicated != 1 || r.Duplicates[0].Fleet != "uidmy" {
		t.Fatalf("a duplicate within a fleet not caught: %+v", r)
	}
}

func TestDuplicateNumberCaught(t *testing.T) {
	b, logs := cleanInput(t)
	b.add("c1/0", history.FuncSeq, "orders", 1, history.OK, 12)
	r := check(b, logs)
	if r.Valid || r.Numbers.Duplicated != 1 || r.IDs.Duplicated != 0 {
		t.Fatalf("duplicate number not caught: %+v", r)
	}
}

func TestLostAckCaught(t *testing.T) {
	for name, add := range map[string]func(b *builder){
		"short reply":     func(b *builder) { b.add("c1/0", history.FuncIDs, "", 3, history.OK, 20, 21) },
		"never completed": func(b *builder) { b.add("c1/0", history.FuncSeq, "orders", 4, "") },
	} {
		t.Run(name, func(t *testing.T) {
			b, logs := cleanInput(t)
			add(b)
			r := check(b, logs)
			if r.Valid || r.IDs.Lost+r.Numbers.Lost == 0 {
				t.Fatalf("lost acknowledgment not caught: %+v", r)
			}
		})
	}
}

func TestLeaseOverlapCaught(t *testing.T) {
	b, logs := cleanInput(t)
	// A third owner claims worker 1 after 200, below b's reservation 240
	// (a store that forgot b's renewal).
	logs = append(logs, Log{Process: "d2#1", Path: writeLog(t,
		`{"level":"INFO","msg":"x","event":"lease.acquired","worker_id":1,"owner":"c","after":200,"reserved":260}`,
	)})
	r := check(b, logs)
	if r.Valid || len(r.LeaseOverlaps) != 1 {
		t.Fatalf("lease overlap not caught: %+v", r)
	}
	if o := r.LeaseOverlaps[0]; o.Lo != 200 || o.Hi != 240 || o.Key != `fleet "" worker 1` {
		t.Errorf("overlap reported as %+v", o)
	}
}

// Another fleet's claims and segments are its own: the same worker ID
// and numbers there overlap nothing.
func TestLogsOfAnotherFleetApart(t *testing.T) {
	b, logs := cleanInput(t)
	logs = append(logs, Log{Process: "e0#1", Fleet: "uidmy", Path: writeLog(t,
		`{"level":"INFO","msg":"x","event":"lease.acquired","worker_id":1,"owner":"c","after":200,"reserved":260}`,
		`{"level":"DEBUG","msg":"x","event":"sequence.segment","name":"orders","first":150,"last":250}`,
	)})
	if r := check(b, logs); !r.Valid {
		t.Fatalf("another fleet's log overlapped: %+v %+v", r.LeaseOverlaps, r.SegmentOverlaps)
	}
}

// A process that lost a worker ID to a store regression and claimed it
// again under a new owner logs the new owner's first reservation before
// its lease.acquired: it belongs to the new claim, not the old one (which
// would then seem to overlap the new).
func TestReclaimBySameProcessNoFalseOverlap(t *testing.T) {
	b, logs := cleanInput(t)
	logs = append(logs, Log{Process: "d2#1", Path: writeLog(t,
		`{"level":"INFO","msg":"x","event":"lease.acquired","worker_id":7,"owner":"old","after":0,"reserved":500}`,
		`{"level":"ERROR","msg":"x","event":"lease.regression","worker_id":7,"owner":"old","remembered":500}`,
		`{"level":"DEBUG","msg":"x","event":"lease.reserved","worker_id":7,"owner":"new","reserved":900}`,
		`{"level":"INFO","msg":"x","event":"lease.acquired","worker_id":7,"owner":"new","after":600,"reserved":900}`,
	)})
	r := check(b, logs)
	if !r.Valid || len(r.LeaseOverlaps) != 0 {
		t.Fatalf("a false overlap: %+v", r.LeaseOverlaps)
	}
	// The same reclaim starting below what the old owner reserved is an
	// overlap.
	logs = append(logs, Log{Process: "d3#1", Path: writeLog(t,
		`{"level":"INFO","msg":"x","event":"lease.acquired","worker_id":8,"owner":"old","after":0,"reserved":500}`,
		`{"level":"DEBUG","msg":"x","event":"lease.reserved","worker_id":8,"owner":"new","reserved":900}`,
		`{"level":"INFO","msg":"x","event":"lease.acquired","worker_id":8,"owner":"new","after":400,"reserved":900}`,
	)})
	if r := check(b, logs); r.Valid || len(r.LeaseOverlaps) != 1 || r.LeaseOverlaps[0].Lo != 400 || r.LeaseOverlaps[0].Hi != 500 {
		t.Fatalf("overlap not caught: %+v", r.LeaseOverlaps)
	}
}

// A dispenser that logs lease.durable issues only durable seconds (D1'):
// a claim lost before its first reservation was durable issued nothing,
// and a reclaim after the same recorded second overlaps nothing; a claim
// whose durable seconds reach past another's start still overlaps.
func TestDurableLeasesBoundClaims(t *testing.T) {
	b, logs := cleanInput(t)
	logs = append(logs, Log{Process: "e0#1", Fleet: "uidmy", Path: writeLog(t,
		`{"level":"INFO","msg":"x","event":"lease.acquired","worker_id":2,"owner":"first","after":0,"reserved":876}`,
		`{"level":"DEBUG","msg":"x","event":"lease.reserved","worker_id":2,"owner":"first","reserved":880}`,
		`{"level":"ERROR","msg":"x","event":"lease.regression","worker_id":2,"owner":"first","remembered":880}`,
		`{"level":"DEBUG","msg":"x","event":"lease.durable","worker_id":2,"owner":"again","reserved":0}`,
		`{"level":"INFO","msg":"x","event":"lease.acquired","worker_id":2,"owner":"again","after":0,"reserved":890}`,
		`{"level":"DEBUG","msg":"x","event":"lease.durable","worker_id":2,"owner":"again","reserved":890}`,
	)})
	if r := check(b, logs); !r.Valid || len(r.LeaseOverlaps) != 0 {
		t.Fatalf("a claim that never became durable overlapped: %+v", r.LeaseOverlaps)
	}
	logs = append(logs, Log{Process: "e1#1", Fleet: "uidmy", Path: writeLog(t,
		`{"level":"INFO","msg":"x","event":"lease.acquired","worker_id":2,"owner":"third","after":850,"reserved":950}`,
		`{"level":"DEBUG","msg":"x","event":"lease.durable","worker_id":2,"owner":"third","reserved":950}`,
	)})
	r := check(b, logs)
	if r.Valid || len(r.LeaseOverlaps) != 1 || r.LeaseOverlaps[0].Lo != 850 || r.LeaseOverlaps[0].Hi != 890 {
		t.Fatalf("durable seconds overlapping not caught: %+v", r.LeaseOverlaps)
	}
}

func TestSegmentOverlapCaught(t *testing.T) {
	b, logs := cleanInput(t)
	logs = append(logs, Log{Process: "d2#1", Path: writeLog(t,
		`{"level":"DEBUG","msg":"x","event":"sequence.segment","name":"orders","first":150,"last":250}`,
	)})
	r := check(b, logs)
	if r.Valid || len(r.SegmentOverlaps) != 1 || r.SegmentOverlaps[0].Lo != 150 || r.SegmentOverlaps[0].Hi != 200 {
		t.Fatalf("segment overlap not caught: %+v", r)
	}
}

// A segment the instance refused as a regression handed nothing out: it
// is no overlap.
func TestRefusedSegmentIsNoOverlap(t *testing.T) {
	b, logs := cleanInput(t)
	logs = append(logs, Log{Process: "d2#1", Path: writeLog(t,
		`{"level":"DEBUG","msg":"x","event":"sequence.segment","name":"orders","first":150,"last":250}`,
		`{"level":"WARN","msg":"x","event":"sequence.regression","name":"orders","remembered":400}`,
	)})
	r := check(b, logs)
	if !r.Valid {
		t.Fatalf("a refused segment counted: %+v", r.SegmentOverlaps)
	}
	if r.Events["sequence.regression"] != 1 {
		t.Errorf("events %v", r.Events)
	}
}

// A closing instance gives its segments' unused rests back
// (sequence.given_back) and the next segment, another instance's,
// starts at the rest's first number: only the part before the rest was
// the first instance's (a CI fault run counted the rest as an overlap).
// An overlap with the part it did keep is still one.
func TestGivenBackRestIsNoOverlap(t *testing.T) {
	b, logs := cleanInput(t)
	logs = append(logs,
		Log{Process: "d2#1", Path: writeLog(t,
			`{"level":"DEBUG","msg":"x","event":"sequence.segment","name":"orders","first":201,"last":300}`,
			`{"level":"DEBUG","msg":"x","event":"sequence.segment","name":"orders","first":301,"last":400}`,
			`{"level":"DEBUG","msg":"x","event":"sequence.given_back","name":"orders","first":301,"last":400}`,
			`{"level":"DEBUG","msg":"x","event":"sequence.given_back","name":"orders","first":251,"last":300}`,
		)},
		Log{Process: "d3#1", Path: writeLog(t,
			`{"level":"DEBUG","msg":"x","event":"sequence.segment","name":"orders","first":251,"last":500}`,
		)})
	if r := check(b, logs); !r.Valid {
		t.Fatalf("rests given back and taken again counted: %+v", r.SegmentOverlaps)
	}
	logs = append(logs, Log{Process: "d4#1", Path: writeLog(t,
		`{"level":"DEBUG","msg":"x","event":"sequence.segment","name":"orders","first":241,"last":250}`,
	)})
	r := check(b, logs)
	if r.Valid || len(r.SegmentOverlaps) != 1 || r.SegmentOverlaps[0].Lo != 241 || r.SegmentOverlaps[0].Hi != 250 {
		t.Fatalf("an overlap with the part kept not caught: %+v", r.SegmentOverlaps)
	}
}

func TestWindowStats(t *testing.T) {
	b, logs := cleanInput(t)
	start := time.Unix(0, b.t+1)
	b.add("c1/0", history.FuncIDs, "", 1, history.Unknown)
	b.add("c1/0", history.FuncIDs, "", 1, history.OK, 99)
	end := time.Unix(0, b.t)
	r := Check(Input{Ops: b.ops, Logs: logs, Layout: uidcore.DefaultLayout(),
		Windows: []Window{{Kind: "partition", Start: start, End: end}}})
	p := r.ByKind["partition"]
	if p == nil || p.Calls.OK != 1 || p.Calls.Unknown != 1 || p.IDs != 1 || p.FailedPercent != 50 {
		t.Fatalf("partition window: %+v", p)
	}
	if o := r.ByKind["outside"]; o == nil || o.Calls.OK != 5 {
		t.Fatalf("outside: %+v", o)
	}

	// A value first acknowledged inside the window and again after it
	// is put down to the window's fault, though another began since.
	b.t += int64(time.Second)
	later := time.Unix(0, b.t)
	b.add("c1/0", history.FuncIDs, "", 1, history.OK, 99)
	r = Check(Input{Ops: b.ops, Logs: logs, Layout: uidcore.DefaultLayout(), Windows: []Window{
		{Kind: "partition", What: "cut", Start: start, End: end},
		{Kind: "pause", What: "stop", Start: later.Add(-time.Millisecond), End: later},
	}})
	if r.DuplicatesAfter["partition: cut (IDs of )"] != 1 || len(r.DuplicatesAfter) != 1 {
		t.Fatalf("repeat put down to %v", r.DuplicatesAfter)
	}
}

// The failed and unknown calls are counted by cause per window; the calls
// outside every window are split by whether they began within the
// recovery period after a window ended.
func TestWindowCausesAndRecovery(t *testing.T) {
	b := &builder{}
	fail := func(process, why string) {
		b.add(process, history.FuncIDs, "", 1, history.Fail)
		b.ops[len(b.ops)-1].Error = why
	}
	start := time.Unix(0, b.t+1)
	fail("c0/0", "no responders")
	fail("c0/0", "503 worker claim lost: worker ID 3")
	b.add("c0/0", history.FuncIDs, "", 1, history.OK, 1)
	b.ops[len(b.ops)-1].Attempts = 3
	end := time.Unix(0, b.t)
	fail("c0/0", "503 worker claim lost: worker ID 4") // within the recovery
	b.t += int64(time.Minute)
	fail("c0/0", "no responders") // long after: steady
	b.add("c0/0", history.FuncIDs, "", 1, history.OK, 2)
	r := Check(Input{Ops: b.ops, Layout: uidcore.DefaultLayout(), Recovery: 10 * time.Second,
		Windows: []Window{{Kind: "partition", Start: start, End: end}}})
	p := r.ByKind["partition"]
	if p.Causes["no responders"] != 1 || p.Causes["503 worker claim lost"] != 1 || len(p.Causes) != 2 || p.Retried != 1 {
		t.Fatalf("partition window: %+v", p)
	}
	if o := r.ByKind["outside"]; o.Calls.Failed != 2 || o.Calls.OK != 1 {
		t.Fatalf("outside: %+v", o)
	}
	after, steady := r.AfterKind["partition"], r.AfterKind["steady"]
	if after == nil || after.Calls.Failed != 1 || after.Causes["503 worker claim lost"] != 1 {
		t.Fatalf("after the partition: %+v", after)
	}
	if steady == nil || steady.Calls.Failed != 1 || steady.Calls.OK != 1 || steady.Causes["no responders"] != 1 {
		t.Fatalf("steady: %+v", steady)
	}
	if r := Check(Input{Ops: b.ops, Layout: uidcore.DefaultLayout()}); r.AfterKind != nil || r.Alone != nil {
		t.Fatalf("split without a recovery period: %v, %v", r.AfterKind, r.Alone)
	}
}

// A window's calls count alone only while no earlier window's recovery
// runs and no window of another kind overlaps them.
func TestWindowAloneLeavesOutAnotherFaultsRecovery(t *testing.T) {
	b := &builder{}
	fail := func(why string) {
		b.add("c0/0", history.FuncIDs, "", 1, history.Fail)
		b.ops[len(b.ops)-1].Error = why
	}
	failoverStart := time.Unix(0, b.t+1)
	fail("no responders") // in the failover
	failoverEnd := time.Unix(0, b.t)
	b.t += int64(time.Second)
	partitionStart := time.Unix(0, b.t+1)
	fail("no responders")                                // in the partition, 1 s after the failover: its recovery
	b.add("c0/0", history.FuncIDs, "", 1, history.OK, 1) // likewise
	b.t += int64(time.Minute)
	fail("context deadline exceeded") // in the partition, its recovery over: alone
	b.add("c0/0", history.FuncIDs, "", 1, history.OK, 2)
	b.add("c0/0", history.FuncIDs, "", 1, history.OK, 3)
	partitionEnd := time.Unix(0, b.t)
	r := Check(Input{Ops: b.ops, Layout: uidcore.DefaultLayout(), Recovery: 10 * time.Second, Windows: []Window{
		{Kind: "mysql-failover", Start: failoverStart, End: failoverEnd},
		{Kind: "partition", Start: partitionStart, End: partitionEnd},
	}})
	if p := r.ByKind["partition"]; p.Calls.Failed != 2 || p.Calls.OK != 3 {
		t.Fatalf("partition, every call: %+v", p.Calls)
	}
	p := r.Alone["partition"]
	if p == nil || p.Calls.Failed != 1 || p.Calls.OK != 2 || p.Causes["context deadline exceeded"] != 1 || len(p.Causes) != 1 {
		t.Fatalf("partition alone: %+v", p)
	}
	if f := r.Alone["mysql-failover"]; f == nil || f.Calls.Failed != 1 {
		t.Fatalf("the failover alone: %+v", f)
	}
}

// A cause keeps what tells the failures apart: a nats.go error whole,
// and the last failure of an unknown call inside its parentheses, each
// without the details after its colon.
func TestReasonKeepsTheKind(t *testing.T) {
	for err, want := range map[string]string{
		"no responders": "no responders",
		"503 worker claim has not reserved the time yet: worker ID 1, second 9 > 5":                                  "503 worker claim has not reserved the time yet",
		"nats: server is disconnected":                                                                               "nats: server is disconnected",
		"context deadline exceeded (then no responders)":                                                             "context deadline exceeded (then no responders)",
		"context deadline exceeded (then 503 worker claim has not reserved the time yet: worker ID 1, second 9 > 5)": "context deadline exceeded (then 503 worker claim has not reserved the time yet)",
		"nats: server is disconnected (then no responders)":                                                          "nats: server is disconnected (then no responders)",
	} {
		if got := reason(err); got != want {
			t.Errorf("reason(%q) = %q, want %q", err, got, want)
		}
	}
}
