package soak

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/numfmt"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// RegionFigures are the regions mode's figures. The region that served a
// call is read from its IDs: their worker field lies in one region's
// range of the map.
type RegionFigures struct {
	Map          string         `json:"map"`
	GatewayDelay time.Duration  `json:"gateway_delay_ns"` // each way
	Regions      []RegionFigure `json:"regions"`
	// Local and FailedOver are the latencies of the Next and Batch calls
	// that returned IDs, served by the caller's region or by another
	// (a prefetcher's calls return IDs fetched earlier: left out).
	Local      Latency `json:"local"`
	FailedOver Latency `json:"failed_over"`
	// FailedOverQuiet counts the calls another region served outside
	// every region-down window (plus windowSettle): local-first says 0.
	FailedOverQuiet int `json:"failed_over_outside_region_down"`
	// DownRegion counts, over every region-down fault, the calls of the
	// downed region's own ID clients and how many failed.
	DownRegion FaultWindow `json:"down_region_clients"`
	// Sequences are the homed sequences' calls per sequence and calling
	// region (regionSeqFigures).
	Sequences []RegionSeqFigure `json:"sequences"`
	// Undocumented are a few of the sequence calls failed with a
	// HomeUnreachableError outside the documented unavailability (the
	// first line counts them all).
	Undocumented []string `json:"home_unreachable_undocumented,omitempty"`
}

// RegionFigure is one region's share.
type RegionFigure struct {
	Name  string `json:"name"`
	Range string `json:"range"`
	// IDsReceived are the IDs its clients received, IDsIssued those its
	// dispensers issued (to any region's clients), IDsElsewhere those its
	// clients received from another region.
	IDsReceived  uint64 `json:"ids_received"`
	IDsIssued    uint64 `json:"ids_issued"`
	IDsElsewhere uint64 `json:"ids_from_another_region"`
	// Calls its clients made (every kind) and those another region
	// answered (Next and Batch).
	Calls          int `json:"calls"`
	CallsElsewhere int `json:"calls_served_by_another_region"`
}

// Latency is a set of calls' count and percentiles.
type Latency struct {
	Calls int           `json:"calls"`
	P50   time.Duration `json:"p50_ns"`
	P99   time.Duration `json:"p99_ns"`
}

func latencyOf(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return Latency{Calls: len(d), P50: at(0.50), P99: at(0.99)}
}

func (l Latency) String() string {
	return fmt.Sprintf("%s calls, p50 %s, p99 %s", numfmt.Thousands(int64(l.Calls)), roundLatency(l.P50), roundLatency(l.P99))
}

func roundLatency(d time.Duration) time.Duration {
	if d < 10*time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(100 * time.Microsecond)
}

// regionFigures derives the figures from what the clients received.
func (s *soak) regionFigures(faults []faultRecord, clients []*soakClient, kinds []errorKind) *RegionFigures {
	logs := make([]*clientLog, len(clients))
	for i, c := range clients {
		logs[i] = c.log
	}
	return computeRegionFigures(s.regionsMap, s.cfg.GatewayDelay, faults, logs, kinds, seqHomes(s.homedSeqs))
}

// computeRegionFigures reads the ID figures from the ID clients (a
// sequence client's numbers are no IDs) and the sequence figures from
// the sequence clients.
func computeRegionFigures(m workerid.Regions, delay time.Duration, faults []faultRecord, all []*clientLog, kinds []errorKind, homes map[string]string) *RegionFigures {
	undocumented := examples{what: "sequence calls failed with the home region unreachable outside the documented unavailability"}
	out := &RegionFigures{Map: m.String(), GatewayDelay: delay, Sequences: regionSeqFigures(faults, all, kinds, homes, &undocumented)}
	undocumented.report(&out.Undocumented)
	clients := slices.DeleteFunc(slices.Clone(all), func(c *clientLog) bool { return c.kind.isSeq() })
	index := map[string]int{}
	for _, r := range m.List() {
		index[r.Name] = len(out.Regions)
		out.Regions = append(out.Regions, RegionFigure{Name: r.Name, Range: r.Range.String()})
	}
	var down []faultRecord
	for _, f := range faults {
		if f.Kind == faultRegionDown {
			down = append(down, f)
		}
	}
	inDown := func(start time.Duration) bool {
		for _, f := range down {
			if f.covers(start, windowSettle) {
				return true
			}
		}
		return false
	}
	seqShift, maxWorker := layout.SeqBits, layout.MaxWorkerID()
	issuer := func(id uint64) (int, bool) {
		name, ok := m.Of((id >> seqShift) & maxWorker)
		return index[name], ok
	}
	var local, failedOver []time.Duration
	for _, c := range clients {
		home, ok := index[c.region]
		if !ok {
			continue
		}
		rf := &out.Regions[home]
		rf.Calls += len(c.calls)
		rf.IDsReceived += uint64(len(c.ids))
		for _, id := range c.ids {
			if r, ok := issuer(id); ok {
				out.Regions[r].IDsIssued++
				if r != home {
					rf.IDsElsewhere++
				}
			}
		}
		for i, call := range c.calls {
			ids := c.callIDs(i)
			if c.kind != kindNext && c.kind != kindBatch || call.errKind >= 0 || len(ids) == 0 {
				continue
			}
			// One reply comes from one instance, so from one region.
			r, ok := issuer(ids[0])
			switch {
			case !ok:
			case r == home:
				local = append(local, call.elapsed)
			default:
				failedOver = append(failedOver, call.elapsed)
				rf.CallsElsewhere++
				if !inDown(call.start) {
					out.FailedOverQuiet++
				}
			}
		}
	}
	out.Local, out.FailedOver = latencyOf(local), latencyOf(failedOver)
	for _, f := range down {
		out.DownRegion.Faults++
		calls, failed := 0, 0
		for _, c := range clients {
			if c.region != f.Target {
				continue
			}
			for _, call := range c.calls {
				if f.covers(call.start, windowSettle) {
					calls++
					if call.errKind >= 0 {
						failed++
					}
				}
			}
		}
		out.DownRegion.Calls += calls
		out.DownRegion.Failed += failed
	}
	return out
}

// lines are the figures for the printed summary.
func (r *RegionFigures) lines() []string {
	var out []string
	p := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	n := func(v uint64) string { return numfmt.Thousands(int64(v)) }
	p("regions %s, gateways delayed %s each way", r.Map, r.GatewayDelay)
	for _, g := range r.Regions {
		p("  %-6s (%s): its clients got %s IDs in %s calls, %s of them from another region; its dispensers issued %s IDs; %s next/batch calls served by another region",
			g.Name, g.Range, n(g.IDsReceived), n(uint64(g.Calls)), n(g.IDsElsewhere), n(g.IDsIssued), n(uint64(g.CallsElsewhere)))
	}
	p("  next and batch calls served locally:           %s", r.Local)
	p("  next and batch calls served by another region: %s", r.FailedOver)
	p("  of them outside every region-down window: %d", r.FailedOverQuiet)
	share := 0.0
	if r.DownRegion.Calls > 0 {
		share = 100 * float64(r.DownRegion.Failed) / float64(r.DownRegion.Calls)
	}
	p("  the downed region's own ID clients during region-down: %d of %d calls failed (%.2f%%)", r.DownRegion.Failed, r.DownRegion.Calls, share)
	for _, f := range r.Sequences {
		p("  sequence %s@%s %s", f.Sequence, f.Home, f)
	}
	for _, u := range r.Undocumented {
		p("  %s", u)
	}
	return out
}

// markdownRows are the figures as rows of the Markdown summary.
func (r *RegionFigures) markdownRows(row func(k, format string, args ...any)) {
	n := func(v uint64) string { return numfmt.Thousands(int64(v)) }
	row("regions", "%s; gateways delayed %s each way", r.Map, r.GatewayDelay)
	for _, g := range r.Regions {
		row("region "+g.Name, "clients got %s IDs in %s calls (%s from another region); dispensers issued %s IDs; %s next/batch calls served by another region",
			n(g.IDsReceived), n(uint64(g.Calls)), n(g.IDsElsewhere), n(g.IDsIssued), n(uint64(g.CallsElsewhere)))
	}
	row("latency, served locally", "%s (next and batch calls that returned IDs)", r.Local)
	row("latency, served by another region", "%s; %d of them outside every region-down window", r.FailedOver, r.FailedOverQuiet)
	row("the downed region's ID clients", "%s of %s calls failed during region-down", n(uint64(r.DownRegion.Failed)), n(uint64(r.DownRegion.Calls)))
	for _, f := range r.Sequences {
		row(fmt.Sprintf("sequence %s@%s", f.Sequence, f.Home), "%s", f)
	}
}

// regionsNote names the mode in the summary's title lines.
func (r *RegionFigures) regionsNote() string {
	var names []string
	for _, g := range r.Regions {
		names = append(names, g.Name)
	}
	return fmt.Sprintf("%d regions (%s)", len(r.Regions), strings.Join(names, ", "))
}
