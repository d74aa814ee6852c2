package faults

import (
	"fmt"
	"slices"
	"strings"
)

// Markdown is the run's figures as the tables of docs/faults.md: per
// fault kind (and outside every fault window) the calls, failed and
// unknown ones, the values checked, latency; then what was repeated (by
// fleet and sequence) and why calls failed. Which fault each repeat most
// likely follows from is in the JSON summary (duplicates_after).
func (s *Summary) Markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("| window | faults | calls | failed | unknown | failed+unknown | IDs | numbers | p50 ms | p99 ms |")
	p("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	kinds := make([]string, 0, len(s.Check.ByKind))
	for k := range s.Check.ByKind {
		if k != "outside" {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	for _, k := range append(kinds, "outside") {
		w := s.Check.ByKind[k]
		n := w.Calls.OK + w.Calls.Failed + w.Calls.Unknown
		p("| %s | %d | %d | %d | %d | %.2f %% | %d | %d | %.2f | %.2f |", k, w.Windows, n, w.Calls.Failed, w.Calls.Unknown,
			w.FailedPercent, w.IDs, w.Numbers, w.P50ms, w.P99ms)
	}
	p("")
	p("IDs: %d acknowledged, %d duplicated; numbers: %d acknowledged, %d duplicated; calls: %d ok, %d failed, %d unknown; lease overlaps %d (%d claims read), segment overlaps %d (%d segments read).",
		s.IDs.Acknowledged, s.IDs.Duplicated, s.Numbers.Acknowledged, s.Numbers.Duplicated,
		s.Calls.OK, s.Calls.Failed, s.Calls.Unknown, s.LeaseOverlaps, s.LeaseClaims, s.SegmentOverlaps, s.Segments)
	if len(s.Check.DuplicatedIn) > 0 {
		p("")
		p("| repeated acknowledgments | of |")
		p("|--:|---|")
		in := make([]string, 0, len(s.Check.DuplicatedIn))
		for k := range s.Check.DuplicatedIn {
			in = append(in, k)
		}
		slices.Sort(in)
		for _, k := range in {
			p("| %d | %s |", s.Check.DuplicatedIn[k], k)
		}
	}
	if len(s.Check.Errors) > 0 {
		p("")
		p("| failed or unknown calls | reason |")
		p("|--:|---|")
		reasons := make([]string, 0, len(s.Check.Errors))
		for k := range s.Check.Errors {
			reasons = append(reasons, k)
		}
		slices.SortFunc(reasons, func(a, b string) int { return int(s.Check.Errors[b] - s.Check.Errors[a]) })
		for _, k := range reasons {
			p("| %d | %s |", s.Check.Errors[k], k)
		}
	}
	return b.String()
}
