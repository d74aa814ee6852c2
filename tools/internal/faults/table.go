package faults

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/check"
)

// causesTable is the failed and unknown calls of each window by cause,
// the ok calls the clients retried before they succeeded, each kind's
// calls with no other fault's recovery running (check.Result.Alone), and
// the calls outside every window split by whether a fault had just ended
// (within the recovery period) or not.
func (s *Summary) causesTable(p func(string, ...any), kinds []string) {
	p("| window | calls | failed+unknown | ok after a retry | failed or unknown, by cause |")
	p("|---|--:|--:|--:|---|")
	row := func(name string, w *check.WindowStats) {
		n := w.Calls.OK + w.Calls.Failed + w.Calls.Unknown
		p("| %s | %d | %.2f %% | %d | %s |", name, n, w.FailedPercent, w.Retried, causesText(w.Causes))
	}
	for _, k := range append(kinds, "outside") {
		row(k, s.Check.ByKind[k])
	}
	if s.Check.AfterKind == nil {
		return
	}
	for _, k := range kinds {
		if w := s.Check.Alone[k]; w != nil {
			row(fmt.Sprintf("%s alone: no other fault's %s recovery running", k, time.Duration(s.Recovery)), w)
		}
	}
	after := make([]string, 0, len(s.Check.AfterKind))
	for k := range s.Check.AfterKind {
		if k != "steady" {
			after = append(after, k)
		}
	}
	slices.Sort(after)
	for _, k := range after {
		row(fmt.Sprintf("outside: within %s after %s", time.Duration(s.Recovery), k), s.Check.AfterKind[k])
	}
	row("outside: steady", s.Check.AfterKind["steady"])
}

// causesText is "n cause, ..." from the most frequent.
func causesText(causes map[string]int64) string {
	names := make([]string, 0, len(causes))
	for k := range causes {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(causes[b], causes[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%d %s", causes[k], strings.ReplaceAll(k, "|", "/"))
	}
	return strings.Join(parts, ", ")
}

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
	s.causesTable(p, kinds)
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
