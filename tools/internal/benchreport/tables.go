package main

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The tables of the benchmarks run once for BENCH_DURATION: the sustained
// loads (dispenser's BenchmarkSustained and BenchmarkSeqSustained) and
// the JetStream blocks (every ^BenchmarkBlocks benchmark, whatever it
// reports).

// sustainedRow is one scenario of the sustained table.
type sustainedRow struct {
	key, label, limit string // limit: the key of the bare responder it is compared with
}

var sustainedRows = []sustainedRow{
	{"Sustained/responder=counter", "IDs: bare counter responder (the limit)", ""},
	{"Sustained/responder=dispenser/instances=1", "IDs: 1 dispenser (KV-leased lanes)", "Sustained/responder=counter"},
	{"Sustained/responder=dispenser/instances=3", "IDs: 3 dispensers, one queue group (KV)", "Sustained/responder=counter"},
	{"Sustained/responder=dispenser/instances=3/store=mysql", "IDs: 3 dispensers, MySQL-leased lanes", "Sustained/responder=counter"},
	{"SeqSustained/responder=counter", "sequence: bare counter responder (the limit)", ""},
	{"SeqSustained/responder=dispenser/store=kv", "sequence `uid.seq.bench.batch`: 1 dispenser, segments from the KV bucket", "SeqSustained/responder=counter"},
	{"SeqSustained/responder=dispenser/store=mysql", "sequence `uid.seq.bench.batch`: 1 dispenser, segments from MySQL", "SeqSustained/responder=counter"},
}

// first is the median of unit's values, or "–".
func first(s samples, unit string, format func(float64) string) string {
	st, ok := summarize(s[unit])
	if !ok {
		return "–"
	}
	return format(st.median)
}

func integer(v float64) string   { return formatRate(v) }
func mebibytes(v float64) string { return fmt.Sprintf("%.0f MiB", v) }
func micros(v float64) string    { return formatMicros(v) }
func millis(v float64) string    { return fmt.Sprintf("%.1f ms", v) }

// sustainedTable renders the sustained loads' table; "" without results.
func sustainedTable(res map[string]samples) string {
	var b strings.Builder
	for _, r := range sustainedRows {
		s, ok := res[r.key]
		if !ok {
			continue
		}
		if b.Len() == 0 {
			fmt.Fprintln(&b, "### Sustained loads (4 clients × batches of 4,096, binary; `BenchmarkSustained`, `BenchmarkSeqSustained`)")
			fmt.Fprintln(&b)
			fmt.Fprintln(&b, "One run of each scenario for BENCH_DURATION, one after the other, each on its own embedded nats-server, default dispensers (the production bounds on). `vs the limit` is IDs/s over the bare responder's of the same benchmark; `max` is the slowest request (a request that waited for a segment took at least that wait); `RSS` is the resident set of the benchmark's process (nats-server, clients and dispensers together, all in it), the largest of its samples once a second while the load ran; `step` is the size of the sequence's next segment at the end (what the adaptive step reached, default 1,000 doubling to at most 1,000,000), `waits` the requests that waited for a segment and `longest wait` the longest of them (timed by the sequence allocator; the target is no segment wait above 50 ms), `segments` the store writes.")
			fmt.Fprintln(&b)
			fmt.Fprintln(&b, "| scenario | IDs/s | vs the limit | errors | ahead-s | p99 | max | RSS | step | waits | longest wait | segments |")
			fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|")
		}
		vs := "–"
		if lim, ok := summarize(res[r.limit]["IDs/s"]); ok && lim.median > 0 {
			if v, ok := summarize(s["IDs/s"]); ok {
				vs = fmt.Sprintf("%.2f", v.median/lim.median)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.label,
			first(s, "IDs/s", formatRate), vs, first(s, "errors", integer), first(s, "ahead-s", integer),
			first(s, "p99-us", micros), first(s, "max-us", micros), first(s, "rss-MiB", mebibytes),
			first(s, "step", integer), first(s, "seg-waits", integer), first(s, "seg-wait-max-ms", millis),
			first(s, "segments", integer))
	}
	return b.String()
}

// boundOffBlocks is the prefix of natsio's BenchmarkBlocks, whose
// publishers' generators borrow seconds without bound (NoAheadBound) so
// that it times the block path alone: a burst, never what a fleet keeps
// up, so the table shows it apart, after the rows with the bounds on.
const boundOffBlocks = "Blocks/"

// blocksTable lists every blocks benchmark with what it reported: the
// ones with the production bounds on first, then the bound-off ones,
// labelled.
func blocksTable(res map[string]samples) string {
	names := slices.Sorted(maps.Keys(res))
	if len(names) == 0 {
		return ""
	}
	boundOff := func(name string) bool { return strings.HasPrefix(name, boundOffBlocks) }
	names = append(slices.DeleteFunc(slices.Clone(names), boundOff),
		slices.DeleteFunc(names, func(n string) bool { return !boundOff(n) })...)
	var b strings.Builder
	fmt.Fprintln(&b, "### JetStream blocks (every `^BenchmarkBlocks` benchmark of `./natsio/` and `./dispenser/`, for BENCH_DURATION)")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| benchmark | bounds | figures (median of the runs) |")
	fmt.Fprintln(&b, "|---|---|---|")
	for _, name := range names {
		var figs []string
		for _, unit := range slices.Sorted(maps.Keys(res[name])) {
			st, _ := summarize(res[name][unit])
			v := strconv.FormatFloat(st.median, 'g', 4, 64)
			if st.median >= 1000 {
				v = formatRate(st.median)
			}
			figs = append(figs, v+" "+unit)
		}
		bounds := "on (default dispensers)"
		switch {
		case boundOff(name):
			bounds = "**bound off** (`NoAheadBound`, static claims): the block path's speed, a burst, not what a fleet keeps up"
		case strings.Contains(name, "=bare"):
			bounds = "none: an atomic counter, the limit"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", name, bounds, strings.Join(figs, ", "))
	}
	return b.String()
}

// rssLine matches bench-service.sh's resident set lines:
// rss clients=8 rep=2 dispenser 23456 kB, rss peak dispenser 34567 kB.
var rssLine = regexp.MustCompile(`^rss (clients=\d+ rep=\d+|peak) (\S+) (\d+) kB`)

// parseRSS reads the dispenser binary's resident set from bench-service.sh's
// output, in MiB: after the runs by number of clients ("clients=8"), and
// the peak ("peak").
func parseRSS(r io.Reader) (map[string][]float64, error) {
	out := map[string][]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := rssLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		kb, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", sc.Text(), err)
		}
		key, _, _ := strings.Cut(m[1], " ")
		out[key] = append(out[key], kb/1024)
	}
	return out, sc.Err()
}

// rssText says what the dispenser binary's resident set was; "" without
// samples.
func rssText(rss map[string][]float64) string {
	var parts []string
	for _, k := range []string{"clients=1", "clients=8"} {
		if st, ok := summarize(rss[k]); ok {
			parts = append(parts, fmt.Sprintf("%.1f MiB after the %s runs (median of %d)", st.median, strings.TrimPrefix(k, "clients=")+"-client", st.n))
		}
	}
	if peaks := rss["peak"]; len(peaks) > 0 {
		parts = append(parts, fmt.Sprintf("peak (VmHWM) %.1f MiB, the largest of %d runs", slices.Max(peaks), len(peaks)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "Memory: the dispenser binary under the nats CLI loads (`scripts/bench-service.sh`, VmRSS from /proc): " + strings.Join(parts, ", ") + ".\n"
}

// tracingText is the summary of scripts/bench-tracing.sh's output
// (tracing as deployed: the dispenser binaries, the nats CLI and the
// receiver, each a process of its own), or "" without its medians.
func tracingText(out string) string {
	var header, load, spans string
	ratios := map[string]string{}
	var cpu []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "tracing as deployed: "):
			header = strings.TrimPrefix(line, "tracing as deployed: ")
		case strings.HasPrefix(line, "load at the "):
			if i := strings.Index(line, "load average: "); i >= 0 {
				load += fmt.Sprintf("; at the %s %s", strings.TrimSuffix(f[3], ":"), strings.TrimPrefix(line[i:], "load average: "))
			}
		case len(f) >= 3 && f[0] == "cpu-us/req":
			cpu = append(cpu, fmt.Sprintf("%s %s µs", f[1], f[2]))
		case len(f) >= 3 && f[0] == "median":
			ratios[f[1]] = strings.Join(f[2:], " ")
		case strings.HasPrefix(line, "spans of "):
			spans = line
		}
	}
	if ratios["always"] == "" || ratios["default"] == "" {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Tracing as deployed (`scripts/bench-tracing.sh`: the dispenser binary untraced, with the default sampler and with `always_on`, OTLP/HTTP to `bench/otlpsink`, `nats bench service request --clients 8` on each, every one a process of its own; the median of the rounds' own ratios, the order reversed every other round): %s.\n\n", header)
	fmt.Fprintf(&b, "- `always_on` / untraced: %s (target ≥ 0.90)\n", ratios["always"])
	fmt.Fprintf(&b, "- default sampler / untraced: %s (target ≥ 0.97)\n", ratios["default"])
	if len(cpu) > 0 {
		fmt.Fprintf(&b, "- the loaded dispenser's CPU a request (all runs): %s\n", strings.Join(cpu, ", "))
	}
	if spans != "" {
		fmt.Fprintf(&b, "- %s\n", spans)
	}
	if load != "" {
		fmt.Fprintf(&b, "- the machine's load average%s\n", strings.TrimPrefix(load, ";"))
	}
	return b.String()
}
