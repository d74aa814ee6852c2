package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/plotsvg/plotsvgtest"
)

const goOutput = `goos: linux
pkg: github.com/uid-dispenser/uid-dispenser/natsio
BenchmarkQueueGroup/dispensers=1-2         	   31029	     56643 ns/op	     17654 IDs/s	       146.2 p50-us	      5195 p99-us
BenchmarkQueueGroup/dispensers=2-2         	   31029	     60000 ns/op	     16000 IDs/s	       150 p50-us	      5000 p99-us
BenchmarkBatchBinary/ids=1-2               	   12609	     83763 ns/op	     11937 IDs/s	        29.53 p50-us	       199.2 p99-us
BenchmarkBatchBinary/ids=16384-2           	    2000	    500000 ns/op	  32000000 IDs/s	       400 p50-us	       900 p99-us
PASS
BenchmarkQueueGroup/dispensers=1-2         	   31029	     50000 ns/op	     20000 IDs/s	       140 p50-us	      5000 p99-us
BenchmarkQueueGroup/dispensers=1-2         	   31029	     60000 ns/op	     16000 IDs/s	       150 p50-us	      6000 p99-us
BenchmarkPrefetcher/batch=8192-2           	15000000	        72.5 ns/op	  13800000 IDs/s
ok  	github.com/uid-dispenser/uid-dispenser/natsio	7.787s
BenchmarkNextVsEcho/clients=8/target=echo-2         	   30000	    50000 ns/op	       250 p50-us	     900 p99-us	      20000 req/s
BenchmarkNextVsEcho/clients=8/target=uid.next-2     	   30000	    52000 ns/op	       260 p50-us	     950 p99-us	      19000 req/s
BenchmarkTracing/endpoint=next/tracing=off-2         	   20000	    50000 ns/op	     80000 cpu-ns/op	       300 p50-us	     900 p99-us	      20000 req/s
BenchmarkTracing/endpoint=next/tracing=always_on-http-2	   20000	    55000 ns/op	     90000 cpu-ns/op	       320 p50-us	     900 p99-us	      18400 req/s
`

const sustainedOutput = `BenchmarkSustained/responder=counter-2  	 100000	     75000 ns/op	  50000000 IDs/s	         0 errors	      3200 p99-us	      9000 max-us	       120 rss-MiB
BenchmarkSeqSustained/responder=counter-2  	 100000	     75000 ns/op	  40000000 IDs/s	         0 errors	      3200 p99-us	      9000 max-us	       110 rss-MiB
BenchmarkSeqSustained/responder=dispenser/store=kv-2  	 100000	     75000 ns/op	  36000000 IDs/s	         0 errors	      3300 p99-us	     41000 max-us	       130 rss-MiB	   1000000 step	 3 seg-waits	 12.5 seg-wait-max-ms	 50 segments
`

const blocksOutput = `BenchmarkBlocksSustained/consumers=4-2  	 1000	     75 ns/op	  12000000 IDs/s	         0.004 discarded
`

const cliOutput = `nats-server 2.15.2, v0.5.0, 2 cores
clients=1 rep=1 uid.next   7,603 p50=75.3us p99=1,234.5us
clients=1 rep=1 bench.echo 7,512 p50=65us p99=1.2ms
clients=8 rep=1 uid.next   20,549 p50=289.1us p99=2,260.96us
clients=8 rep=1 bench.echo 21,634 p50=247us p99=1.9ms

rss clients=8 rep=1 dispenser 30720 kB
rss peak dispenser 40960 kB
median clients=1 uid.next   7603 req/s
`

func TestParseGoBench(t *testing.T) {
	res, err := parseGoBench(strings.NewReader(goOutput))
	if err != nil {
		t.Fatal(err)
	}
	q := res["QueueGroup/dispensers=1"]
	if len(q["IDs/s"]) != 3 || len(q["ns/op"]) != 3 || len(q["p50-us"]) != 3 {
		t.Fatalf("QueueGroup/dispensers=1: %v", q)
	}
	s, _ := summarize(q["IDs/s"])
	if s.median != 17654 || math.Abs(s.spread-(20000-17654)/17654.0) > 1e-9 || s.n != 3 {
		t.Fatalf("summary %+v", s)
	}
	if got := res["Prefetcher/batch=8192"]["ns/op"]; len(got) != 1 || got[0] != 72.5 {
		t.Fatalf("prefetcher ns/op %v", got)
	}
	if _, err := parseGoBench(strings.NewReader("BenchmarkX-2 10 5 ns/op 7\n")); err == nil {
		t.Fatal("an unpaired value was accepted")
	}
}

func TestParseCLI(t *testing.T) {
	res, err := parseCLI(strings.NewReader(cliOutput))
	if err != nil {
		t.Fatal(err)
	}
	next := res["uid.next/clients=1"]
	if next["req/s"][0] != 7603 || next["p50-us"][0] != 75.3 || math.Abs(next["p99-us"][0]-1234.5) > 1e-6 {
		t.Fatalf("uid.next/clients=1: %v", next)
	}
	if got := res["bench.echo/clients=1"]["p99-us"][0]; got != 1200 {
		t.Fatalf("echo p99 %v µs, want 1200", got)
	}
	if len(res) != 4 {
		t.Fatalf("%d targets: %v", len(res), res)
	}
}

func TestSummarizeEvenCount(t *testing.T) {
	s, ok := summarize([]float64{4, 1, 3, 2})
	if !ok || s.median != 2.5 || s.spread != 1.5/2.5 {
		t.Fatalf("%+v %v", s, ok)
	}
	if _, ok := summarize(nil); ok {
		t.Fatal("a summary of nothing")
	}
}

// Run i of two scenarios ran side by side: the ratio is the median of the
// runs' ratios, which a drift between runs does not move, not the ratio
// of the medians.
func TestPairedRatioCancelsADrift(t *testing.T) {
	a, b := []float64{90, 200, 300}, []float64{100, 210, 330}
	got, ok := pairedRatio(a, b)
	if want := 300.0 / 330; !ok || math.Abs(got-want) > 1e-9 {
		t.Errorf("pairedRatio = %v, %v; want %v (the ratio of the medians would be %v)", got, ok, want, 200.0/210)
	}
	if _, ok := pairedRatio(a, b[:2]); ok {
		t.Error("pairedRatio of runs of different counts: want not ok")
	}
	if _, ok := pairedRatio(a, []float64{1, 0, 1}); ok {
		t.Error("pairedRatio with a zero run: want not ok")
	}
}

func TestReplaceSectionKeepsTheRest(t *testing.T) {
	doc := "# Benchmarks\n\n## Worker IDs\n\ntable\n"
	first, err := replaceSection(doc, beginMarker+"\nold\n"+endMarker+"\n")
	if err != nil || !strings.HasPrefix(first, doc) || !strings.Contains(first, "old") {
		t.Fatalf("append: %q, %v", first, err)
	}
	withAfter := first + "\n## Later section\n\nkept\n"
	second, err := replaceSection(withAfter, beginMarker+"\nnew\n"+endMarker+"\n")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(second, "old") || !strings.Contains(second, "new") || !strings.HasPrefix(second, doc) || !strings.HasSuffix(second, "\n## Later section\n\nkept\n") {
		t.Fatalf("replace:\n%s", second)
	}
	again, _ := replaceSection(second, beginMarker+"\nnew\n"+endMarker+"\n")
	if again != second {
		t.Fatalf("not idempotent:\n%s\n---\n%s", second, again)
	}
	if _, err := replaceSection(endMarker+"\n"+beginMarker, "x"); err == nil {
		t.Fatal("broken markers accepted")
	}
}

// TestRunWritesTheReport runs the command on sample output: the Markdown
// keeps what was there, names each measured scenario with its command and
// lists the missing ones; the chart is well-formed SVG with a bar per
// scenario.
func TestRunWritesTheReport(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	goFile, cliFile := write("go.txt", goOutput), write("cli.txt", cliOutput)
	sustainedFile, blocksFile := write("sustained.txt", sustainedOutput), write("blocks.txt", blocksOutput)
	env := write("env.txt", "machine: 2 cores\n\nrun: today\n")
	md := write("BENCHMARKS.md", "# Benchmarks\n\n## Service\n\nhand-written\n")
	svg := filepath.Join(dir, "docs", "benchmarks.svg")
	if err := run([]string{"-go", goFile, "-cli", cliFile, "-sustained", sustainedFile, "-blocks", blocksFile, "-env", env, "-md", md, "-svg", svg}); err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(md)
	text := string(out)
	for _, want := range []string{
		"# Benchmarks\n\n## Service\n\nhand-written\n",
		"- machine: 2 cores\n- run: today\n",
		"![IDs per second and latency of each scenario](docs/benchmarks.svg)",
		"| `uid.next`, 8 clients | 20,549 ±0% | 289 µs ±0% | 2.26 ms ±0% | – | `scripts/bench-service.sh 6`: `nats bench service request uid.next --clients 8 --msgs 100000 --size 16B` |",
		"| `uid.batch` of 16384, binary, 1 client, one request at a time | 32.0M ±0% |",
		"`go test -run '^$' -bench '^BenchmarkQueueGroup$/^dispensers=2$' -count 3 ./natsio/`",
		"`uid.next` / echo service, nats CLI, 8 clients: 0.95× by requests/s, 0.85× by p50 (echo's p50 / uid.next's) (target ≥ 0.95)",
		"`uid.next` / micro echo, Go, 8 clients: 0.95× by requests/s, 0.96× by p50 (target ≥ 0.95)",
		"| micro echo service; requests/s, 8 clients | 20,000 ±0% requests/s | 250 µs ±0% | 900 µs ±0% | – |",
		"tracing `uid.next`, always_on-http / untraced, 8 clients: 0.92× (target ≥ 0.90 on uid.next)",
		"queue group, 2 dispensers / 1: 0.91×",
		"| sequence `uid.seq.bench.batch`: 1 dispenser, segments from the KV bucket | 36.0M | 0.90 | 0 | – | 3.3 ms | 41 ms | 130 MiB | 1.0M | 3 | 12.5 ms | 50 |",
		"| `BlocksSustained/consumers=4` | on (default dispensers) | 12.0M IDs/s, 0.004 discarded, 75 ns/op |",
		"30.0 MiB after the 8-client runs (median of 1), peak (VmHWM) 40.0 MiB, the largest of 1 runs.",
		"Not measured in this run: NextVsEcho/clients=1/target=echo,",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q:\n%s", want, text)
		}
	}

	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	texts := plotsvgtest.Texts(t, b)
	// A row label and a rate label per measured scenario (9), the
	// legend, the axes.
	for _, want := range []string{"uid.next, 8 clients, 2 dispensers", "32.0M", "nats CLI, one dispenser", "Go, bound off (bursts)", "echo service", "per second, log scale", "10M"} {
		if !slices.Contains(texts, want) {
			t.Errorf("the chart lacks %q: %q", want, texts)
		}
	}
}

func TestSeriesChart(t *testing.T) {
	in := "BenchmarkSustained/responder=counter-2\t1\t20000000\t-99\n" +
		"BenchmarkSustained/responder=dispenser/instances=1-2\t1\t18000000\t1\n" +
		"BenchmarkSustained/responder=dispenser/instances=1-2\t2\t19000000\t2\n"
	s, err := parseSeries(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 2 || len(s["responder=dispenser/instances=1-2"]) != 2 || s["responder=counter-2"][0].rate != 2e7 {
		t.Fatalf("parsed %+v", s)
	}
	chart, err := svgSeries(s, "title")
	if err != nil {
		t.Fatal(err)
	}
	// Plain names in the legend, the bound, the axes labelled.
	texts := plotsvgtest.Texts(t, chart)
	for _, want := range []string{"bare responder (the limit)", "1 dispenser, KV", "bound: 2 s ahead", "IDs/s", "seconds ahead", "seconds into the scenario"} {
		if !slices.Contains(texts, want) {
			t.Errorf("the chart lacks %q: %q", want, texts)
		}
	}
	if _, err := parseSeries("x\t1\tnot-a-number\t0"); err == nil {
		t.Error("a malformed line was accepted")
	}
}

func TestSeriesName(t *testing.T) {
	for in, want := range map[string]string{
		"responder=counter-2":                           "bare responder (the limit)",
		"responder=dispenser/instances=1-2":             "1 dispenser, KV",
		"responder=dispenser/instances=3":               "3 dispensers, KV",
		"responder=dispenser/instances=3/store=mysql-8": "3 dispensers, MySQL",
		"responder=dispenser/instances=x":               "responder=dispenser/instances=x",
		"responder=dispenser/instances=2/store=pg":      "responder=dispenser/instances=2/store=pg",
		"responder=dispenser/store=kv-2":                "1 dispenser, KV",
		"responder=dispenser/store=mysql":               "1 dispenser, MySQL",
		"other-2":                                       "other-2",
	} {
		if got := seriesName(in); got != want {
			t.Errorf("seriesName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestBlocksTableLabelsTheBoundOffBenchmark: natsio's BenchmarkBlocks
// runs its generators without the ahead bound, so its row must come after
// the bounds-on rows and say so.
func TestBlocksTableLabelsTheBoundOffBenchmark(t *testing.T) {
	res := map[string]samples{
		"Blocks/consumers=4":                    {"IDs/s": {29.4e6}},
		"BlocksSustained/publisher=bare":        {"IDs/s": {27.4e6}},
		"BlocksSustained/publisher=dispensers/": {"IDs/s": {31.1e6}},
	}
	rows := strings.Split(strings.TrimSpace(blocksTable(res)), "\n")
	var order []string
	for _, row := range rows {
		if !strings.HasPrefix(row, "| `") {
			continue
		}
		name := strings.SplitN(row, "`", 3)[1]
		order = append(order, name)
		if off := strings.Contains(row, "bound off"); off != strings.HasPrefix(name, "Blocks/") {
			t.Errorf("row %q: labelled bound off %v", row, off)
		}
		if limit := strings.Contains(row, "the limit"); limit != strings.Contains(name, "=bare") {
			t.Errorf("row %q: labelled the limit %v", row, limit)
		}
	}
	want := []string{"BlocksSustained/publisher=bare", "BlocksSustained/publisher=dispensers/", "Blocks/consumers=4"}
	if !slices.Equal(order, want) {
		t.Fatalf("rows in order %v, want %v", order, want)
	}
}

func TestTracingText(t *testing.T) {
	out := `tracing as deployed: 9 rounds of 60000 requests, 8 clients, 2 cores, v0.5.0
load at the start:  07:25:50 up  3:07,  0 user,  load average: 15.18, 9.38, 5.43
round=1 mode=off     req/s=22244 cpu-us/req=10.2 nats-server=22.7 nats-cli=14.7
load at the end:  07:27:00 up  3:08,  0 user,  load average: 17.51, 11.40, 6.49

median default 0.929 x untraced (rounds 0.78-1.22, n=9)
median always  0.779 x untraced (rounds 0.69-1.13, n=9)
cpu-us/req off     10.20 (all runs; with the nats-server and the nats CLI 48.1)
cpu-us/req always  14.80 (all runs; with the nats-server and the nats CLI 52.9)
spans of always_on's uid.next requests: 560001 of 560001 sent; the default sampler's: 5504 (of as many)
`
	got := tracingText(out)
	for _, want := range []string{
		"9 rounds of 60000 requests",
		"`always_on` / untraced: 0.779 x untraced (rounds 0.69-1.13, n=9) (target ≥ 0.90)",
		"default sampler / untraced: 0.929 x untraced (rounds 0.78-1.22, n=9) (target ≥ 0.97)",
		"off 10.20 µs, always 14.80 µs",
		"560001 of 560001 sent",
		"load average at the start 15.18, 9.38, 5.43; at the end 17.51, 11.40, 6.49",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	// A run that failed before its medians gives no summary.
	if got := tracingText("tracing as deployed: 9 rounds\n"); got != "" {
		t.Errorf("summary of a run without medians: %q", got)
	}
}
