package soak

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// claimBook attributes an ID to the claim that issued it: for each worker
// ID the "after" seconds of its claims, ascending (see the package doc).
type claimBook map[uint64][]int64

func newClaimBook(afters map[uint64][]int64) claimBook {
	b := claimBook{}
	for w, a := range afters {
		a = slices.Clone(a)
		slices.Sort(a)
		b[w] = slices.Compact(a)
	}
	return b
}

// claim is the 1-based number of the claim of worker w that issued second
// s: the k with after_k < s <= after_{k+1}. 0 means no logged claim of w
// may have issued s.
func (b claimBook) claim(w uint64, s int64) int {
	a := b[w]
	// The number of afters below s.
	return sort.Search(len(a), func(i int) bool { return a[i] >= s })
}

// checkInput is what the checks need from the run.
type checkInput struct {
	layout   uidcore.Layout
	clients  []*clientLog
	claims   map[string]claimBook // by fleet
	kinds    []errorKind
	deadline time.Duration // every call's deadline
	grace    time.Duration // how late a call may return after it
	// faults explain failed calls: a call may fail when it starts while a
	// fault lasts or within settle after it, or when a fault begins while
	// it runs; except during a store outage shorter than the lease TTL (a
	// short MySQL cut, a SIGKILL and restart or a pause of mariadbd; and
	// cutSettle after it), which the leases must ride out without a
	// failure.
	faults    []faultRecord
	settle    time.Duration
	cutSettle time.Duration
	// stalls of the soak's own process excuse a call that overlaps one:
	// late by no more than the stall (and the grace), or failed when the
	// stall lasted at least a second.
	stalls []stall
}

// unexplainedFailure says why a call failing from start to end is not
// explained by a fault ("" when it is).
func (in checkInput) unexplainedFailure(fleet string, start, end time.Duration) string {
	kind, explained := in.blame(fleet, start, end)
	switch {
	case explained:
		return ""
	case kind != "":
		return "during " + kind + ", a store outage shorter than the lease TTL"
	}
	return "while no fault was active"
}

// blame is the fault a call to fleet failing from start to end falls in:
// the one it started in (or within the settle time after), else one that
// began while it ran; faults that cannot touch the fleet are not
// considered. explained is false when there is none, or when it is a
// store outage the leases must ride out.
func (in checkInput) blame(fleet string, start, end time.Duration) (kind string, explained bool) {
	rideOut := ""
	for _, f := range in.faults {
		if !f.touches(fleet) {
			continue
		}
		if rideOutFaults[f.Kind] {
			if f.covers(start, in.cutSettle) {
				rideOut = f.Kind
			}
			continue
		}
		if f.covers(start, in.settle) {
			return f.Kind, true
		}
	}
	if rideOut != "" {
		return rideOut, false
	}
	for _, f := range in.faults {
		if !f.touches(fleet) || f.Start < start || f.Start > end {
			continue
		}
		if rideOutFaults[f.Kind] {
			// Beginning during the call does not excuse it either.
			rideOut = f.Kind
			continue
		}
		return f.Kind, true
	}
	if rideOut != "" {
		return rideOut, false
	}
	return "", false
}

// checkResult is what the checks found.
type checkResult struct {
	IDsChecked uint64            `json:"ids_checked"`
	Calls      map[string]uint64 `json:"calls"`
	IDs        map[string]uint64 `json:"ids"`
	Duplicates int               `json:"duplicates"`
	// By fleet: each fleet has its own ID space (worker IDs from 0), so
	// uniqueness is checked within a fleet.
	FleetIDs        map[string]uint64     `json:"ids_by_fleet"`
	FleetDuplicates map[string]int        `json:"duplicates_by_fleet"`
	OrderViolations int                   `json:"order_violations"`
	BlockReorders   int                   `json:"block_reorders"`
	Unclaimed       int                   `json:"unclaimed_ids"`
	Errors          map[string]int        `json:"errors_by_kind"`
	Late            int                   `json:"late_calls"`
	MaxOverrun      time.Duration         `json:"max_overrun_ns"`
	Stalled         int                   `json:"calls_in_stalls"`
	SlowestCall     time.Duration         `json:"slowest_call_ns"`
	Unexplained     int                   `json:"unexplained_failures"`
	Claims          int                   `json:"claims"`
	WorkerIDs       int                   `json:"worker_ids"`
	Sequences       map[string]SeqFigures `json:"sequences"`
	Violations      []string              `json:"violations"`
}

// examples keeps a few descriptions of one violation kind.
type examples struct {
	what  string
	n     int
	shown []string
}

func (e *examples) add(format string, args ...any) {
	e.n++
	if len(e.shown) < 5 {
		e.shown = append(e.shown, fmt.Sprintf(format, args...))
	}
}

func (e *examples) report(out *[]string) {
	if e.n == 0 {
		return
	}
	s := fmt.Sprintf("%s: %d", e.what, e.n)
	for _, x := range e.shown {
		s += "\n      " + x
	}
	if e.n > len(e.shown) {
		s += fmt.Sprintf("\n      … and %d more", e.n-len(e.shown))
	}
	*out = append(*out, s)
}

// check runs every check on what the clients received.
func check(in checkInput) checkResult {
	res := checkResult{Calls: map[string]uint64{}, IDs: map[string]uint64{}, Errors: map[string]int{},
		FleetIDs: map[string]uint64{}, FleetDuplicates: map[string]int{}}
	for _, book := range in.claims {
		for _, a := range book {
			res.Claims += len(a)
		}
		res.WorkerIDs += len(book)
	}

	dups := examples{what: "duplicate IDs (within a fleet)"}
	order := examples{what: "IDs of one claim not increasing at a client"}
	unclaimed := examples{what: "IDs no logged worker claim can have issued"}
	late := examples{what: fmt.Sprintf("calls that returned later than their deadline (%s) + %s", in.deadline, in.grace)}
	unclear := examples{what: "calls that failed without a clear, expected error"}
	unexplained := examples{what: "calls that failed when no fault explains it"}

	totals := map[string]int{}
	for _, c := range in.clients {
		if !c.kind.isSeq() {
			totals[c.fleet] += len(c.ids)
		}
	}
	all := map[string][]uint64{}
	for f, n := range totals {
		all[f] = make([]uint64, 0, n)
	}
	seqShift := in.layout.SeqBits
	timeShift := in.layout.SeqBits + in.layout.WorkerBits
	maxWorker := in.layout.MaxWorkerID()
	epoch := in.layout.EpochSecond()

	type claimKey struct {
		worker uint64
		claim  int
	}
	for _, c := range in.clients {
		res.IDs[c.kind.String()] += uint64(len(c.ids))
		res.Calls[c.kind.String()] += uint64(len(c.calls))
		for i, call := range c.calls {
			if call.elapsed > res.SlowestCall {
				res.SlowestCall = call.elapsed
			}
			// A stall of the soak's own process excuses what it explains.
			stalled := covering(in.stalls, call.start, call.start+call.elapsed)
			excused := false
			if over := call.elapsed - in.deadline; over > in.grace {
				if over <= stalled+in.grace {
					excused = true
				} else {
					late.add("client %d (%s) call %d at %s took %s", c.id, c.kind, i, call.start.Round(time.Millisecond), call.elapsed.Round(time.Millisecond))
					res.MaxOverrun = max(res.MaxOverrun, over)
				}
			}
			if call.errKind >= 0 {
				k := in.kinds[call.errKind]
				res.Errors[k.name]++
				if !k.clear {
					unclear.add("client %d (%s) call %d at %s: %s", c.id, c.kind, i, call.start.Round(time.Millisecond), k.example)
				}
				if why := in.unexplainedFailure(c.fleet, call.start, call.start+call.elapsed); why != "" {
					if stalled >= time.Second {
						excused = true
					} else {
						unexplained.add("client %d (%s) call %d at %s failed %s: %s", c.id, c.kind, i, call.start.Round(time.Millisecond), why, k.name)
					}
				}
			}
			if excused {
				res.Stalled++
			}
		}
		if c.kind.isSeq() {
			continue // numbers, not IDs: checkSequences
		}
		all[c.fleet] = append(all[c.fleet], c.ids...)
		res.FleetIDs[c.fleet] += uint64(len(c.ids))
		book := in.claims[c.fleet]
		last := map[claimKey]uint64{}
		for i := range c.calls {
			ids := c.callIDs(i)
			for j, id := range ids {
				worker := (id >> seqShift) & maxWorker
				second := epoch + int64(id>>timeShift)
				if c.kind == kindBatch && j > 0 {
					prev := ids[j-1]
					// One reply may span lanes (worker IDs) of its
					// instance, but always increases.
					if id <= prev {
						order.add("client %d batch call %d: ID %d after %d in one reply", c.id, i, id, prev)
					}
				}
				k := book.claim(worker, second)
				if k == 0 {
					unclaimed.add("client %d (%s, fleet %s): ID %d (worker %d, second %d)", c.id, c.kind, c.fleet, id, worker, second)
				}
				key := claimKey{worker, k}
				prev, seen := last[key]
				switch {
				case !seen || id > prev:
					last[key] = id
				case c.kind == kindBlocks:
					res.BlockReorders++
				default:
					order.add("client %d (%s) call %d: ID %d after %d, both worker %d claim %d", c.id, c.kind, i, id, prev, worker, k)
				}
			}
		}
	}
	for _, f := range sortedKeys(all) {
		ids := all[f]
		res.IDsChecked += uint64(len(ids))
		slices.Sort(ids)
		var dupValues []uint64
		for i := 1; i < len(ids); i++ {
			if ids[i] == ids[i-1] && (len(dupValues) == 0 || dupValues[len(dupValues)-1] != ids[i]) {
				dupValues = append(dupValues, ids[i])
			}
		}
		for _, v := range dupValues {
			if len(dups.shown) < 5 {
				dups.add("fleet %s: ID %d received by %s", f, v, whoGot(in.clients, f, v))
			} else {
				dups.n++
			}
		}
		res.FleetDuplicates[f] = len(dupValues)
		res.Duplicates += len(dupValues)
		all[f] = nil // sorted copies of every ID: let them go early
	}
	res.OrderViolations = order.n
	res.Unclaimed = unclaimed.n
	res.Late = late.n
	res.Unexplained = unexplained.n
	for _, e := range []*examples{&dups, &order, &unclaimed, &late, &unclear, &unexplained} {
		e.report(&res.Violations)
	}
	res.Sequences = checkSequences(in.clients, &res.Violations)
	return res
}

// whoGot lists the clients of fleet and their calls that received id.
func whoGot(clients []*clientLog, fleet string, id uint64) string {
	var out string
	for _, c := range clients {
		if c.fleet != fleet {
			continue
		}
		for i := range c.calls {
			if slices.Contains(c.callIDs(i), id) {
				if out != "" {
					out += ", "
				}
				out += fmt.Sprintf("client %d (%s, node %d) call %d at %s", c.id, c.kind, c.node, i, c.calls[i].start.Round(time.Millisecond))
			}
		}
	}
	return out
}
