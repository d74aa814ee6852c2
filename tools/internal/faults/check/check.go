// Package check is the fault harness's checker. It reads only what the
// clients recorded (the histories: calls and the values their replies
// carried) and the dispensers' JSON logs, and imports nothing of the code
// under test beyond the ID layout (uidcore.Layout, to read an ID's
// second and worker) and the names of the logged events (telemetry/event,
// the log contract).
//
// What it checks, Jepsen style:
//   - IDs and sequence numbers: attempted (asked for), acknowledged (in an
//     ok reply), duplicated (acknowledged twice, across every client),
//     lost (asked for in an ok call whose reply carried fewer, or in a
//     call the history never completed);
//   - calls: ok, failed, unknown (timeouts: the values may or may not have
//     been handed out);
//   - leases: per worker ID, no two claims' issuing intervals (after,
//     reserved] overlap (events lease.acquired, lease.reserved,
//     lease.released);
//   - sequence segments: no two segments of a name overlap (event
//     sequence.segment), unless the instance refused the segment as a
//     regression (sequence.regression); an unused rest given back
//     (sequence.given_back) is not the instance's;
//   - per fault window (kind, start, end): calls, failed, unknown, values,
//     and latency percentiles inside and outside the windows.
package check

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/history"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// Counts are the values (IDs or numbers) of a history.
type Counts struct {
	Attempted    int64 `json:"attempted"`
	Acknowledged int64 `json:"acknowledged"`
	Duplicated   int64 `json:"duplicated"`
	Lost         int64 `json:"lost"`
	// Indeterminate: asked for in calls that ended unknown.
	Indeterminate int64 `json:"indeterminate"`
}

// Calls counts calls by outcome.
type Calls struct {
	OK      int64 `json:"ok"`
	Failed  int64 `json:"failed"`
	Unknown int64 `json:"unknown"`
	// Incomplete: invoked and never completed in the history (a client
	// that died mid-call): counted as lost values.
	Incomplete int64 `json:"incomplete"`
}

// Duplicate is a value acknowledged more than once.
type Duplicate struct {
	Func  string   `json:"f"`
	Fleet string   `json:"fleet,omitempty"`
	Name  string   `json:"name,omitempty"`
	Value uint64   `json:"value"`
	Calls []string `json:"calls"` // process/call of each acknowledgment
	// Acked: when each acknowledgment came (the calls' completions).
	Acked []time.Time `json:"acked"`
	// For IDs: the ID's second (unix) and worker.
	Second int64  `json:"second,omitempty"`
	Worker uint64 `json:"worker,omitempty"`
}

// Window is a fault's time span, as the harness recorded it.
type Window struct {
	Kind  string    `json:"kind"`
	What  string    `json:"what"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// WindowStats are the calls that overlapped windows of one kind (or
// none: "outside").
type WindowStats struct {
	Windows int     `json:"windows"`
	Calls   Calls   `json:"calls"`
	IDs     int64   `json:"ids"`
	Numbers int64   `json:"numbers"`
	P50ms   float64 `json:"p50_ms"`
	P99ms   float64 `json:"p99_ms"`
	// FailedPercent: failed and unknown calls of all calls, in percent.
	FailedPercent float64 `json:"failed_percent"`
	// Causes: the failed and unknown calls by reason (as Result.Errors).
	Causes map[string]int64 `json:"causes,omitempty"`
	// Retried: ok calls that the client retried (no responders, a 503)
	// before one attempt succeeded.
	Retried int64 `json:"retried,omitempty"`
}

// Result is the checker's verdict.
type Result struct {
	IDs             Counts           `json:"ids"`
	Numbers         Counts           `json:"numbers"`
	Calls           Calls            `json:"calls"`
	Duplicates      []Duplicate      `json:"duplicates,omitempty"` // the first ones
	LeaseOverlaps   []Overlap        `json:"lease_overlaps,omitempty"`
	SegmentOverlaps []Overlap        `json:"segment_overlaps,omitempty"`
	Claims          int              `json:"claims"`   // lease claims read from the logs
	Segments        int              `json:"segments"` // sequence segments read from the logs
	Events          map[string]int   `json:"events"`   // every logged event, counted by name
	Errors          map[string]int64 `json:"errors"`   // failed and unknown calls by reason (up to its first colon)
	// DuplicatesAfter counts the repeated acknowledgments by the fault
	// they most likely follow from, and by what was repeated ("kind: what
	// (numbers of uid/orders)"): the fault during which the value was
	// first acknowledged (a store that forgets loses what it acknowledged
	// during the fault), else the one that last began before the repeat;
	// "none" before any fault.
	DuplicatesAfter map[string]int64 `json:"duplicates_after,omitempty"`
	// DuplicatedIn counts the repeated acknowledgments by what was
	// repeated: "IDs of uid", "numbers of uidmy/orders". Each fleet has a
	// store of its own, so this says whose store forgot.
	DuplicatedIn map[string]int64        `json:"duplicated_in,omitempty"`
	ByKind       map[string]*WindowStats `json:"by_kind"` // per fault kind, and "outside"
	// AfterKind splits ByKind's "outside" by Input.Recovery: the calls
	// that began within it of the end of a window, by the kind of the
	// window that ended last before them, and the rest ("steady"). Nil
	// without a recovery period.
	AfterKind map[string]*WindowStats `json:"after_kind,omitempty"`
	// Alone splits ByKind's fault kinds by Input.Recovery the other way:
	// the calls that overlapped windows of that kind only and began when
	// no earlier window had ended within the recovery period, so that no
	// other fault's documented aftermath (a fleet out of its queue group
	// for W after a failover took its claims back) is counted against
	// it. The schedule's quiet gaps are shorter than the recovery period,
	// so most windows begin within an earlier one's. Nil without a
	// recovery period.
	Alone    map[string]*WindowStats `json:"alone,omitempty"`
	Problems []string                `json:"problems,omitempty"`
	Valid    bool                    `json:"valid"`
}

// maxListed bounds the duplicates and overlaps listed (all are counted).
const maxListed = 20

// Input is what the checker reads.
type Input struct {
	Ops     []history.Op
	Logs    []Log // the dispensers' logs, one per process
	Windows []Window
	Layout  uidcore.Layout
	// Recovery is how long after a fault ends its effects may last by
	// design (a worker ID reclaimed after a lease regression waits the
	// loss window and a renewal): see Result.AfterKind. 0: no split.
	Recovery time.Duration
}

// Check reads the input and returns the verdict.
func Check(in Input) *Result {
	r := &Result{Events: map[string]int{}, Errors: map[string]int64{}, DuplicatesAfter: map[string]int64{}, DuplicatedIn: map[string]int64{}, ByKind: map[string]*WindowStats{}}
	r.checkValues(in)
	leases := readLogs(in.Logs, r)
	r.Claims = len(leases.claims)
	r.Segments = len(leases.segments)
	r.LeaseOverlaps = leaseOverlaps(leases.claims)
	r.SegmentOverlaps = segmentOverlaps(leases.segments)
	r.windowStats(in)
	r.Valid = r.IDs.Duplicated == 0 && r.Numbers.Duplicated == 0 && r.IDs.Lost == 0 && r.Numbers.Lost == 0 &&
		len(r.LeaseOverlaps) == 0 && len(r.SegmentOverlaps) == 0 && len(r.Problems) == 0
	return r
}

// call is an invocation and its completion.
type call struct {
	invoke, done *history.Op
}

// pair matches each invocation with its completion.
func pair(ops []history.Op, r *Result) []call {
	open := map[string]int{} // process/call → index in calls
	var calls []call
	for i := range ops {
		op := &ops[i]
		key := fmt.Sprintf("%s/%d", op.Process, op.Call)
		if op.Type == history.Invoke {
			if _, dup := open[key]; dup {
				r.Problems = append(r.Problems, fmt.Sprintf("call %s invoked twice", key))
				continue
			}
			open[key] = len(calls)
			calls = append(calls, call{invoke: op})
			continue
		}
		j, ok := open[key]
		if !ok {
			r.Problems = append(r.Problems, fmt.Sprintf("call %s completed (%s) without an invocation", key, op.Type))
			continue
		}
		delete(open, key)
		calls[j].done = op
	}
	return calls
}

func (r *Result) checkValues(in Input) {
	// The first acknowledgment of each value: the index of its call.
	// (A map of small values: a long run acknowledges tens of millions.)
	calls := pair(in.Ops, r)
	// Per fleet (IDs) and per fleet and name (numbers).
	firsts := map[string]map[uint64]int32{}
	type dupKey struct {
		space string
		value uint64
	}
	dupOf := map[dupKey]*Duplicate{}
	var dups []*Duplicate
	where := func(k int32) string {
		c := calls[k]
		return fmt.Sprintf("%s/%d", c.done.Process, c.done.Call)
	}
	acked := func(k int32) time.Time { return time.Unix(0, calls[k].done.Time) }
	record := func(k int32, v uint64) {
		c := calls[k]
		counts, space := &r.IDs, c.invoke.Fleet
		if c.invoke.Func == history.FuncSeq {
			counts, space = &r.Numbers, c.invoke.Fleet+"/"+c.invoke.Name
		}
		m := firsts[space]
		if m == nil {
			m = map[uint64]int32{}
			firsts[space] = m
		}
		key := dupKey{space: space, value: v}
		counts.Acknowledged++
		first, seen := m[v]
		if !seen {
			m[v] = k
			return
		}
		counts.Duplicated++
		d := dupOf[key]
		if d == nil {
			d = &Duplicate{Func: c.invoke.Func, Fleet: c.invoke.Fleet, Name: c.invoke.Name, Value: v, Calls: []string{where(first)}, Acked: []time.Time{acked(first)}}
			if c.invoke.Func == history.FuncIDs {
				if p, err := in.Layout.Parse(v); err == nil {
					d.Second, d.Worker = p.Time.Unix(), p.WorkerID
				}
			}
			dupOf[key] = d
			dups = append(dups, d)
		}
		d.Calls = append(d.Calls, where(k))
		d.Acked = append(d.Acked, acked(k))
		what := "IDs of " + c.invoke.Fleet
		if c.invoke.Func == history.FuncSeq {
			what = "numbers of " + space
		}
		r.DuplicatesAfter[cause(in.Windows, acked(first), acked(k))+" ("+what+")"]++
		r.DuplicatedIn[what]++
	}
	defer func() {
		for _, d := range dups[:min(len(dups), maxListed)] {
			r.Duplicates = append(r.Duplicates, *d)
		}
	}()
	for k, c := range calls {
		counts := &r.IDs
		if c.invoke.Func == history.FuncSeq {
			counts = &r.Numbers
		}
		counts.Attempted += int64(c.invoke.Count)
		if c.done == nil {
			r.Calls.Incomplete++
			counts.Lost += int64(c.invoke.Count)
			continue
		}
		switch c.done.Type {
		case history.OK:
			r.Calls.OK++
			if short := c.invoke.Count - len(c.done.Values); short > 0 {
				counts.Lost += int64(short)
			}
			for _, v := range c.done.Values {
				record(int32(k), v)
			}
		case history.Fail:
			r.Calls.Failed++
			r.Errors[reason(c.done.Error)]++
		case history.Unknown:
			r.Calls.Unknown++
			r.Errors[reason(c.done.Error)]++
			counts.Indeterminate += int64(c.invoke.Count)
		default:
			r.Problems = append(r.Problems, fmt.Sprintf("call %s/%d has type %q", c.done.Process, c.done.Call, c.done.Type))
		}
	}
}

func (r *Result) windowStats(in Input) {
	kinds := map[string]*windowAcc{"outside": {}}
	var after, alone map[string]*windowAcc
	if in.Recovery > 0 {
		after = map[string]*windowAcc{"steady": {}}
		alone = map[string]*windowAcc{}
	}
	for _, w := range in.Windows {
		if kinds[w.Kind] == nil {
			kinds[w.Kind] = &windowAcc{}
			if alone != nil {
				alone[w.Kind] = &windowAcc{}
			}
		}
		kinds[w.Kind].stats.Windows++
	}
	var dummy Result
	for _, c := range pair(in.Ops, &dummy) {
		if c.done == nil {
			continue
		}
		t0, t1 := time.Unix(0, c.invoke.Time), time.Unix(0, c.done.Time)
		inKinds := map[string]bool{}
		for _, w := range in.Windows {
			if !t1.Before(w.Start) && !t0.After(w.End) {
				inKinds[w.Kind] = true
			}
		}
		if len(inKinds) == 0 {
			inKinds["outside"] = true
			if after != nil {
				k := recoveringFrom(in.Windows, t0, in.Recovery)
				if after[k] == nil {
					after[k] = &windowAcc{}
				}
				after[k].add(c)
			}
		}
		for k := range inKinds {
			kinds[k].add(c)
			if alone != nil && len(inKinds) == 1 && k != "outside" && recoveringFrom(in.Windows, t0, in.Recovery) == "steady" {
				alone[k].add(c)
			}
		}
	}
	r.ByKind = finishWindows(kinds)
	if after != nil {
		r.AfterKind = finishWindows(after)
		r.Alone = finishWindows(alone)
	}
}

// windowAcc gathers the calls of one row of the per-window figures.
type windowAcc struct {
	stats WindowStats
	lat   []time.Duration
}

func (a *windowAcc) add(c call) {
	t0, t1 := time.Unix(0, c.invoke.Time), time.Unix(0, c.done.Time)
	switch c.done.Type {
	case history.OK:
		a.stats.Calls.OK++
		a.lat = append(a.lat, t1.Sub(t0))
		if c.invoke.Func == history.FuncSeq {
			a.stats.Numbers += int64(len(c.done.Values))
		} else {
			a.stats.IDs += int64(len(c.done.Values))
		}
		if c.done.Attempts > 1 {
			a.stats.Retried++
		}
		return
	case history.Fail:
		a.stats.Calls.Failed++
	case history.Unknown:
		a.stats.Calls.Unknown++
	default:
		return
	}
	if a.stats.Causes == nil {
		a.stats.Causes = map[string]int64{}
	}
	a.stats.Causes[reason(c.done.Error)]++
}

func finishWindows(accs map[string]*windowAcc) map[string]*WindowStats {
	out := make(map[string]*WindowStats, len(accs))
	for k, a := range accs {
		slices.Sort(a.lat)
		a.stats.P50ms = percentile(a.lat, 0.50)
		a.stats.P99ms = percentile(a.lat, 0.99)
		if n := a.stats.Calls.OK + a.stats.Calls.Failed + a.stats.Calls.Unknown; n > 0 {
			a.stats.FailedPercent = 100 * float64(a.stats.Calls.Failed+a.stats.Calls.Unknown) / float64(n)
		}
		s := a.stats
		out[k] = &s
	}
	return out
}

// recoveringFrom names the kind of the window that ended last before t,
// when t is within recovery of its end, else "steady".
func recoveringFrom(ws []Window, t time.Time, recovery time.Duration) string {
	best := -1
	for i, w := range ws {
		if !w.End.After(t) && t.Sub(w.End) <= recovery && (best < 0 || w.End.After(ws[best].End)) {
			best = i
		}
	}
	if best < 0 {
		return "steady"
	}
	return ws[best].Kind
}

// cause names the fault a repeated acknowledgment most likely follows
// from: the latest window that holds the first acknowledgment, else the
// latest that began before the repeat.
func cause(ws []Window, first, repeat time.Time) string {
	best := -1
	for i, w := range ws {
		if !first.Before(w.Start) && !first.After(w.End) && (best < 0 || w.Start.After(ws[best].Start)) {
			best = i
		}
	}
	if best >= 0 {
		return ws[best].Kind + ": " + ws[best].What
	}
	return lastWindowBefore(ws, repeat)
}

// lastWindowBefore names the window that most recently began before t.
func lastWindowBefore(ws []Window, t time.Time) string {
	best := -1
	for i, w := range ws {
		if w.Start.Before(t) && (best < 0 || w.Start.After(ws[best].Start)) {
			best = i
		}
	}
	if best < 0 {
		return "none"
	}
	return ws[best].Kind + ": " + ws[best].What
}

// reason is an error's text up to its first colon: the kind of failure
// without the details (worker IDs, seconds) that make every one differ.
// A nats.go error is kept whole ("nats: server is disconnected": its text
// after the colon is the kind), and so is the kind of the last failure of
// an unknown call ("timeout (then 503 not reserved: …)" keeps "(then 503
// not reserved)").
func reason(err string) string {
	first, then, uncertain := strings.Cut(err, " (then ")
	r := reasonOf(first)
	if uncertain {
		r += " (then " + reasonOf(strings.TrimSuffix(then, ")")) + ")"
	}
	return r
}

func reasonOf(err string) string {
	if strings.HasPrefix(err, "nats: ") {
		return err
	}
	if i := strings.IndexByte(err, ':'); i > 0 {
		return err[:i]
	}
	return err
}

// percentile of sorted durations, in milliseconds (nearest rank).
func percentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i]) / float64(time.Millisecond)
}

// Overlap is two claims of one worker ID, or two segments of one
// sequence, that cover common values.
type Overlap struct {
	Key   string `json:"key"` // worker ID or sequence name
	A     string `json:"a"`   // the two: owner and interval
	B     string `json:"b"`
	Lo    int64  `json:"lo"` // the common part: (Lo, Hi] seconds for leases, [Lo, Hi] numbers for segments
	Hi    int64  `json:"hi"`
	Count int    `json:"count,omitempty"`
}

func leaseOverlaps(claims []claim) []Overlap {
	type key struct {
		fleet  string
		worker int64
	}
	byWorker := map[key][]claim{}
	for _, c := range claims {
		k := key{c.fleet, c.worker}
		byWorker[k] = append(byWorker[k], c)
	}
	keys := make([]key, 0, len(byWorker))
	for k := range byWorker {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.fleet, b.fleet); c != 0 {
			return c
		}
		return int(a.worker - b.worker)
	})
	var out []Overlap
	for _, k := range keys {
		cs := byWorker[k]
		sort.Slice(cs, func(i, j int) bool { return cs[i].after < cs[j].after })
		for i := range cs {
			for j := i + 1; j < len(cs) && cs[j].after < cs[i].high; j++ {
				lo, hi := cs[j].after, min(cs[i].high, cs[j].high)
				if lo >= hi {
					continue
				}
				out = append(out, Overlap{Key: fmt.Sprintf("fleet %q worker %d", k.fleet, k.worker), A: cs[i].String(), B: cs[j].String(), Lo: lo, Hi: hi})
			}
		}
	}
	return out
}

func segmentOverlaps(segs []segment) []Overlap {
	byName := map[string][]segment{} // fleet/name
	for _, s := range segs {
		if !s.refused && s.first <= s.last {
			byName[s.fleet+"/"+s.name] = append(byName[s.fleet+"/"+s.name], s)
		}
	}
	var out []Overlap
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		ss := byName[n]
		sort.Slice(ss, func(i, j int) bool { return ss[i].first < ss[j].first })
		for i := range ss {
			for j := i + 1; j < len(ss) && ss[j].first <= ss[i].last; j++ {
				out = append(out, Overlap{Key: "sequence " + n, A: ss[i].String(), B: ss[j].String(),
					Lo: ss[j].first, Hi: min(ss[i].last, ss[j].last)})
			}
		}
	}
	return out
}
