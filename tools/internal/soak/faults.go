package soak

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Fault kinds, in the order of a cycle.
const (
	faultKill9            = "kill9"
	faultSIGTERM          = "sigterm"
	faultKillKVLeader     = "nats-kill-kv-leader"
	faultCutShort         = "mysql-cut-short"
	faultMySQLKill        = "mysql-kill"
	faultMySQLPause       = "mysql-pause"
	faultNATSPause        = "nats-pause"
	faultPartitionShort   = "partition-short"
	faultKillBlocksLeader = "nats-kill-blocks-leader"
	faultCutLong          = "mysql-cut-long"
	faultPartitionLong    = "partition-long"
	faultZombie           = "zombie"
	faultBlocksRecreate   = "blocks-recreate"
)

// faultCycle opens with what the high-rate phase must ride through
// (dispenser restarts, a stream leader's kill -9, the short MySQL cut and
// mariadbd's kill and pause) and ends with the faults that run
// reservations out by design.
var faultCycle = []string{faultKill9, faultSIGTERM, faultKillKVLeader, faultCutShort, faultMySQLKill, faultMySQLPause,
	faultNATSPause, faultPartitionShort, faultKillBlocksLeader, faultBlocksRecreate, faultCutLong, faultPartitionLong, faultZombie}

// leaderKill tells the kinds that SIGKILL a stream leader: during them at
// most maxLeaderKillFailures of the calls may fail.
func leaderKill(kind string) bool { return kind == faultKillKVLeader || kind == faultKillBlocksLeader }

// ownMySQLFaults need the soak's own mariadbd: with the MySQL server of
// Config.MySQLDSN (external, or the fallback when none is installed) they
// are left out of the cycle.
var ownMySQLFaults = map[string]bool{faultMySQLKill: true, faultMySQLPause: true}

// rideOutFaults are the store outages shorter than the lease TTL: the
// leases must ride them out, so a call failing during one (or within
// checkInput.cutSettle after it) is a violation.
var rideOutFaults = map[string]bool{faultCutShort: true, faultMySQLKill: true, faultMySQLPause: true}

// cycle is the faults of a cycle this run injects.
func (s *soak) cycle() []string {
	return cycleFrom(s.cfg.kinds(), s.cfg.Faults, s.mysqld != nil)
}

// kinds are the fault kinds of the run's mode, in a cycle's order.
func (c Config) kinds() []string {
	if c.Regions > 0 {
		return regionFaultCycle
	}
	return faultCycle
}

// cycleOf is the cycle's faults, only those named in only when it is not
// empty, without those that need the soak's own mariadbd when there is
// none.
func cycleOf(only []string, ownMySQL bool) []string {
	return cycleFrom(faultCycle, only, ownMySQL)
}

// cycleFrom is cycleOf on the kinds all.
func cycleFrom(all, only []string, ownMySQL bool) []string {
	var kinds []string
	for _, k := range all {
		if (ownMySQLFaults[k] && !ownMySQL) || (len(only) > 0 && !slices.Contains(only, k)) {
			continue
		}
		kinds = append(kinds, k)
	}
	return kinds
}

// checkFaultKinds rejects a kind the cycle does not have (a typo would
// otherwise run no fault at all).
func checkFaultKinds(kinds []string) error {
	return checkFaultKindsOf(faultCycle, kinds)
}

// checkFaultKindsOf is checkFaultKinds for a mode whose kinds are all.
func checkFaultKindsOf(all, kinds []string) error {
	for _, k := range kinds {
		if !slices.Contains(all, k) {
			return fmt.Errorf("soak: unknown fault kind %q (the kinds: %s)", k, strings.Join(all, ", "))
		}
	}
	return nil
}

// survivorSlot is the dispenser that is never restarted, so that its
// resources are judged over the whole run; it still goes through the NATS
// node faults, the MySQL cuts and, when it holds the lowest worker ID, the
// zombie pause. Restarts take turns among the slots before it (of the
// MySQL fleet; the KV fleet's k1 is restarted during the long partition).
const survivorSlot = numDispensers - 1

// faultRecord is one fault injected.
type faultRecord struct {
	Kind   string        `json:"kind"`
	Target string        `json:"target"`
	Start  time.Duration `json:"start_ns"` // since the run started
	End    time.Duration `json:"end_ns"`
	Note   string        `json:"note,omitempty"`
	// Fleet is the one fleet the fault can touch (a MySQL outage touches
	// only the MySQL fleet, a partition of k0 only the KV fleet); "" for
	// faults that touch both (a NATS node's kill or pause).
	Fleet string `json:"fleet,omitempty"`
}

// touches tells whether the fault can fail a call to fleet.
func (f faultRecord) touches(fleet string) bool { return f.Fleet == "" || f.Fleet == fleet }

// covers tells whether a call started at start falls in the fault's
// window: from its start to settle after its end.
func (f faultRecord) covers(start, settle time.Duration) bool {
	return start >= f.Start && start <= f.End+settle
}

// runFaults injects faults, cycle after cycle, until until has passed;
// the first cycle always runs to its end.
func (s *soak) runFaults(ctx context.Context, until time.Time) {
	if len(s.cycle()) == 0 {
		return // -faults left none this run can inject
	}
	for cycle := 0; ; cycle++ {
		for _, kind := range s.cycle() {
			if ctx.Err() != nil || (cycle > 0 && time.Now().After(until)) {
				return
			}
			if !sleep(ctx, s.cfg.FaultGap) {
				return
			}
			s.inject(ctx, kind, cycle)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (s *soak) inject(ctx context.Context, kind string, cycle int) {
	rec := faultRecord{Kind: kind, Start: s.since()}
	switch kind {
	case faultKill9:
		slot := s.slots[cycle%survivorSlot]
		rec.Fleet = slot.fleet.name
		rec.Target, rec.Note = s.restartSlot(ctx, slot, true)
	case faultSIGTERM:
		slot := s.slots[(cycle+1)%survivorSlot]
		rec.Fleet = slot.fleet.name
		rec.Target, rec.Note = s.restartSlot(ctx, slot, false)
	case faultKillKVLeader:
		if len(s.regions) > 0 {
			rec.Target, rec.Note = s.killRegionKVLeader(ctx, cycle)
			break
		}
		rec.Target, rec.Note = s.killLeader(ctx, kvStream, cycle)
	case faultKillBlocksLeader:
		// The two fleets' blocks streams in turn.
		rec.Target, rec.Note = s.killLeader(ctx, fleets[cycle%len(fleets)].blocksStream, cycle)
	case faultNATSPause:
		node := cycle % len(s.cluster.nodes)
		rec.Target = s.cluster.nodes[node].name
		rec.Note = fmt.Sprintf("SIGSTOP for %s; %s", s.cfg.NATSPause, s.leaderNote(ctx))
		if err := s.cluster.pause(ctx, node, s.cfg.NATSPause); err != nil {
			s.events.violation("pause of NATS node %s: %v", rec.Target, err)
		}
	case faultBlocksRecreate:
		f := fleets[cycle%len(fleets)] // the two fleets' blocks in turn
		rec.Fleet = f.name
		rec.Target, rec.Note = s.recreateBlocks(ctx, f, cycle)
	case faultPartitionShort, faultPartitionLong:
		rec.Fleet = s.slots[partitionedSlot].fleet.name
		rec.Target, rec.Note = s.partition(ctx, kind == faultPartitionLong)
	case faultCutShort, faultCutLong:
		rec.Fleet = mysqlFleet.name
		d := s.cfg.ShortCut
		if kind == faultCutLong {
			d = s.cfg.LongCut
		}
		rec.Target = "mysql proxy"
		rec.Note = d.String()
		s.proxy.Cut()
		var restarted *dispenserProc
		if kind == faultCutLong {
			// A dispenser starting while the store is unreachable must
			// keep trying and serve once it is back.
			restarted = s.startDuringCut(s.slots[cycle%survivorSlot], &rec.Note)
		}
		sleep(ctx, d)
		s.proxy.Restore()
		if restarted != nil {
			restored := time.Now()
			if err := restarted.waitServing(ctx, s.cfg.ServeWithin); err != nil {
				s.events.violation("dispenser started during a MySQL cut: %v", err)
				restarted.kill()
				s.startSlot(ctx, restarted.slot)
			} else {
				rec.Note += fmt.Sprintf(", serving %.1fs after the cut", time.Since(restored).Seconds())
			}
		}
		// Let the leases renew (after a long cut: every dispenser resumes).
		sleep(ctx, s.cfg.LeaseTTL/2)
	case faultMySQLKill:
		rec.Fleet = mysqlFleet.name
		rec.Target = "mariadbd"
		down, err := s.mysqld.killAndRestart(ctx, s.cfg.MySQLDown)
		if err != nil {
			s.events.violation("restart of mariadbd after SIGKILL: %v", err)
		} else {
			s.mu.Lock()
			s.mysqlDown = append(s.mysqlDown, down)
			s.mu.Unlock()
		}
		rec.Note = fmt.Sprintf("down %.2fs (SIGKILL to accepting logins; reserve chunk %s)", down.Seconds(), s.cfg.ReserveChunk)
		sleep(ctx, s.cfg.LeaseTTL/2) // the leases renew
	case faultMySQLPause:
		rec.Fleet = mysqlFleet.name
		rec.Target = "mariadbd"
		rec.Note = "SIGSTOP for " + s.cfg.ShortCut.String()
		if err := s.mysqld.pause(ctx, s.cfg.ShortCut); err != nil {
			s.events.violation("%v", err)
		}
		sleep(ctx, s.cfg.LeaseTTL/2)
	case faultZombie:
		rec.Fleet = mysqlFleet.name // zombie pauses and restarts the MySQL fleet's
		rec.Target, rec.Note = s.zombie(ctx)
	default:
		s.injectRegions(ctx, &rec, cycle)
	}
	rec.End = s.since()
	s.progress("fault %-15s %-8s from %5.1fs for %4.1fs  %s", rec.Kind, rec.Target, rec.Start.Seconds(), (rec.End - rec.Start).Seconds(), rec.Note)
	s.mu.Lock()
	s.faults = append(s.faults, rec)
	s.mu.Unlock()
}

// restartSlot stops the slot's process (SIGKILL, or SIGTERM with a clean
// exit required) and starts a new one, waiting for it to serve. It
// returns the target and a note for the fault record.
func (s *soak) restartSlot(ctx context.Context, slot *dispenserSlot, kill bool) (target, note string) {
	p := slot.current()
	if p == nil {
		return slot.label, "no process"
	}
	old := p.WorkerID()
	if kill {
		p.kill()
	} else if err := p.terminate(s.cfg.ShutdownTimeout + 5*time.Second); err != nil {
		s.events.violation("graceful stop: %v", err)
	}
	np := s.startSlot(ctx, slot)
	if np == nil {
		return p.name, fmt.Sprintf("worker %d → not serving", old)
	}
	return p.name, fmt.Sprintf("worker %d → %s worker %d", old, np.name, np.WorkerID())
}

// startSlot starts a process in the slot and waits for it to serve;
// failures are violations, and it tries three times.
func (s *soak) startSlot(ctx context.Context, slot *dispenserSlot) *dispenserProc {
	for attempt := 1; attempt <= 3 && ctx.Err() == nil; attempt++ {
		p, err := slot.start()
		if err != nil {
			s.events.violation("%v", err)
			continue
		}
		err = p.waitServing(ctx, s.cfg.ServeWithin)
		if err == nil {
			return p
		}
		if ctx.Err() != nil {
			return nil
		}
		s.events.violation("%v", err)
		p.kill()
	}
	return nil
}

// zombie pauses the dispenser with the lowest worker ID past its lease's
// expiry, restarts others until one has taken its worker ID over, and
// resumes it. The resumed dispenser must notice that it lost its worker
// ID and serve under a new one.
func (s *soak) zombie(ctx context.Context) (target, note string) {
	var z *dispenserProc
	for _, slot := range s.slots[:numDispensers] { // the MySQL fleet
		if p := slot.current(); p != nil && p.WorkerID() >= 0 && (z == nil || p.WorkerID() < z.WorkerID()) {
			z = p
		}
	}
	if z == nil {
		return "-", "no dispenser serving"
	}
	wz := z.WorkerID()
	if err := z.signal(syscall.SIGSTOP); err != nil {
		s.events.violation("%v", err)
		return z.name, err.Error()
	}
	// The store's expiry is at most a TTL after the pause began.
	sleep(ctx, s.cfg.LeaseTTL+time.Second)
	takenBy := ""
	for attempt := 0; attempt < 4 && takenBy == "" && ctx.Err() == nil; attempt++ {
		// Restart the other dispenser (not the survivor) with the highest
		// worker ID: a new claim takes the lowest free or expired one.
		var victim *dispenserSlot
		var highest int64 = -1
		for _, slot := range s.slots[:survivorSlot] {
			if p := slot.current(); p != nil && p != z && p.WorkerID() > highest {
				victim, highest = slot, p.WorkerID()
			}
		}
		if victim == nil {
			break
		}
		s.restartSlot(ctx, victim, true)
		if p := victim.current(); p != nil && p.WorkerID() == wz {
			takenBy = p.name
		}
	}
	if err := z.signal(syscall.SIGCONT); err != nil {
		s.events.violation("%v", err)
	}
	if takenBy == "" {
		return z.name, fmt.Sprintf("paused, worker %d not taken over", wz)
	}
	return z.name, s.waitReclaimed(ctx, z, wz, takenBy)
}

// waitReclaimed counts a takeover of z's worker ID wz by takenBy and
// waits until z, back, has noticed and serves under another worker ID
// (not doing so within ServeWithin is a violation); it returns the
// fault's note.
func (s *soak) waitReclaimed(ctx context.Context, z *dispenserProc, wz int64, takenBy string) string {
	s.mu.Lock()
	s.takeovers++
	s.mu.Unlock()
	deadline := time.Now().Add(s.cfg.ServeWithin)
	for (z.WorkerID() == wz || z.Holds(wz)) && time.Now().Before(deadline) && ctx.Err() == nil {
		sleep(ctx, 100*time.Millisecond)
	}
	if z.WorkerID() == wz || z.Holds(wz) {
		select {
		case <-z.exited: // it may have failed instead (a violation already)
		default:
			s.events.violation("zombie %s still serves worker %d %s after %s took it over", z.name, wz, s.cfg.ServeWithin, takenBy)
		}
		return fmt.Sprintf("worker %d taken by %s; zombie did not reclaim", wz, takenBy)
	}
	return fmt.Sprintf("worker %d taken by %s; zombie gave it up, now serving as worker %d", wz, takenBy, z.WorkerID())
}

// startDuringCut kills the slot's process and starts a new one while
// MySQL is cut; it returns the new process (nil when it did not start).
func (s *soak) startDuringCut(slot *dispenserSlot, note *string) *dispenserProc {
	p := slot.current()
	if p == nil {
		return nil
	}
	p.kill()
	np, err := slot.start()
	if err != nil {
		s.events.violation("%v", err)
		return nil
	}
	*note += fmt.Sprintf("; %s killed, %s started during the cut", p.name, np.name)
	return np
}
