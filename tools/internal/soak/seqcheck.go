package soak

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// SeqFigures are what the sequence clients received of one named
// sequence of one fleet, and what the checks found.
type SeqFigures struct {
	Calls     uint64 `json:"calls"`
	HandedOut uint64 `json:"handed_out"` // distinct numbers received
	First     uint64 `json:"first"`      // the lowest received
	Max       uint64 `json:"max"`        // the highest received
	// Skipped is Max − First + 1 − HandedOut: the numbers in the range the
	// clients saw that none received (segments a killed instance held,
	// the rest of a segment not given back, replies lost on the way).
	Skipped         uint64  `json:"skipped"`
	GapRatio        float64 `json:"gap_ratio"` // Skipped / HandedOut
	Duplicates      int     `json:"duplicates"`
	OrderViolations int     `json:"order_violations"`
	Instances       int     `json:"instances"`           // that answered
	NoInstance      int     `json:"replies_no_instance"` // replies without the Uid-Instance header
}

// seqSpan is one successful sequence call: when it ran, which instance
// answered and the lowest and highest number it got.
type seqSpan struct {
	start, end time.Duration
	lo, hi     uint64
	client     int
	call       int
}

// checkSequences checks what the sequence clients received, per name:
// no number twice (across every client and instance); the numbers of one
// instance increasing, within a batch and across calls: a call that
// started after another call to the same instance had returned must get
// only higher numbers (this covers a client's own calls, which are
// sequential, and calls of different clients that did not overlap); and
// it measures the gap ratio. Violations are appended to out.
func checkSequences(clients []*clientLog, out *[]string) map[string]SeqFigures {
	type instKey struct {
		seq  string
		inst int16
	}
	figs := map[string]SeqFigures{}
	numbers := map[string][]uint64{}
	spans := map[instKey][]seqSpan{}
	order := examples{what: "sequence numbers of one instance not increasing"}
	noInst := examples{what: "sequence replies without the Uid-Instance header"}
	for _, c := range clients {
		if !c.kind.isSeq() {
			continue
		}
		name := seqKey(c)
		f := figs[name]
		f.Calls += uint64(len(c.calls))
		numbers[name] = append(numbers[name], c.ids...)
		for i, call := range c.calls {
			nums := c.callIDs(i)
			if call.errKind >= 0 || len(nums) == 0 {
				continue
			}
			for j := 1; j < len(nums); j++ {
				if nums[j] <= nums[j-1] {
					f.OrderViolations++
					order.add("%s: client %d call %d: %d after %d in one reply", name, c.id, i, nums[j], nums[j-1])
				}
			}
			if call.inst < 0 {
				f.NoInstance++
				noInst.add("%s: client %d call %d at %s", name, c.id, i, call.start.Round(time.Millisecond))
				continue
			}
			k := instKey{name, call.inst}
			spans[k] = append(spans[k], seqSpan{start: call.start, end: call.start + call.elapsed,
				lo: slices.Min(nums), hi: slices.Max(nums), client: c.id, call: i})
		}
		figs[name] = f
	}

	for k, ss := range spans {
		f := figs[k.seq]
		f.Instances++
		n := increasingAcross(ss, func(a, b seqSpan) {
			order.add("%s: client %d call %d at %s got %d, but client %d call %d, answered by the same instance before it started, got %d",
				k.seq, b.client, b.call, b.start.Round(time.Millisecond), b.lo, a.client, a.call, a.hi)
		})
		f.OrderViolations += n
		figs[k.seq] = f
	}

	dups := examples{what: "sequence numbers handed out twice"}
	for name, all := range numbers {
		f := figs[name]
		slices.Sort(all)
		distinct := 0
		for i, v := range all {
			if i > 0 && v == all[i-1] {
				if i == 1 || all[i-2] != v {
					f.Duplicates++
					if len(dups.shown) < 5 { // whoGotSeq scans everything: only for the examples
						dups.add("%s: %d received by %s", name, v, whoGotSeq(clients, name, v))
					} else {
						dups.n++
					}
				}
				continue
			}
			distinct++
		}
		if len(all) > 0 {
			f.First, f.Max = all[0], all[len(all)-1]
			f.HandedOut = uint64(distinct)
			f.Skipped = f.Max - f.First + 1 - f.HandedOut
			f.GapRatio = float64(f.Skipped) / float64(f.HandedOut)
		}
		figs[name] = f
	}
	for _, e := range []*examples{&dups, &order, &noInst} {
		e.report(out)
	}
	return figs
}

// seqKey names a sequence client's sequence with its fleet
// ("uid.orders"): each fleet keeps its sequences in its own store, so
// their numbers are checked apart.
func seqKey(c *clientLog) string {
	if c.fleet == "" {
		return c.seq
	}
	return c.fleet + "." + c.seq
}

// increasingAcross finds the calls to one instance that got a number not
// above the highest of a call that had returned before they started; it
// calls bad with the earlier call (the one with the highest number among
// those) and the later one, and returns how many there were.
func increasingAcross(ss []seqSpan, bad func(earlier, later seqSpan)) int {
	byEnd := slices.Clone(ss)
	slices.SortFunc(byEnd, func(a, b seqSpan) int { return cmp.Compare(a.end, b.end) })
	byStart := slices.Clone(ss)
	slices.SortFunc(byStart, func(a, b seqSpan) int { return cmp.Compare(a.start, b.start) })
	var top seqSpan // the highest number among the calls ended so far
	seen, n, j := false, 0, 0
	for _, b := range byStart {
		for ; j < len(byEnd) && byEnd[j].end < b.start; j++ {
			if !seen || byEnd[j].hi > top.hi {
				top, seen = byEnd[j], true
			}
		}
		if seen && b.lo <= top.hi {
			n++
			bad(top, b)
		}
	}
	return n
}

// whoGotSeq lists the sequence clients and calls that received number v
// of seq (a seqKey).
func whoGotSeq(clients []*clientLog, seq string, v uint64) string {
	var out string
	for _, c := range clients {
		for i := range c.calls {
			if seqKey(c) == seq && slices.Contains(c.callIDs(i), v) {
				if out != "" {
					out += ", "
				}
				out += fmt.Sprintf("client %d (%s, node %d) call %d at %s", c.id, c.kind, c.node, i, c.calls[i].start.Round(time.Millisecond))
			}
		}
	}
	return out
}
