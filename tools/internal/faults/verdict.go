package faults

import (
	"fmt"
	"slices"
	"strings"
)

// Failures is why the run failed, each reason short, for a verdict on
// one line (a CI log keeps only a failed test's last lines): the
// checker's findings (duplicates, lost values, overlaps, history
// problems), the faults not proven, and, of the kinds the run was to
// inject, those it did not. Empty when the run passed and every kind was
// injected.
func (s *Summary) Failures(kinds []string) []string {
	var out []string
	add := func(n int64, what string) {
		if n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(s.IDs.Duplicated, "duplicated IDs")
	add(s.Numbers.Duplicated, "duplicated numbers")
	if s.Check != nil {
		add(s.Check.IDs.Lost, "lost IDs")
		add(s.Check.Numbers.Lost, "lost numbers")
	}
	add(int64(s.LeaseOverlaps), "lease overlaps")
	add(int64(s.SegmentOverlaps), "segment overlaps")
	if s.Check != nil && len(s.Check.Problems) > 0 {
		out = append(out, fmt.Sprintf("%d history problems (%s)", len(s.Check.Problems), s.Check.Problems[0]))
	}
	if s.Calls.OK == 0 {
		out = append(out, "no call ok")
	}
	if s.IDs.Acknowledged == 0 {
		out = append(out, "no ID acknowledged")
	}
	if s.Numbers.Acknowledged == 0 {
		out = append(out, "no number acknowledged")
	}
	var unproven []string
	for _, p := range s.Proofs {
		if !p.Proven && !slices.Contains(unproven, p.Kind) {
			unproven = append(unproven, p.Kind)
		}
	}
	if len(unproven) > 0 {
		out = append(out, "unproven: "+strings.Join(unproven, ", "))
	}
	var missing []string
	for _, k := range kinds {
		if s.Faults[k] == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		out = append(out, "not injected: "+strings.Join(missing, ", "))
	}
	if len(out) == 0 && !s.Passed {
		out = append(out, "not passed")
	}
	return out
}
