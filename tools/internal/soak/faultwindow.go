package soak

import (
	"fmt"
	"time"
)

// FaultWindow counts the calls that started while faults of one kind
// lasted (from a fault's start to its end plus windowSettle), and how
// many of them failed: what a fault costs the clients of the fleets it
// touches (a MySQL fault's window holds only the MySQL fleet's calls).
type FaultWindow struct {
	Faults int    `json:"faults"`
	Calls  int    `json:"calls"`
	Failed int    `json:"failed"`
	Worst  string `json:"worst,omitempty"` // the fault with the highest share of failed calls
	worst  float64
}

// windowSettle extends a fault's window: calls started just after a
// fault ended still meet what it left (a new leader settling).
const windowSettle = time.Second

// maxLeaderKillFailures is the share of calls that may fail while a
// stream leader's node is killed and restarted (issue 15: one node's loss
// must not take the fleet out). Judged on windows of at least
// minWindowCalls calls, fewer being too few for a share to mean much.
const (
	maxLeaderKillFailures = 0.01
	minWindowCalls        = 100
)

// faultWindows counts each fault's window over every client's calls and
// returns the figures by kind and a violation for each fault of a kind
// limited (the leader kills; in regions mode every kind) whose window
// failed more than maxLeaderKillFailures of its calls.
func faultWindows(clients []*clientLog, faults []faultRecord, limited func(kind string) bool) (map[string]*FaultWindow, []string) {
	byKind := map[string]*FaultWindow{}
	var violations []string
	for _, f := range faults {
		from, to := f.Start, f.End+windowSettle
		calls, failed := 0, 0
		for _, c := range clients {
			if !f.touches(c.fleet) {
				continue
			}
			for _, call := range c.calls {
				if call.start >= from && call.start <= to {
					calls++
					if call.errKind >= 0 {
						failed++
					}
				}
			}
		}
		w := byKind[f.Kind]
		if w == nil {
			w = &FaultWindow{}
			byKind[f.Kind] = w
		}
		w.Faults++
		w.Calls += calls
		w.Failed += failed
		share := 0.0
		if calls > 0 {
			share = float64(failed) / float64(calls)
		}
		desc := fmt.Sprintf("%s at %.1fs on %s: %d of %d calls failed (%.2f%%)", f.Kind, f.Start.Seconds(), f.Target, failed, calls, 100*share)
		if w.Worst == "" || share > w.worst {
			w.Worst, w.worst = desc, share
		}
		if limited(f.Kind) && calls >= minWindowCalls && share > maxLeaderKillFailures {
			violations = append(violations, fmt.Sprintf("more than %.0f%% of the calls failed in a fault's window: %s (%s)",
				100*maxLeaderKillFailures, desc, f.Note))
		}
	}
	return byKind, violations
}
