package soak

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// seqCall is one synthetic sequence call: from..to in milliseconds after
// the origin, the instance that answered and the numbers (nil: failed).
type seqCall struct {
	from, to int
	inst     string
	nums     []uint64
}

func seqLog(rec *recorder, client int, kind callKind, name string, calls ...seqCall) *clientLog {
	l := &clientLog{id: client, kind: kind, seq: name}
	for _, c := range calls {
		var err error
		if c.nums == nil {
			err = fmt.Errorf("natsio: uid.seq.%s.next: %w after 3 attempt(s)", name, context.DeadlineExceeded)
		}
		l.recordFrom(rec, rec.origin.Add(time.Duration(c.from)*time.Millisecond), time.Duration(c.to-c.from)*time.Millisecond, c.nums, c.inst, err)
	}
	return l
}

func TestSequencesCleanRun(t *testing.T) {
	rec := newRecorder(time.Now())
	// Two instances with segments 1..100 (A) and 101..200 (B),
	// interleaving across clients; overlapping calls to one instance may
	// come back in either order. 7 numbers out of 1..103 received.
	a := seqLog(rec, 0, kindSeqNext, "orders",
		seqCall{0, 10, "A", []uint64{1}}, seqCall{20, 30, "B", []uint64{101}}, seqCall{40, 50, "A", []uint64{5}}, seqCall{60, 70, "", nil})
	b := seqLog(rec, 1, kindSeqBatch, "orders",
		seqCall{5, 45, "A", []uint64{2, 3, 4}}, seqCall{80, 90, "B", []uint64{102, 103}})
	c := seqLog(rec, 2, kindSeqNext, "invoices", seqCall{0, 5, "A", []uint64{1_000_000}})
	res := check(baseInput(rec, a, b, c))
	if len(res.Violations) != 0 {
		t.Fatalf("violations in a clean run: %v", res.Violations)
	}
	o := res.Sequences["orders"]
	if o.HandedOut != 8 || o.First != 1 || o.Max != 103 || o.Skipped != 95 || o.Instances != 2 || o.Calls != 6 {
		t.Fatalf("orders: %+v; want 8 handed out of 1..103, 95 skipped, 2 instances, 6 calls", o)
	}
	if want := 95.0 / 8; o.GapRatio != want {
		t.Errorf("gap ratio %v, want %v", o.GapRatio, want)
	}
	if inv := res.Sequences["invoices"]; inv.HandedOut != 1 || inv.Skipped != 0 {
		t.Errorf("invoices: %+v", inv)
	}
	// Sequence numbers are not IDs: not counted among them.
	if res.IDsChecked != 0 || res.Calls["seq-next"] != 5 || res.Errors["deadline, last: attempt timed out"] != 1 {
		t.Errorf("IDs checked %d, calls %v, errors %v", res.IDsChecked, res.Calls, res.Errors)
	}
}

func TestSequencesFindDuplicates(t *testing.T) {
	rec := newRecorder(time.Now())
	a := seqLog(rec, 0, kindSeqNext, "orders", seqCall{0, 10, "A", []uint64{7}})
	b := seqLog(rec, 1, kindSeqNext, "orders", seqCall{0, 10, "B", []uint64{7}})
	// The same number of another sequence is no duplicate.
	c := seqLog(rec, 2, kindSeqNext, "invoices", seqCall{0, 10, "A", []uint64{7}})
	res := check(baseInput(rec, a, b, c))
	if res.Sequences["orders"].Duplicates != 1 || res.Sequences["invoices"].Duplicates != 0 {
		t.Fatalf("figures %+v", res.Sequences)
	}
	if len(res.Violations) != 1 || !strings.Contains(res.Violations[0], "handed out twice: 1") || !strings.Contains(res.Violations[0], "client 1 (seq-next") {
		t.Fatalf("violations %q", res.Violations)
	}
}

func TestSequencesFindDisorderPerInstance(t *testing.T) {
	for name, tc := range map[string]struct {
		calls [][]seqCall // per client
		want  string
	}{
		"within a batch": {[][]seqCall{{{0, 10, "A", []uint64{3, 2}}}}, "2 after 3 in one reply"},
		"one client's calls": {[][]seqCall{{{0, 10, "A", []uint64{5}}, {20, 30, "A", []uint64{4}}}},
			"answered by the same instance before it started"},
		"two clients, one after the other": {[][]seqCall{{{0, 10, "A", []uint64{5}}}, {{11, 20, "A", []uint64{4}}}},
			"client 1 call 0"},
		"no instance header": {[][]seqCall{{{0, 10, "", []uint64{1}}}}, "without the Uid-Instance header"},
	} {
		t.Run(name, func(t *testing.T) {
			rec := newRecorder(time.Now())
			var logs []*clientLog
			for i, calls := range tc.calls {
				logs = append(logs, seqLog(rec, i, kindSeqBatch, "orders", calls...))
			}
			res := check(baseInput(rec, logs...))
			if len(res.Violations) != 1 || !strings.Contains(res.Violations[0], tc.want) {
				t.Fatalf("violations %q; want one saying %q", res.Violations, tc.want)
			}
		})
	}
	// The same numbers from different instances, or from overlapping
	// calls, are in order.
	rec := newRecorder(time.Now())
	a := seqLog(rec, 0, kindSeqNext, "orders", seqCall{0, 10, "A", []uint64{5}}, seqCall{20, 30, "B", []uint64{4}})
	b := seqLog(rec, 1, kindSeqNext, "orders", seqCall{5, 25, "A", []uint64{3}})
	if res := check(baseInput(rec, a, b)); len(res.Violations) != 0 {
		t.Fatalf("violations %q for calls in order", res.Violations)
	}
}

// A failed sequence call counts in the failure checks like any other.
func TestSequenceFailureInQuietStretch(t *testing.T) {
	rec := newRecorder(time.Now())
	a := seqLog(rec, 0, kindSeqNext, "orders", seqCall{0, 10, "", nil})
	in := baseInput(rec, a)
	in.faults = []faultRecord{{Kind: faultKill9, Start: time.Hour, End: time.Hour + time.Second}}
	res := check(in)
	if res.Unexplained != 1 {
		t.Fatalf("unexplained %d; want the failure in a quiet stretch", res.Unexplained)
	}
}

// Many duplicates are counted, a few shown.
func TestSequencesManyDuplicates(t *testing.T) {
	rec := newRecorder(time.Now())
	var nums []uint64
	for n := range uint64(1000) {
		nums = append(nums, n+1)
	}
	a := seqLog(rec, 0, kindSeqBatch, "orders", seqCall{0, 10, "A", nums})
	b := seqLog(rec, 1, kindSeqBatch, "orders", seqCall{0, 10, "B", nums})
	res := check(baseInput(rec, a, b))
	if res.Sequences["orders"].Duplicates != 1000 || len(res.Violations) != 1 ||
		!strings.Contains(res.Violations[0], "handed out twice: 1000") || !strings.Contains(res.Violations[0], "and 995 more") {
		t.Fatalf("duplicates %d, violations %q", res.Sequences["orders"].Duplicates, res.Violations)
	}
}
