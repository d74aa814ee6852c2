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
	Faults int `json:"faults"`
	Calls  int `json:"calls"`
	Failed int `json:"failed"`
	// Unavailable are the failed calls the fault's design explains, apart
	// from Failed and from the share judged (Failed of Calls −
	// Unavailable): a homed sequence's calls while its home region is
	// down or cut off (seqUnavailable).
	Unavailable int    `json:"documented_unavailable,omitempty"`
	Worst       string `json:"worst,omitempty"` // the fault with the highest share of failed calls
	worst       float64
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
	return faultWindowsExcusing(clients, faults, limited, nil)
}

// faultWindowsExcusing is faultWindows counting the failed calls
// unavailable says f explains by design (nil: none) as Unavailable,
// apart from the failed calls judged.
func faultWindowsExcusing(clients []*clientLog, faults []faultRecord, limited func(kind string) bool,
	unavailable func(c *clientLog, call callRecord, f faultRecord) bool) (map[string]*FaultWindow, []string) {
	byKind := map[string]*FaultWindow{}
	var violations []string
	for _, f := range faults {
		calls, failed, excused := 0, 0, 0
		for _, c := range clients {
			if !f.touches(c.fleet) {
				continue
			}
			for _, call := range c.calls {
				if f.covers(call.start, windowSettle) {
					calls++
					switch {
					case call.errKind < 0:
					case unavailable != nil && unavailable(c, call, f):
						excused++
					default:
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
		w.Unavailable += excused
		judged := calls - excused
		share := 0.0
		if judged > 0 {
			share = float64(failed) / float64(judged)
		}
		desc := fmt.Sprintf("%s at %.1fs on %s: %d of %d calls failed (%.2f%%)", f.Kind, f.Start.Seconds(), f.Target, failed, judged, 100*share)
		if excused > 0 {
			desc += fmt.Sprintf(", besides %d documented unavailable", excused)
		}
		if w.Worst == "" || share > w.worst {
			w.Worst, w.worst = desc, share
		}
		if limited(f.Kind) && judged >= minWindowCalls && share > maxLeaderKillFailures {
			violations = append(violations, fmt.Sprintf("more than %.0f%% of the calls failed in a fault's window: %s (%s)",
				100*maxLeaderKillFailures, desc, f.Note))
		}
	}
	return byKind, violations
}
