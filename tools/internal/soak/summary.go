package soak

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// Summary is what a run found. The run failed when Violations is not
// empty.
type Summary struct {
	checkResult
	Duration        time.Duration           `json:"duration_ns"`
	Faults          map[string]int          `json:"faults"`
	FaultLog        []faultRecord           `json:"fault_log"`
	FaultWindows    map[string]*FaultWindow `json:"fault_windows"`    // by kind
	ZombieTakeovers int                     `json:"zombie_takeovers"` // by the zombie and partition-long faults
	// MySQLDown is the shortest and longest time a mysql-kill left
	// mariadbd unable to accept a login (SIGKILL to the restarted
	// server's first login).
	MySQLDown          [2]time.Duration           `json:"mysql_kill_down_ns"`
	Blocks             uidclient.BlockSourceStats `json:"block_sources"`
	Processes          []ProcessFigures           `json:"processes"`
	DispenserLogErrors map[string]int             `json:"dispenser_log_errors"`
	WorkDir            string                     `json:"work_dir"`
	ErrorExamples      map[string]string          `json:"error_examples"`
	Stalls             []stall                    `json:"soak_stalls"`
	HighRate           HighRate                   `json:"high_rate"`
	// MySQL says which server the run used: "own mariadbd" or
	// "external" (without the faults that need the soak's own).
	MySQL string `json:"mysql"`
	// Kinds are the fault kinds of the run's mode, in a cycle's order.
	Kinds []string `json:"fault_kinds"`
	// Regions are the regions mode's figures (nil in the ordinary mode).
	Regions *RegionFigures `json:"regions,omitempty"`
	// SeqFaultWindows are the sequence clients' fault windows in the
	// regions mode, apart from FaultWindows (the ID clients'), with the
	// homed sequences' documented unavailability counted apart.
	SeqFaultWindows map[string]*FaultWindow `json:"seq_fault_windows,omitempty"`
	// errorKinds are the recorder's error kinds (callRecord.errKind).
	errorKinds []errorKind
	// series is the run second by second (SeriesTSV, ChartSVG).
	series []SecondStats
}

// kinds are Kinds, or the ordinary cycle's for a summary without them.
func (s *Summary) kinds() []string {
	if len(s.Kinds) == 0 {
		return faultCycle
	}
	return s.Kinds
}

// HighRate is what the bulk clients got in the high-rate phase.
type HighRate struct {
	From, To time.Duration // after the run's origin
	IDs      int           // IDs the bulk clients received
}

// PerSecond is the bulk clients' rate over the phase.
func (h HighRate) PerSecond() float64 {
	if h.To <= h.From {
		return 0
	}
	return float64(h.IDs) / (h.To - h.From).Seconds()
}

// ProcessFigures are a process's resources early and late in its life.
type ProcessFigures struct {
	Name    string              `json:"name"`
	PID     int                 `json:"pid"`
	Lived   time.Duration       `json:"lived_ns"`
	Samples int                 `json:"samples"`
	Growth  map[string][2]int64 `json:"growth,omitempty"` // resource → [highest early, lowest late]
}

// Failed tells whether the run found a violation (or did not run).
func (s *Summary) Failed() bool { return s == nil || len(s.Violations) > 0 }

func (s *soak) summarise(rec *recorder, clients []*soakClient, blocks uidclient.BlockSourceStats, stalls []stall) *Summary {
	logs := make([]*clientLog, len(clients))
	for i, c := range clients {
		logs[i] = c.log
	}
	s.events.mu.Lock()
	books := map[string]claimBook{}
	for f, afters := range s.events.afters {
		books[f] = newClaimBook(afters)
	}
	logErrors := maps.Clone(s.events.logErrors)
	violations := slices.Clone(s.events.violations)
	s.events.mu.Unlock()
	rec.mu.Lock()
	kinds := slices.Clone(rec.kinds)
	rec.mu.Unlock()
	s.mu.Lock()
	faults := slices.Clone(s.faults)
	takeovers := s.takeovers
	var mysqlDown [2]time.Duration
	if len(s.mysqlDown) > 0 {
		mysqlDown = [2]time.Duration{slices.Min(s.mysqlDown), slices.Max(s.mysqlDown)}
	}
	s.mu.Unlock()

	sum := &Summary{
		checkResult: check(checkInput{
			layout: layout, clients: logs, claims: books, kinds: kinds,
			deadline: s.cfg.CallDeadline, grace: s.cfg.Grace,
			faults: faults, settle: s.cfg.CallDeadline + time.Second, cutSettle: s.cfg.LeaseTTL / 3,
			stalls: stalls,
		}),
		Duration:           s.since(),
		Faults:             map[string]int{},
		FaultLog:           faults,
		ZombieTakeovers:    takeovers,
		MySQLDown:          mysqlDown,
		Blocks:             blocks,
		DispenserLogErrors: logErrors,
		ErrorExamples:      map[string]string{},
		Stalls:             stalls,
		series:             timeSeries(logs),
		Kinds:              s.cfg.kinds(),
	}
	for _, k := range kinds {
		sum.ErrorExamples[k.name] = k.example
	}
	sum.HighRate.From, sum.HighRate.To = s.cfg.highRatePhase()
	for _, c := range clients {
		if c.bulk {
			sum.HighRate.IDs += c.bulkIDs
		}
	}
	if s.cfg.BulkClients > 0 && sum.HighRate.IDs == 0 {
		sum.Violations = append(sum.Violations, "the bulk clients received no ID in the high-rate phase")
	}
	for _, f := range faults {
		sum.Faults[f.Kind]++
	}
	sum.errorKinds = kinds
	var windowViolations []string
	if len(s.regions) > 0 {
		// Issue 21's target, every window, judged for the ID and the
		// sequence clients apart; the sequences' documented
		// unavailability outside it.
		every := func(string) bool { return true }
		idLogs := slices.DeleteFunc(slices.Clone(logs), func(c *clientLog) bool { return c.kind.isSeq() })
		seqLogs := slices.DeleteFunc(slices.Clone(logs), func(c *clientLog) bool { return !c.kind.isSeq() })
		sum.FaultWindows, windowViolations = faultWindows(idLogs, faults, every)
		var seqViolations []string
		sum.SeqFaultWindows, seqViolations = faultWindowsExcusing(seqLogs, faults, every, seqUnavailable(kinds, seqHomes(s.homedSeqs)))
		for _, v := range seqViolations {
			windowViolations = append(windowViolations, "sequence calls: "+v)
		}
	} else {
		sum.FaultWindows, windowViolations = faultWindows(logs, faults, leaderKill)
	}
	sum.Violations = append(violations, sum.Violations...)
	sum.Violations = append(sum.Violations, windowViolations...)
	if blocks.Malformed > 0 {
		sum.Violations = append(sum.Violations, fmt.Sprintf("block sources met %d malformed blocks", blocks.Malformed))
	}
	sum.MySQL = "external"
	if s.mysqld != nil {
		sum.MySQL = "own mariadbd"
	}
	for _, kind := range s.cycle() {
		if sum.Faults[kind] == 0 {
			sum.Violations = append(sum.Violations, "no fault of kind "+kind+" was injected")
		}
	}
	if sum.IDsChecked == 0 {
		sum.Violations = append(sum.Violations, "no client received any ID")
	}

	// Resources: every dispenser process, and the soak itself.
	judge := func(name string, pid int, samples []sample, lived time.Duration, limits []growthLimit) {
		v, fig := defaultGrowthPolicy.growth(samples, lived, limits)
		sum.Processes = append(sum.Processes, ProcessFigures{Name: name, PID: pid, Lived: lived, Samples: len(samples), Growth: fig})
		for _, x := range v {
			sum.Violations = append(sum.Violations, fmt.Sprintf("process %s (pid %d, lived %s): %s", name, pid, lived.Round(time.Second), x))
		}
	}
	for _, slot := range s.slots {
		for _, p := range slot.processes() {
			samples, lived := p.history()
			judge(p.name, p.pid, samples, lived, growthLimits)
		}
	}
	var selfLived time.Duration
	if n := len(s.self); n > 0 {
		selfLived = s.self[n-1].at
	}
	judge("soak", 0, s.self, selfLived, growthLimits[:2])
	return sum
}

// Print writes the summary for people.
func (s *Summary) Print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	if s.Regions != nil {
		p("== soak summary (%s, %s)", s.Duration.Round(time.Second), s.Regions.regionsNote())
	} else {
		p("== soak summary (%s)", s.Duration.Round(time.Second))
	}
	p("IDs checked:        %d", s.IDsChecked)
	for _, k := range []callKind{kindNext, kindBatch, kindPrefetch, kindBlocks} {
		p("  %-9s %10d IDs in %8d calls", k.String()+":", s.IDs[k.String()], s.Calls[k.String()])
	}
	if s.HighRate.IDs > 0 {
		p("  high-rate phase %s–%s: %d IDs to the bulk clients, %.0f IDs/s (%.1f × one worker ID's %d/s)",
			s.HighRate.From.Round(time.Second), s.HighRate.To.Round(time.Second), s.HighRate.IDs, s.HighRate.PerSecond(),
			s.HighRate.PerSecond()/float64(layout.MaxSequence()+1), layout.MaxSequence()+1)
	}
	for _, f := range fleets {
		p("  fleet %-7s %10d IDs (worker IDs on %s), %d duplicates", f.name+":", s.FleetIDs[f.name], f.store, s.FleetDuplicates[f.name])
	}
	for _, name := range sortedKeys(s.Sequences) {
		f := s.Sequences[name]
		p("  sequence %-15s %d numbers (%d..%d) in %d calls from %d instances: %d duplicates, %d order violations, gap ratio %.4f (%d skipped)",
			name+":", f.HandedOut, f.First, f.Max, f.Calls, f.Instances, f.Duplicates, f.OrderViolations, f.GapRatio, f.Skipped)
	}
	if s.Regions != nil {
		for _, l := range s.Regions.lines() {
			p("%s", l)
		}
	}
	p("duplicates:         %d (IDs are unique per fleet: each fleet has its own worker IDs, so the fleets' IDs may coincide)", s.Duplicates)
	p("order violations:   %d (block reorders across blocks, allowed: %d)", s.OrderViolations, s.BlockReorders)
	p("unclaimed IDs:      %d", s.Unclaimed)
	p("worker claims:      %d on %d worker IDs", s.Claims, s.WorkerIDs)
	p("faults injected:    %d (MySQL: %s)", len(s.FaultLog), s.MySQL)
	p("  %-24s %6s  %8s %7s  (calls started from a fault's start to %s after its end)", "kind", "faults", "calls", "failed", windowSettle)
	for _, k := range s.kinds() {
		w := s.FaultWindows[k]
		if w == nil {
			w = &FaultWindow{}
		}
		share := 0.0
		if w.Calls > 0 {
			share = 100 * float64(w.Failed) / float64(w.Calls)
		}
		p("  %-24s %6d  %8d %7d  %6.2f%%", k, s.Faults[k], w.Calls, w.Failed, share)
		if (leaderKill(k) || s.Regions != nil) && w.Worst != "" {
			p("      worst: %s", w.Worst)
		}
	}
	if s.SeqFaultWindows != nil {
		p("  sequence calls (apart from the above), failed besides the documented unavailability (home region down or cut off):")
		for _, k := range s.kinds() {
			w := s.SeqFaultWindows[k]
			if w == nil {
				w = &FaultWindow{}
			}
			share := 0.0
			if judged := w.Calls - w.Unavailable; judged > 0 {
				share = 100 * float64(w.Failed) / float64(judged)
			}
			p("  %-24s %6d  %8d %7d  %6.2f%%  documented unavailable %d", k, s.Faults[k], w.Calls, w.Failed, share, w.Unavailable)
			if w.Worst != "" {
				p("      worst: %s", w.Worst)
			}
		}
	}
	p("  worker IDs taken over from a paused or cut-off dispenser (zombie, partition-long): %d", s.ZombieTakeovers)
	if s.Faults[faultMySQLKill] > 0 {
		p("  mariadbd down after SIGKILL: %s–%s (to its first login; reserve chunk and lease TTL much longer)",
			s.MySQLDown[0].Round(10*time.Millisecond), s.MySQLDown[1].Round(10*time.Millisecond))
	}
	var errs int
	for _, n := range s.Errors {
		errs += n
	}
	p("failed calls:       %d (late beyond deadline+grace: %d, slowest call %s)", errs, s.Late, s.SlowestCall.Round(time.Millisecond))
	for _, k := range sortedKeys(s.Errors) {
		p("  %6d  %s", s.Errors[k], k)
	}
	p("failed calls no fault explains (e.g. during a short MySQL cut): %d", s.Unexplained)
	var longest time.Duration
	for _, st := range s.Stalls {
		longest = max(longest, st.Length)
	}
	p("soak process stalls (> %s): %d, longest %s; calls late or failed in them (excused): %d",
		stallThreshold, len(s.Stalls), longest.Round(time.Millisecond), s.Stalled)
	p("block sources:      %d blocks used, %d redeliveries terminated, %d acks unconfirmed, %d given up as the consumer changed, %d malformed",
		s.Blocks.BlocksUsed, s.Blocks.Redelivered, s.Blocks.AckFailed, s.Blocks.ConsumerChanged, s.Blocks.Malformed)
	if len(s.DispenserLogErrors) > 0 {
		p("dispenser ERROR log lines:")
		for _, k := range sortedKeys(s.DispenserLogErrors) {
			p("  %6d  %s", s.DispenserLogErrors[k], k)
		}
	}
	p("processes judged for leaks (resource: highest early → lowest late):")
	short := 0
	for _, pf := range s.Processes {
		if len(pf.Growth) == 0 {
			short++
			continue
		}
		var parts []string
		for _, k := range sortedKeys(pf.Growth) {
			parts = append(parts, fmt.Sprintf("%s %d→%d", k, pf.Growth[k][0], pf.Growth[k][1]))
		}
		p("  %-6s pid %-7d lived %-6s %s", pf.Name, pf.PID, pf.Lived.Round(time.Second), strings.Join(parts, ", "))
	}
	p("  (%d processes lived too briefly to judge)", short)
	if len(s.Violations) == 0 {
		p("RESULT: PASS (no violations)")
		return
	}
	p("RESULT: FAIL, %d violation(s):", len(s.Violations))
	for _, v := range s.Violations {
		p("  - %s", v)
	}
	p("logs: %s", s.WorkDir)
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
