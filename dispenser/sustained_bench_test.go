package dispenser

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// sustainedBatch is what each client asks for: the bulk case of the
// capacity issue (4 clients × uid.batch 4096, binary).
const sustainedBatch = 4096

// BenchmarkSustained is what a bulk user gets for as long as the load
// lasts: 4 clients (each its own connection, one request at a time) ask
// for binary batches of 4,096 IDs, against
//   - responder=counter: a bare responder filling the replies from an
//     atomic counter, the transport's limit;
//   - responder=dispenser: dispenser instances with the default
//     configuration (lanes, the 2 s ahead bound, worker IDs leased in the
//     KV bucket, or in MySQL with store=mysql), in one queue group.
//
// One op is one request. IDs/s is the figure; errors counts error replies
// (the Go client would retry them; here each one counts); ahead-s is the
// furthest the second of the last ID of a reply ran ahead of the wall
// clock when it arrived, read from the IDs themselves. Run it for
// seconds, side by side:
//
//	go test -run '^$' -bench Sustained -benchtime 10s -count 5 ./dispenser/ | tee sustained.txt
//	benchstat -col /responder sustained.txt
func BenchmarkSustained(b *testing.B) {
	b.Run("responder=counter", func(b *testing.B) {
		url := testenv.NATS(b, nil).ClientURL()
		startCounterResponder(b, url)
		runSustained(b, url, protocol.Subject("bare", protocol.EndpointBatch), nil)
	})
	for _, c := range []struct {
		instances int
		mysql     bool
	}{{1, false}, {3, false}, {3, true}} {
		name := fmt.Sprintf("responder=dispenser/instances=%d", c.instances)
		if c.mysql {
			name += "/store=mysql"
		}
		b.Run(name, func(b *testing.B) {
			cfg := benchConfig(b, c.mysql)
			url := cfg.NATSURL
			for range c.instances {
				d, err := Start(b.Context(), cfg, WithLogger(testLogger()))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { shutdownBench(b, d) })
			}
			layout := cfg.Layout()
			runSustained(b, url, protocol.Subject(cfg.SubjectPrefix, protocol.EndpointBatch), &layout)
		})
	}
}

// sustainedSequence is the sequence BenchmarkSeqSustained asks for.
const sustainedSequence = "bench"

// BenchmarkSeqSustained is BenchmarkSustained for a named sequence: 4
// clients asking uid.seq.bench.batch for 4,096 numbers (binary), against
//   - responder=counter: the bare responder of BenchmarkSustained (the
//     transport's limit);
//   - responder=dispenser/store=kv, store=mysql: one default dispenser
//     whose sequence's segments come from the KV bucket or from MySQL,
//     with the default adaptive step (1,000 doubling to 1,000,000 while
//     segments last less than the 1 s target).
//
// Besides BenchmarkSustained's figures it reports max-us, the slowest
// request, seg-waits, the requests that waited for a segment, and how
// long they waited (seg-wait-max-ms, seg-wait-mean-ms, timed by the
// allocator: the target is on these, and the slowest request may be a
// pause of the process's instead), segments, the store writes, and
// step, the size of the next segment at the end: what the adaptive step
// reached.
func BenchmarkSeqSustained(b *testing.B) {
	b.Run("responder=counter", func(b *testing.B) {
		url := testenv.NATS(b, nil).ClientURL()
		startCounterResponder(b, url)
		runSustained(b, url, protocol.Subject("bare", protocol.EndpointBatch), nil)
	})
	for _, store := range []string{"kv", "mysql"} {
		b.Run("responder=dispenser/store="+store, func(b *testing.B) {
			cfg := benchConfig(b, store == "mysql")
			url := cfg.NATSURL
			cfg.Sequences = sustainedSequence
			d, err := Start(b.Context(), cfg, WithLogger(testLogger()))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { shutdownBench(b, d) })
			runSustained(b, url, protocol.SeqSubject(cfg.SubjectPrefix, sustainedSequence, protocol.EndpointBatch), nil)
			for _, st := range d.Sequences().Stats() {
				if st.Name == sustainedSequence {
					b.ReportMetric(float64(st.Waits), "seg-waits")
					b.ReportMetric(float64(st.LongestWait)/float64(time.Millisecond), "seg-wait-max-ms")
					if st.Waits > 0 {
						b.ReportMetric(float64(st.WaitTime)/float64(st.Waits)/float64(time.Millisecond), "seg-wait-mean-ms")
					}
					b.ReportMetric(float64(st.Segments), "segments")
					b.ReportMetric(float64(st.Step), "step")
				}
			}
		})
	}
}

func shutdownBench(b *testing.B, d *Dispenser) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		b.Error(err)
	}
}

// runSustained drives the load against subject (a batch endpoint) and
// reports; with a layout it also reads how far ahead of the clock the IDs
// run. rss-MiB is the largest resident set of this process (sampled once
// a second) while the load ran: the nats-server, the clients and the
// responders together, all in this process.
func runSustained(b *testing.B, url, subject string, layout *uidcore.Layout) {
	const clients = 4
	conns := make([]*nats.Conn, clients)
	for i := range conns {
		conns[i] = testConn(b, url).Conn
	}
	var (
		next    atomic.Int64
		errs    atomic.Int64
		ahead   atomic.Int64
		mu      sync.Mutex
		lat     []time.Duration
		lastErr atomic.Pointer[string]
	)
	ahead.Store(-1 << 62)
	var received, aheadNow atomic.Int64 // IDs and this second's furthest ahead, for the series
	aheadNow.Store(-1 << 62)
	stopSeries := recordSeries(b, os.Getenv("UID_BENCH_SERIES"), &received, func() int64 { return max(aheadNow.Swap(-1<<62), -99) })
	stopRSS := sampleRSS(b)
	b.SetParallelism(clients / 2) // × GOMAXPROCS (2 here) goroutines
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		nc := conns[int(next.Add(1)-1)%clients]
		msg := &nats.Msg{Subject: subject, Data: []byte(strconv.Itoa(sustainedBatch)),
			Header: nats.Header{protocol.EncodingHeader: {protocol.EncodingBinary}}}
		var mine []time.Duration
		for pb.Next() {
			t0 := time.Now()
			reply, err := nc.RequestMsg(msg, 5*time.Second)
			if err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0))
			if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
				errs.Add(1)
				desc := code + " " + reply.Header.Get(micro.ErrorHeader)
				lastErr.Store(&desc)
				continue
			}
			if len(reply.Data) != 8*sustainedBatch {
				b.Errorf("reply of %d bytes", len(reply.Data))
				return
			}
			received.Add(sustainedBatch)
			if layout == nil {
				continue
			}
			p, perr := layout.Parse(binary.BigEndian.Uint64(reply.Data[len(reply.Data)-8:]))
			if perr != nil {
				b.Error(perr)
				return
			}
			d := p.Time.Unix() - time.Now().Unix()
			raise(&ahead, d)
			raise(&aheadNow, d)
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	stopSeries()
	b.ReportMetric(stopRSS()/(1<<20), "rss-MiB")
	b.ReportMetric(float64(int64(b.N)-errs.Load())*sustainedBatch/elapsed.Seconds(), "IDs/s")
	b.ReportMetric(float64(errs.Load()), "errors")
	if ahead.Load() > -1<<62 {
		b.ReportMetric(float64(ahead.Load()), "ahead-s")
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-us")
	}
	if p := lastErr.Load(); p != nil {
		b.Logf("%d error replies, the last: %s", errs.Load(), *p)
	}
}

// benchConfig is a default dispenser's configuration on an embedded
// nats-server of the benchmark's own, its worker IDs (and sequences)
// leased in the server's KV bucket or, onMySQL, in a fresh MySQL
// database.
func benchConfig(b *testing.B, onMySQL bool) Config {
	cfg := DefaultConfig()
	cfg.NATSURL = testenv.NATS(b, nil).ClientURL()
	if onMySQL {
		cfg.MySQLDSN = testenv.MySQL(b)
	}
	return cfg
}

// raise sets v to d if d is greater.
func raise(v *atomic.Int64, d int64) {
	for {
		cur := v.Load()
		if d <= cur || v.CompareAndSwap(cur, d) {
			return
		}
	}
}

// sampleRSS samples the process's resident set (VmRSS) once a second
// until the returned function is called, which returns the largest
// sample in bytes (and at least one sample, taken then).
func sampleRSS(b *testing.B) (stop func() float64) {
	var peak atomic.Int64
	sample := func() {
		if v := readRSS(b); v > peak.Load() {
			peak.Store(v)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				sample()
			}
		}
	})
	return func() float64 {
		close(done)
		wg.Wait()
		sample()
		return float64(peak.Load())
	}
}

// readRSS is VmRSS of /proc/self/status, in bytes.
func readRSS(b *testing.B) int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// series holds, per file and benchmark, the per-second samples of the
// benchmark's longest run.
var series struct {
	sync.Mutex
	lines map[string]map[string][]string
}

// recordSeries samples once a second, while the benchmark runs, the IDs
// received in that second and a second figure, sample(), when path names
// a file: tab-separated lines of benchmark, second, IDs/s and the figure.
// BenchmarkSustained writes how far ahead of the clock the newest IDs
// ran into UID_BENCH_SERIES, which `benchreport -series` draws
// (docs/sustained.svg). It returns the function that stops it and writes
// the file.
func recordSeries(b *testing.B, path string, received *atomic.Int64, sample func() int64) (stop func()) {
	if path == "" {
		return func() {}
	}
	done := make(chan struct{})
	var lines []string
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var last int64
		for sec := 1; ; sec++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			now := received.Load()
			lines = append(lines, fmt.Sprintf("%s\t%d\t%d\t%d", b.Name(), sec, now-last, sample()))
			last = now
		}
	})
	return func() {
		close(done)
		wg.Wait()
		series.Lock()
		defer series.Unlock()
		if series.lines == nil {
			series.lines = map[string]map[string][]string{}
		}
		file := series.lines[path]
		if file == nil {
			file = map[string][]string{}
			series.lines[path] = file
		}
		if len(lines) < len(file[b.Name()]) {
			return
		}
		file[b.Name()] = lines
		var all []string
		for _, name := range slices.Sorted(maps.Keys(file)) {
			all = append(all, file[name]...)
		}
		if err := os.WriteFile(path, []byte(strings.Join(all, "\n")+"\n"), 0o644); err != nil {
			b.Error(err)
		}
	}
}

// startCounterResponder answers prefix "bare" batches from an atomic
// counter: what a reply of 4,096 binary IDs costs without a generator.
func startCounterResponder(b *testing.B, url string) {
	nc := testConn(b, url).Conn
	var counter atomic.Uint64
	// One reply buffer, reused: the handler runs on one goroutine and
	// Respond copies the body, so the limit pays for no allocation.
	var buf []byte
	sub, err := nc.QueueSubscribe(protocol.Subject("bare", protocol.EndpointBatch), "bare", func(m *nats.Msg) {
		n, err := strconv.Atoi(string(m.Data))
		if err != nil || n < 1 || n > 1<<20 {
			_ = m.Respond(nil)
			return
		}
		if cap(buf) < 8*n {
			buf = make([]byte, 8*n)
		}
		buf = buf[:8*n]
		first := counter.Add(uint64(n)) - uint64(n)
		for i := range n {
			binary.BigEndian.PutUint64(buf[8*i:], first+uint64(i))
		}
		_ = m.Respond(buf)
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
}
