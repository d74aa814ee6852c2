package soak

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sample is one measurement of a process's resources.
type sample struct {
	at         time.Duration // since the process started
	fds        int           // open file descriptors (-1: unknown)
	rssKiB     int64         // resident memory (-1: unknown)
	goroutines int           // (-1: unknown)
}

// procFDs counts the open file descriptors of pid.
func procFDs(pid int) int {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil || len(entries) == 0 { // none: the process is exiting
		return -1
	}
	return len(entries)
}

// procRSS reads the resident set size of pid in KiB.
func procRSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				if n, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

var metricsClient = &http.Client{Timeout: time.Second}

// scrapeMetrics reads a dispenser's /metrics (zero value with -1s when
// it does not answer).
func scrapeMetrics(ctx context.Context, addr string) dispenserMetrics {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return dispenserMetrics{goroutines: -1, slowRequests: -1}
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return dispenserMetrics{goroutines: -1, slowRequests: -1}
	}
	defer resp.Body.Close()
	return metricsFrom(resp.Body)
}

// dispenserMetrics is what the soak reads of a dispenser's /metrics.
type dispenserMetrics struct {
	goroutines int // go_goroutines (-1: not found)
	// slowRequests counts the requests whose handling (from the handler's
	// start, so without the time a request waited for it) took longer than
	// slowHandling, every endpoint and outcome (-1: no request histogram):
	// past the Go client's attempt timeout, the client has given up on the
	// answer. Cumulative over the process.
	slowRequests int64
}

// slowHandling is the Go client's default attempt timeout, a bucket bound
// of uid.request.duration.
const slowHandling = `le="1"`

const requestDuration = "uid_request_duration_seconds"

// goroutinesFromMetrics finds the go_goroutines gauge in Prometheus text.
func goroutinesFromMetrics(r io.Reader) int { return metricsFrom(r).goroutines }

// metricsFrom reads go_goroutines and, from the request duration
// histogram, the requests slower than slowHandling (its count less its
// bucket at that bound, summed over the series).
func metricsFrom(r io.Reader) dispenserMetrics {
	m := dispenserMetrics{goroutines: -1, slowRequests: -1}
	var count, fast int64
	seen := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if rest, ok := bytes.CutPrefix(line, []byte("go_goroutines ")); ok {
			if f, err := strconv.ParseFloat(string(bytes.TrimSpace(rest)), 64); err == nil {
				m.goroutines = int(f)
			}
			continue
		}
		isCount := bytes.HasPrefix(line, []byte(requestDuration+"_count{"))
		isFast := bytes.HasPrefix(line, []byte(requestDuration+"_bucket{")) && bytes.Contains(line, []byte(slowHandling+"}"))
		if !isCount && !isFast {
			continue
		}
		i := bytes.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		f, err := strconv.ParseFloat(string(line[i+1:]), 64)
		if err != nil {
			continue
		}
		seen = true
		if isCount {
			count += int64(f)
		} else {
			fast += int64(f)
		}
	}
	if seen {
		m.slowRequests = count - fast
	}
	return m
}

// selfSample measures the soak's own process (its RSS grows with the IDs
// it records, so only goroutines and descriptors are judged).
func selfSample(start time.Time) sample {
	return sample{at: time.Since(start), fds: procFDs(os.Getpid()), rssKiB: -1, goroutines: runtime.NumGoroutine()}
}

// growthLimit bounds how much a resource may grow over a process's life.
type growthLimit struct {
	name   string
	get    func(sample) int64
	factor float64 // end may be at most factor × early ...
	slack  int64   // ... + slack
}

var growthLimits = []growthLimit{
	{name: "goroutines", get: func(s sample) int64 { return int64(s.goroutines) }, factor: 1.5, slack: 40},
	{name: "fds", get: func(s sample) int64 { return int64(s.fds) }, factor: 1.5, slack: 16},
	{name: "rss_kib", get: func(s sample) int64 { return s.rssKiB }, factor: 1.5, slack: 64 << 10},
}

// growthPolicy says which part of a process's life is its early and its
// late part.
type growthPolicy struct {
	warmUp   time.Duration // samples before are ignored (start-up, first padding)
	minLife  time.Duration // shorter lives are not judged
	early    time.Duration // the early window after the warm-up
	lateKeep int           // the last samples that form the late part
}

var defaultGrowthPolicy = growthPolicy{warmUp: 5 * time.Second, minLife: 30 * time.Second, early: 10 * time.Second, lateKeep: 5}

// growth compares the late part of a process's samples with its early
// part for each limit. A resource grows without bound when even the
// lowest late sample exceeds factor × the highest early sample + slack.
// It returns one description per violated limit, and the resources'
// early→late figures for the summary.
func (g growthPolicy) growth(samples []sample, lived time.Duration, limits []growthLimit) (violations []string, figures map[string][2]int64) {
	if lived < g.minLife {
		return nil, nil
	}
	earlyEnd := g.warmUp + max(g.early, (lived-g.warmUp)/5)
	figures = map[string][2]int64{}
	for _, lim := range limits {
		var early, late []int64
		for _, s := range samples {
			v := lim.get(s)
			if v < 0 || s.at < g.warmUp {
				continue
			}
			if s.at <= earlyEnd {
				early = append(early, v)
			} else {
				late = append(late, v)
			}
		}
		if len(early) == 0 || len(late) == 0 {
			continue
		}
		late = late[max(0, len(late)-g.lateKeep):]
		e, l := slices.Max(early), slices.Min(late)
		figures[lim.name] = [2]int64{e, l}
		if float64(l) > lim.factor*float64(e)+float64(lim.slack) {
			violations = append(violations, fmt.Sprintf("%s grew from %d to %d (limit %.1f× + %d)", lim.name, e, l, lim.factor, lim.slack))
		}
	}
	return violations, figures
}
