package faults

import (
	"slices"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/check"
)

func passedSummary() *Summary {
	s := &Summary{Passed: true, Faults: map[string]int{KindPartition: 1, KindPause: 2}, Check: &check.Result{Valid: true}}
	s.Calls.OK, s.IDs.Acknowledged, s.Numbers.Acknowledged = 10, 50, 40
	s.Proofs = []Proof{{Kind: KindPartition, Proven: true}, {Kind: KindPause, Proven: true}, {Kind: KindPause, Proven: true}}
	return s
}

func TestFailuresOfAPassedRunAreNone(t *testing.T) {
	if f := passedSummary().Failures([]string{KindPartition, KindPause}); len(f) != 0 {
		t.Errorf("failures of a passed run: %q", f)
	}
}

func TestFailuresNameEachFailedCheck(t *testing.T) {
	s := passedSummary()
	s.Passed = false
	s.IDs.Duplicated, s.LeaseOverlaps = 3, 2
	s.Check.Numbers.Lost = 4
	s.Check.Problems = []string{"call c0/7 invoked twice"}
	s.Proofs = append(s.Proofs, Proof{Kind: KindPowerLoss}, Proof{Kind: KindPowerLoss})
	s.Faults[KindPowerLoss] = 2
	got := s.Failures([]string{KindPartition, KindPause, KindPowerLoss, KindClockStep})
	want := []string{"3 duplicated IDs", "4 lost numbers", "2 lease overlaps",
		"1 history problems (call c0/7 invoked twice)", "unproven: power-loss", "not injected: clock-step"}
	if !slices.Equal(got, want) {
		t.Errorf("failures:\n got %q\nwant %q", got, want)
	}
}

func TestFailuresOfAVacuousRun(t *testing.T) {
	s := passedSummary()
	s.Calls.OK, s.IDs.Acknowledged, s.Numbers.Acknowledged = 0, 0, 0
	got := s.Failures(nil)
	want := []string{"no call ok", "no ID acknowledged", "no number acknowledged"}
	if !slices.Equal(got, want) {
		t.Errorf("failures:\n got %q\nwant %q", got, want)
	}
	s = passedSummary()
	s.Passed = false
	if got := s.Failures(nil); !slices.Equal(got, []string{"not passed"}) {
		t.Errorf("a failed run with no reason named: %q", got)
	}
}
