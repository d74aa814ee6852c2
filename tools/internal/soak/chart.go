package soak

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/uid-dispenser/uid-dispenser/internal/numfmt"
	"github.com/uid-dispenser/uid-dispenser/tools/internal/plotsvg"
)

// SecondStats is one second of the run, by when calls returned: the IDs
// and sequence numbers the clients received, their calls and how many
// of those failed.
type SecondStats struct {
	IDs, Numbers, Calls, Failed uint64
}

// timeSeries buckets every call by the second it returned in.
func timeSeries(clients []*clientLog) []SecondStats {
	var series []SecondStats
	for _, c := range clients {
		for i, call := range c.calls {
			sec := int((call.start + call.elapsed) / time.Second)
			for len(series) <= sec {
				series = append(series, SecondStats{})
			}
			st := &series[sec]
			st.Calls++
			if call.errKind >= 0 {
				st.Failed++
			}
			n := uint64(len(c.callIDs(i)))
			if c.kind.isSeq() {
				st.Numbers += n
			} else {
				st.IDs += n
			}
		}
	}
	return series
}

// SeriesTSV is the time series as tab-separated lines with a header.
func (s *Summary) SeriesTSV() string {
	var b strings.Builder
	b.WriteString("second\tids\tseq_numbers\tcalls\tfailed_calls\n")
	for i, st := range s.series {
		fmt.Fprintf(&b, "%d\t%d\t%d\t%d\t%d\n", i, st.IDs, st.Numbers, st.Calls, st.Failed)
	}
	return b.String()
}

// maxChartPoints bounds the points of a line: about one per pixel of the
// plot.
const maxChartPoints = 600

// faultColours colour the fault kinds in the chart.
var faultColours = map[string]string{
	faultKill9: "#e45756", faultSIGTERM: "#f58518", faultKillKVLeader: "#4c78a8",
	faultCutShort: "#72b7b2", faultMySQLKill: "#b279a2", faultMySQLPause: "#ff9da6",
	faultNATSPause: "#eeca3b", faultPartitionShort: "#79706e", faultKillBlocksLeader: "#1f3f6e",
	faultCutLong: "#9d755d", faultPartitionLong: "#d37295", faultZombie: "#bab0ac", faultBlocksRecreate: "#54a24b",
	faultRegionDown: "#e45756", faultGatewayCut: "#f58518", faultNodeEach: "#eeca3b",
}

// chartLines are the chart's IDs per second and failed calls per second
// (x in seconds). A long run's seconds outnumber the pixels: each point
// then stands for a bucket of seconds, the IDs their mean, the failed
// calls their worst second (so that no burst of failures is averaged
// away).
func (s *Summary) chartLines() (ids, failed plotter.XYs, bucket int) {
	bucket = max(1, (len(s.series)+maxChartPoints-1)/maxChartPoints)
	for from := 0; from < len(s.series); from += bucket {
		part := s.series[from:min(from+bucket, len(s.series))]
		var sum, worst uint64
		for _, st := range part {
			sum += st.IDs
			worst = max(worst, st.Failed)
		}
		x := float64(from) + float64(len(part)-1)/2
		ids = append(ids, plotter.XY{X: x, Y: float64(sum) / float64(len(part))})
		failed = append(failed, plotter.XY{X: x, Y: float64(worst)})
	}
	return ids, failed, bucket
}

// ChartSVG draws the IDs received per second and the failed calls per
// second over the run, and the faults in a strip below, a row per kind
// injected and a bar per fault.
func (s *Summary) ChartSVG() ([]byte, error) {
	ids, failed, bucket := s.chartLines()
	idsCaption, failedCaption := "IDs received per second", "failed calls per second (at their deadline)"
	if bucket > 1 {
		idsCaption += fmt.Sprintf(" (mean of each %d s)", bucket)
		failedCaption += fmt.Sprintf(" (worst second of each %d s)", bucket)
	}
	// Minutes on the time axis of a long run, seconds on a short one's.
	unit, unitName := 1.0, "seconds into the run"
	if s.Duration > 10*time.Minute {
		unit, unitName = 60, "minutes into the run"
	}
	for i := range ids {
		ids[i].X /= unit
		failed[i].X /= unit
	}
	idsPlot := plotsvg.NewPlot(idsCaption, "", "IDs/s")
	failedPlot := plotsvg.NewPlot(failedCaption, "", "failed calls/s")
	strip := plotsvg.NewPlot("faults injected, a row per kind", "", "")
	xMax := s.Duration.Seconds() / unit
	for _, p := range []*plot.Plot{idsPlot, failedPlot, strip} {
		p.X.Min, p.X.Max = 0, xMax
	}
	idsPlot.Y.Min, failedPlot.Y.Min = 0, 0
	failedPlot.Y.Max = 1 // at least: a run without failures still has a scale

	// A row of the strip per fault kind injected, in the cycle's order;
	// bands across the panels too while they are few enough to tell
	// apart (a long run's hundreds would wash the chart over).
	row := map[string]int{}
	for _, f := range s.FaultLog {
		row[f.Kind] = -1
	}
	var rows []string
	for _, k := range s.kinds() {
		if _, ok := row[k]; ok {
			row[k] = len(rows)
			rows = append(rows, k)
		}
	}
	var marks, bands plotsvg.Spans
	for _, f := range s.FaultLog {
		m := plotsvg.Span{From: f.Start.Seconds() / unit, To: f.End.Seconds() / unit, Colour: faultColours[f.Kind], Row: row[f.Kind]}
		marks = append(marks, m)
		m.Row = -1
		bands = append(bands, m)
	}
	if len(s.FaultLog) <= 40 {
		idsPlot.Add(bands)
		failedPlot.Add(bands)
	}
	idsPlot.Add(plotsvg.Line(ids, "#54a24b", 1.5))
	failedPlot.Add(plotsvg.Line(failed, "#e45756", 1.5))
	panels := []plotsvg.Panel{{Plot: idsPlot, Height: 220}, {Plot: failedPlot, Height: 120}}
	if len(rows) > 0 {
		plotsvg.Rows(strip, rows)
		strip.Add(marks)
		panels = append(panels, plotsvg.Panel{Plot: strip, Height: vg.Length(50 + 12*len(rows))})
	}
	panels[len(panels)-1].Plot.X.Label.Text = unitName
	return plotsvg.Figure{
		Title: fmt.Sprintf("Soak%s, %s: %s IDs, %d faults, %s failed calls, %d duplicates", s.titleNote(),
			s.Duration.Round(time.Second), numfmt.Thousands(int64(s.IDsChecked)), len(s.FaultLog), numfmt.Thousands(int64(s.failedCalls())), s.Duplicates),
		Width:  720,
		Panels: panels,
	}.SVG()
}

func (s *Summary) failedCalls() int {
	var n int
	for _, c := range s.Errors {
		n += c
	}
	return n
}

// writeRecords writes the time series and the chart into the work
// directory (series.tsv, chart.svg).
func (s *Summary) writeRecords(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "series.tsv"), []byte(s.SeriesTSV()), 0o644); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	chart, err := s.ChartSVG()
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "chart.svg"), chart, 0o644)
	}
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	return nil
}

// Markdown is the summary as a Markdown table, for docs/; chartRef
// (when not empty) is the chart's path relative to the Markdown file.
func (s *Summary) Markdown(chartRef string) string {
	var b strings.Builder
	row := func(k, format string, args ...any) { fmt.Fprintf(&b, "| %s | %s |\n", k, fmt.Sprintf(format, args...)) }
	join := func(m map[string]int, order []string) string {
		var parts []string
		for _, k := range order {
			if m[k] > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
			}
		}
		if len(parts) == 0 {
			return "none"
		}
		return strings.Join(parts, ", ")
	}
	var calls uint64
	for _, n := range s.Calls {
		calls += n
	}
	b.WriteString("| | |\n|---|---|\n")
	row("duration", "%s (MySQL: %s)", s.Duration.Round(time.Second), s.MySQL)
	n := func(v uint64) string { return numfmt.Thousands(int64(v)) }
	row("IDs checked", "%s (next %s; batch %s; prefetch %s; blocks %s) in %s calls of every kind",
		n(s.IDsChecked), n(s.IDs[kindNext.String()]), n(s.IDs[kindBatch.String()]), n(s.IDs[kindPrefetch.String()]), n(s.IDs[kindBlocks.String()]), n(calls))
	if s.HighRate.IDs > 0 {
		row("high-rate phase", "%s–%s: %s IDs to the bulk clients, %s IDs/s (%.1f × one worker ID's rate)",
			s.HighRate.From.Round(time.Second), s.HighRate.To.Round(time.Second), n(uint64(s.HighRate.IDs)), n(uint64(s.HighRate.PerSecond())),
			s.HighRate.PerSecond()/float64(layout.MaxSequence()+1))
	}
	for _, name := range sortedKeys(s.Sequences) {
		f := s.Sequences[name]
		row("sequence "+name, "%s numbers (%d..%d) in %s calls from %d instances; gap ratio %.4f (%s skipped); duplicates %d, order violations %d",
			n(f.HandedOut), f.First, f.Max, n(f.Calls), f.Instances, f.GapRatio, n(f.Skipped), f.Duplicates, f.OrderViolations)
	}
	if s.Regions != nil {
		s.Regions.markdownRows(row)
	}
	row("faults injected", "%d: %s (%d worker IDs taken over from a zombie)", len(s.FaultLog), join(s.Faults, s.kinds()), s.ZombieTakeovers)
	if s.Faults[faultMySQLKill] > 0 {
		row("mariadbd down per SIGKILL", "%s–%s, from the kill to the restarted server's first login (within the lease TTL and the reservation)",
			s.MySQLDown[0].Round(10*time.Millisecond), s.MySQLDown[1].Round(10*time.Millisecond))
	}
	row("failed calls", "%s of %s; late beyond deadline+grace %d (slowest call %s); no fault explains %d; excused by stalls of the soak %d",
		n(uint64(s.failedCalls())), n(calls), s.Late, s.SlowestCall.Round(time.Millisecond), s.Unexplained, s.Stalled)
	var windows []string
	for _, k := range s.kinds() {
		if w := s.FaultWindows[k]; w != nil && w.Faults > 0 {
			windows = append(windows, fmt.Sprintf("%s %s of %s", k, n(uint64(w.Failed)), n(uint64(w.Calls))))
		}
	}
	if len(windows) > 0 {
		row("failed calls per fault kind", "calls started from a fault's start to %s after its end, failed of all: %s", windowSettle, strings.Join(windows, ", "))
	}
	if s.SeqFaultWindows != nil {
		var seqWindows []string
		for _, k := range s.kinds() {
			if w := s.SeqFaultWindows[k]; w != nil && w.Faults > 0 {
				seqWindows = append(seqWindows, fmt.Sprintf("%s %s of %s (documented unavailable %s)", k, n(uint64(w.Failed)), n(uint64(w.Calls-w.Unavailable)), n(uint64(w.Unavailable))))
			}
		}
		row("failed sequence calls per fault kind", "failed of the calls not documented unavailable (home region down or cut off): %s", strings.Join(seqWindows, ", "))
	}
	row("failed calls by error", "%s", join(s.Errors, sortedKeys(s.Errors)))
	var seqDups, seqOrder int
	for _, f := range s.Sequences {
		seqDups += f.Duplicates
		seqOrder += f.OrderViolations
	}
	row("**duplicates**", "**%d** IDs, **%d** sequence numbers", s.Duplicates, seqDups)
	row("order violations", "%d IDs (block reorders allowed: %d), %d sequence numbers; unclaimed IDs %d; malformed blocks %d",
		s.OrderViolations, s.BlockReorders, seqOrder, s.Unclaimed, s.Blocks.Malformed)
	row("worker claims", "%d on %d worker IDs", s.Claims, s.WorkerIDs)
	for _, pf := range s.longestLived() {
		var parts []string
		for _, k := range sortedKeys(pf.Growth) {
			parts = append(parts, fmt.Sprintf("%s %d → %d", k, pf.Growth[k][0], pf.Growth[k][1]))
		}
		row("resources of "+pf.Name, "lived %s: %s (highest early → lowest late)", pf.Lived.Round(time.Second), strings.Join(parts, ", "))
	}
	result := "PASS"
	if s.Failed() {
		result = fmt.Sprintf("FAIL, %d violation(s)", len(s.Violations))
	}
	row("result", "%s", result)
	if chartRef != "" {
		fmt.Fprintf(&b, "\n![IDs per second and failed calls over the run, the faults marked](%s)\n", chartRef)
	}
	return b.String()
}

// longestLived are the dispenser that lived longest and the soak itself,
// the processes whose resources tell most.
func (s *Summary) longestLived() []ProcessFigures {
	var best, self *ProcessFigures
	for i := range s.Processes {
		p := &s.Processes[i]
		switch {
		case len(p.Growth) == 0:
		case p.Name == "soak":
			self = p
		case best == nil || p.Lived > best.Lived:
			best = p
		}
	}
	var out []ProcessFigures
	for _, p := range []*ProcessFigures{best, self} {
		if p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// WriteReports writes the chart and the Markdown summary (linking the
// chart) to the paths given, each optional.
func (s *Summary) WriteReports(chartPath, mdPath string) error {
	if chartPath != "" {
		chart, err := s.ChartSVG()
		if err == nil {
			err = os.WriteFile(chartPath, chart, 0o644)
		}
		if err != nil {
			return fmt.Errorf("writing the chart: %w", err)
		}
	}
	if mdPath == "" {
		return nil
	}
	ref := ""
	if chartPath != "" {
		rel, err := filepath.Rel(filepath.Dir(mdPath), chartPath)
		if err != nil {
			return fmt.Errorf("the chart's path from the summary's: %w", err)
		}
		ref = filepath.ToSlash(rel)
	}
	if err := os.WriteFile(mdPath, []byte(s.Markdown(ref)), 0o644); err != nil {
		return fmt.Errorf("writing the summary: %w", err)
	}
	return nil
}

// titleNote names the regions mode in the chart's title.
func (s *Summary) titleNote() string {
	if s.Regions == nil {
		return ""
	}
	return " across " + s.Regions.regionsNote()
}
