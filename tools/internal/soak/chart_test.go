package soak

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/plotsvg/plotsvgtest"
)

func TestTimeSeriesChartAndMarkdown(t *testing.T) {
	rec := newRecorder(time.Now())
	// IDs: 2 in second 0, 1 in second 2 (a call returning at 2.5s), one
	// failed call in second 1; sequence numbers apart.
	ids := logOf(rec, 0, kindNext, []uint64{id(t, testSecond, 1, 0)}, []uint64{id(t, testSecond, 1, 1)})
	ids.record(rec, rec.origin.Add(1500*time.Millisecond), 10*time.Millisecond, nil, fmt.Errorf("natsio: uid.next: %w after 3 attempt(s)", context.DeadlineExceeded))
	ids.record(rec, rec.origin.Add(2*time.Second), 500*time.Millisecond, []uint64{id(t, testSecond, 1, 2)}, nil)
	seq := seqLog(rec, 1, kindSeqBatch, "orders", seqCall{0, 10, "A", []uint64{1, 2, 3}})
	series := timeSeries([]*clientLog{ids, seq})
	want := []SecondStats{{IDs: 2, Numbers: 3, Calls: 3}, {Calls: 1, Failed: 1}, {IDs: 1, Calls: 1}}
	if len(series) != len(want) {
		t.Fatalf("series %+v, want %+v", series, want)
	}
	for i := range want {
		if series[i] != want[i] {
			t.Fatalf("second %d: %+v, want %+v", i, series[i], want[i])
		}
	}

	in := baseInput(rec, ids, seq)
	sum := &Summary{
		checkResult: check(in), Duration: 3 * time.Second, MySQL: "own mariadbd", series: series,
		Faults: map[string]int{faultKill9: 1, faultMySQLKill: 1}, MySQLDown: [2]time.Duration{400 * time.Millisecond, 400 * time.Millisecond},
		FaultLog: []faultRecord{
			{Kind: faultKill9, Target: "d0#1", Start: time.Second, End: time.Second, Note: "worker 0 → d0#2 worker 1"},
			{Kind: faultMySQLKill, Target: "mariadbd", Start: 2 * time.Second, End: 2500 * time.Millisecond, Note: "down 0.40s"},
		},
		Processes: []ProcessFigures{
			{Name: "d0#1", Lived: 40 * time.Second, Growth: map[string][2]int64{"fds": {12, 13}}},
			{Name: "d2#1", Lived: 90 * time.Second, Growth: map[string][2]int64{"fds": {13, 12}, "goroutines": {40, 38}}},
			{Name: "soak", Lived: 90 * time.Second, Growth: map[string][2]int64{"goroutines": {300, 290}}},
		},
	}
	sum.FaultWindows, _ = faultWindows(in.clients, sum.FaultLog, leaderKill)
	if tsv := sum.SeriesTSV(); !strings.HasPrefix(tsv, "second\tids\tseq_numbers\tcalls\tfailed_calls\n0\t2\t3\t3\t0\n1\t0\t0\t1\t1\n") {
		t.Errorf("series TSV:\n%s", tsv)
	}
	chart, err := sum.ChartSVG()
	if err != nil {
		t.Fatal(err)
	}
	texts := plotsvgtest.Texts(t, chart)
	for _, s := range []string{"kill9", "mysql-kill", "IDs/s", "failed calls/s", "seconds into the run", "faults injected, a row per kind"} {
		if !slices.Contains(texts, s) {
			t.Errorf("chart lacks the text %q: %q", s, texts)
		}
	}
	if slices.Contains(texts, "zombie") {
		t.Error("the strip has a row for a fault kind the run did not inject")
	}
	md := sum.Markdown("soak-long.svg")
	for _, s := range []string{
		"| duration | 3s (MySQL: own mariadbd) |",
		"| IDs checked | 3 (next 3; batch 0; prefetch 0; blocks 0) in 5 calls",
		"| sequence orders | 3 numbers (1..3) in 1 calls from 1 instances; gap ratio 0.0000",
		"| faults injected | 2: kill9 1, mysql-kill 1",
		"| mariadbd down per SIGKILL | 400ms–400ms,",
		"| failed calls | 1 of 5;",
		"| failed calls per fault kind | calls started from a fault's start to 1s after its end, failed of all: kill9 1 of 2, mysql-kill 0 of 1 |",
		"| **duplicates** | **0** IDs, **0** sequence numbers |",
		"| resources of d2#1 | lived 1m30s: fds 13 → 12, goroutines 40 → 38",
		"| resources of soak |",
		"| result | PASS |",
		"](soak-long.svg)",
	} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q:\n%s", s, md)
		}
	}
}

// A long run's chart has a point per bucket of seconds: the IDs' mean,
// the failed calls' worst second.
func TestChartBuckets(t *testing.T) {
	sum := &Summary{Duration: 1300 * time.Second}
	for i := range 1300 {
		st := SecondStats{IDs: 100}
		if i == 700 {
			st.Failed = 9 // one bad second survives the bucketing
		}
		sum.series = append(sum.series, st)
	}
	ids, failed, bucket := sum.chartLines()
	// 1300 seconds in buckets of 3: 434 points per line, the last one
	// second.
	if bucket != 3 || len(ids) != 434 || len(failed) != 434 {
		t.Fatalf("bucket %d, %d and %d points, want 3, 434 and 434", bucket, len(ids), len(failed))
	}
	if ids[0].X != 1 || ids[0].Y != 100 || ids[433].X != 1299 {
		t.Errorf("points %v … %v: want each at its bucket's middle, the IDs' mean", ids[0], ids[433])
	}
	if failed[233].Y != 9 || failed[232].Y != 0 { // second 700 is in bucket 233 (699..701)
		t.Errorf("failed %v, %v: the worst second was averaged away", failed[232], failed[233])
	}
	chart, err := sum.ChartSVG()
	if err != nil {
		t.Fatal(err)
	}
	texts := plotsvgtest.Texts(t, chart)
	for _, want := range []string{"IDs received per second (mean of each 3 s)", "failed calls per second (at their deadline) (worst second of each 3 s)", "minutes into the run"} {
		if !slices.Contains(texts, want) {
			t.Errorf("chart lacks %q: %q", want, texts)
		}
	}
}
