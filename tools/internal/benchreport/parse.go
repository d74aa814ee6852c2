package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// samples holds the values measured for one benchmark, by unit ("ns/op",
// "IDs/s", "p50-us", "req/s", ...), one value per run.
type samples map[string][]float64

// goBenchLine matches a result line of `go test -bench`:
// BenchmarkName/sub-2   1234   5678 ns/op   9.1 IDs/s ...
var goBenchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.+)$`)

// parseGoBench reads `go test -bench` output (several runs may be
// concatenated) into samples by benchmark name, without the Benchmark
// prefix and the -GOMAXPROCS suffix.
func parseGoBench(r io.Reader) (map[string]samples, error) {
	out := map[string]samples{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := goBenchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		name := strings.TrimPrefix(m[1], "Benchmark")
		fields := strings.Fields(m[2])
		if len(fields)%2 != 0 {
			return nil, fmt.Errorf("benchmark line %q: values and units do not pair up", sc.Text())
		}
		s := out[name]
		if s == nil {
			s = samples{}
			out[name] = s
		}
		for i := 0; i < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark line %q: %q is not a number", sc.Text(), fields[i])
			}
			s[fields[i+1]] = append(s[fields[i+1]], v)
		}
	}
	return out, sc.Err()
}

// cliLine matches a result line of scripts/bench-service.sh:
// clients=8 rep=2 uid.next   20,549 p50=289.1us p99=1,234.5us
var cliLine = regexp.MustCompile(`^clients=(\d+) rep=\d+ (\S+)\s+([\d,]+) p50=(\S+) p99=(\S+)`)

// parseCLI reads the output of scripts/bench-service.sh into samples
// keyed "<subject>/clients=<n>" with the units req/s, p50-us and p99-us.
func parseCLI(r io.Reader) (map[string]samples, error) {
	out := map[string]samples{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := cliLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		rate, err := strconv.ParseFloat(strings.ReplaceAll(m[3], ",", ""), 64)
		if err != nil {
			return nil, fmt.Errorf("line %q: rate: %w", sc.Text(), err)
		}
		p50, err := parseLatency(m[4])
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", sc.Text(), err)
		}
		p99, err := parseLatency(m[5])
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", sc.Text(), err)
		}
		key := m[2] + "/clients=" + m[1]
		s := out[key]
		if s == nil {
			s = samples{}
			out[key] = s
		}
		s["req/s"] = append(s["req/s"], rate)
		s["p50-us"] = append(s["p50-us"], p50.Seconds()*1e6)
		s["p99-us"] = append(s["p99-us"], p99.Seconds()*1e6)
	}
	return out, sc.Err()
}

// parseLatency reads the nats CLI's latencies: "253.4us", "1,234.56us",
// "1.8ms", "2s".
func parseLatency(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.ReplaceAll(s, ",", ""))
	if err != nil {
		return 0, fmt.Errorf("latency %q: %w", s, err)
	}
	return d, nil
}

// stat is the median of some runs and how far the farthest run lies
// from it, relative to it.
type stat struct {
	median, spread float64
	n              int
}

func summarize(vs []float64) (stat, bool) {
	if len(vs) == 0 {
		return stat{}, false
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	var far float64
	for _, v := range s {
		far = max(far, abs(v-med))
	}
	spread := 0.0
	if med != 0 {
		spread = far / med
	}
	return stat{median: med, spread: spread, n: len(s)}, true
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
