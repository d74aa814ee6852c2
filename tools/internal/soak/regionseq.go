package soak

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/numfmt"
)

// RegionSeqFigure is what the sequence clients of one region got of one
// homed sequence of one fleet.
type RegionSeqFigure struct {
	Sequence string `json:"sequence"` // a seqKey ("uid.orders")
	Home     string `json:"home"`
	From     string `json:"from"` // the callers' region
	Calls    int    `json:"calls"`
	Numbers  uint64 `json:"numbers"`
	// HomeUnreachable are the calls failed with a HomeUnreachableError,
	// Documented those of them in a window of a fault that explains it
	// (seqUnavailable), OtherFailed the calls failed otherwise.
	HomeUnreachable int     `json:"home_unreachable"`
	Documented      int     `json:"home_unreachable_documented"`
	OtherFailed     int     `json:"other_failed"`
	Latency         Latency `json:"latency"` // of the calls that got numbers
}

// seqHomes maps each homed sequence's name to its home region.
func seqHomes(seqs []namedSeq) map[string]string {
	homes := map[string]string{}
	for _, s := range seqs {
		homes[s.name] = s.home
	}
	return homes
}

// seqUnavailable tells the documented unavailability of a homed
// sequence (docs/sequences.md, Across regions): a call failing with a
// HomeUnreachableError in the window of a fault that leaves its caller
// without the sequence's home, the home region's dispensers down or, for
// a caller of another region, the gateways cut. The same error in any
// other window (or a local call's, while the gateways are cut) is a
// failure like any other.
func seqUnavailable(kinds []errorKind, homes map[string]string) func(c *clientLog, call callRecord, f faultRecord) bool {
	return func(c *clientLog, call callRecord, f faultRecord) bool {
		if call.errKind < 0 || kinds[call.errKind].name != kindHomeUnreachable {
			return false
		}
		home, ok := homes[c.seq]
		if !ok {
			return false
		}
		switch f.Kind {
		case faultRegionDown:
			return f.Target == home
		case faultGatewayCut:
			return c.region != home
		}
		return false
	}
}

// regionSeqFigures counts the sequence clients' calls per sequence and
// calling region, by sequence (with its fleet) and region.
// A failed call is documented when it started in the window of a fault
// that explains it or that fault began while it ran; undocumented
// collects a few of the calls failed with a HomeUnreachableError
// otherwise, with the fault window they met.
func regionSeqFigures(faults []faultRecord, clients []*clientLog, kinds []errorKind, homes map[string]string, undocumented *examples) []RegionSeqFigure {
	documented := seqUnavailable(kinds, homes)
	inWindow := func(c *clientLog, call callRecord) bool {
		var in *faultRecord
		for i, f := range faults {
			// Started in its window, or met it: the fault began while
			// the call ran.
			if f.covers(call.start, windowSettle) || f.Start >= call.start && f.Start <= call.start+call.elapsed {
				if documented(c, call, f) {
					return true
				}
				in = &faults[i]
			}
		}
		where := "outside every fault's window"
		if in != nil {
			where = fmt.Sprintf("%s after the start of %s on %s", (call.start - in.Start).Round(time.Millisecond), in.Kind, in.Target)
		}
		undocumented.add("client %d (%s, %s from %s, node %d) at %s: %s", c.id, c.kind, seqKey(c), c.region, c.node, call.start.Round(time.Millisecond), where)
		return false
	}
	var out []RegionSeqFigure
	index := map[[2]string]int{}
	latencies := map[int][]time.Duration{}
	for _, c := range clients {
		if !c.kind.isSeq() {
			continue
		}
		key := [2]string{seqKey(c), c.region}
		i, ok := index[key]
		if !ok {
			i = len(out)
			index[key] = i
			out = append(out, RegionSeqFigure{Sequence: key[0], Home: homes[c.seq], From: c.region})
		}
		f := &out[i]
		f.Calls += len(c.calls)
		f.Numbers += uint64(len(c.ids))
		for _, call := range c.calls {
			switch {
			case call.errKind < 0:
				latencies[i] = append(latencies[i], call.elapsed)
			case kinds[call.errKind].name == kindHomeUnreachable:
				f.HomeUnreachable++
				if inWindow(c, call) {
					f.Documented++
				}
			default:
				f.OtherFailed++
			}
		}
	}
	for i := range out {
		out[i].Latency = latencyOf(latencies[i])
	}
	slices.SortStableFunc(out, func(a, b RegionSeqFigure) int {
		return cmp.Or(cmp.Compare(a.Sequence, b.Sequence), cmp.Compare(a.From, b.From))
	})
	return out
}

// String is the figure for the summaries.
func (f RegionSeqFigure) String() string {
	n := func(v int) string { return numfmt.Thousands(int64(v)) }
	where := "local"
	if f.From != f.Home {
		where = "through the gateway"
	}
	return fmt.Sprintf("from %s (%s): %s numbers in %s calls; failed: %s home unreachable (%s of them documented), %s otherwise; answered: %s",
		f.From, where, numfmt.Thousands(int64(f.Numbers)), n(f.Calls), n(f.HomeUnreachable), n(f.Documented), n(f.OtherFailed), f.Latency)
}
