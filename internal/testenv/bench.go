package testenv

import (
	"os"
	"slices"
	"strconv"
)

// RoundOrder is targets in the order this round of scripts/bench-report.sh
// runs them: an even UID_BENCH_ROUND reverses them. Run in a fixed order,
// the last target paid for what the earlier ones left in the process:
// uidclient, always last, came out at 0.86 × the echo with 8 clients in
// one report, and at 0.955 × (the median of four pairs) run alternately
// first and second.
func RoundOrder(targets []string) []string {
	if round, err := strconv.Atoi(os.Getenv("UID_BENCH_ROUND")); err == nil && round%2 == 0 {
		targets = slices.Clone(targets)
		slices.Reverse(targets)
	}
	return targets
}
