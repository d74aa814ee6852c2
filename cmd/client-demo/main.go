// Command client-demo asks uid-dispenser instances for IDs over NATS.
//
// Without flags it connects (NATS_URL, default nats://127.0.0.1:4222),
// fetches a few IDs with uid.next and with uid.batch, and prints each with
// its time, worker ID and sequence as the service parses them.
//
// With -load it runs -c concurrent clients for -d (or -n requests in all),
// shows a progress bar, and prints requests and IDs per second, p50/p99
// latency, and whether every ID received was distinct.
//
// client-demo parse [-layout L] [ID ...] decodes IDs locally, without a
// server, into UidGenerator's parseUID JSON, for any layout (a preset such
// as uidgenerator, or T/W/S@epoch), IDs from standard input when none are
// given; it reads UidGenerator's wrapped negative IDs too.
//
// With -blocks it takes IDs from the prefilled blocks that dispensers with
// DISPENSER_BLOCKS_ENABLED publish on JetStream, with -c block sources
// (-batch IDs per take), and reports the same way.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/numfmt"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

type options struct {
	url        string
	prefix     string
	show       int
	load       bool
	clients    int
	duration   time.Duration
	requests   int
	batch      int
	timeout    time.Duration
	blocks     bool
	stream     string
	consumer   string
	lossWindow time.Duration
	seq        string
	keep       int
	metrics    string
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) > 0 && args[0] == "parse" {
		return runParse(args[1:], stdin, stdout, stderr)
	}
	o := options{url: getenv("NATS_URL")}
	if o.url == "" {
		o.url = "nats://127.0.0.1:4222"
	}
	flags := flag.NewFlagSet("client-demo", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.StringVar(&o.prefix, "prefix", protocol.DefaultSubjectPrefix, "subject prefix of the dispensers")
	flags.IntVar(&o.show, "show", 3, "demo: how many IDs to fetch with next, and with one batch")
	flags.BoolVar(&o.load, "load", false, "run the load mode")
	flags.IntVar(&o.clients, "c", 8, "load: concurrent clients, each with its own connection")
	flags.DurationVar(&o.duration, "d", 10*time.Second, "load: how long to run (unless -n is set)")
	flags.IntVar(&o.requests, "n", 0, "load: total requests to send instead of running for -d")
	flags.IntVar(&o.batch, "batch", 1, "load: IDs per request; 1 uses uid.next, more uses uid.batch (binary)")
	flags.DurationVar(&o.timeout, "timeout", 5*time.Second, "deadline of each request, retries included")
	flags.BoolVar(&o.blocks, "blocks", false, "take IDs from the JetStream block stream instead of requests (-c sources, -batch IDs per take, -d or -n takes)")
	flags.StringVar(&o.stream, "stream", protocol.DefaultBlocksStream, "blocks: stream name")
	flags.StringVar(&o.consumer, "consumer", uidclient.DefaultBlocksConsumer, "blocks: durable consumer shared by every block source")
	flags.DurationVar(&o.lossWindow, "loss-window", uidclient.DefaultBlocksLossWindow, "blocks: W, the dispensers' DISPENSER_STORE_LOSS_WINDOW: each block is claimed and used W later; 0 only when the stream's servers sync every write")
	flags.IntVar(&o.keep, "keep", 50_000_000, "load, blocks: most IDs kept for the distinctness check (8 bytes each); IDs beyond are counted, not kept")
	flags.StringVar(&o.metrics, "metrics", "", "blocks: comma-separated /metrics URLs of the dispensers (DISPENSER_METRICS_ADDR): report the IDs they discarded during the run")
	flags.StringVar(&o.seq, "seq", "", "demo: ask for the numbers of this named sequence (DISPENSER_SEQUENCES) instead of IDs: -show with next, -show in one batch")
	flags.Usage = func() {
		fmt.Fprintln(stderr, "usage: client-demo [flags]   (NATS_URL sets the server, default nats://127.0.0.1:4222)")
		fmt.Fprintln(stderr, "       client-demo parse [-layout L] [ID ...]   (decodes IDs locally; -h for more)")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if flags.NArg() > 0 {
		// A stray word must not run the demo as if it meant nothing: it
		// may be a misspelt command (pasre) or a flag after an argument.
		fmt.Fprintf(stderr, "client-demo: unexpected argument %q; the one command is parse, the rest are flags\n", flags.Arg(0))
		flags.Usage()
		return 2
	}
	if o.clients < 1 || o.batch < 1 || o.requests < 0 || o.show < 1 || o.keep < 0 {
		fmt.Fprintln(stderr, "client-demo: -c, -batch and -show must be at least 1, -n and -keep at least 0")
		return 2
	}
	if o.blocks {
		return runBlocks(ctx, o, stdout, stderr)
	}
	if o.load {
		return runLoad(ctx, o, stdout, stderr)
	}
	if o.seq != "" {
		return runSeq(ctx, o, stdout, stderr)
	}
	return runDemo(ctx, o, stdout, stderr)
}

// runSeq shows a named sequence: -show numbers one per request, then
// -show in one batch; an undeclared name is the service's 404.
func runSeq(ctx context.Context, o options, stdout, stderr io.Writer) int {
	client, closeConn, ok := dial(ctx, o, stdout, stderr)
	if !ok {
		return 1
	}
	defer closeConn()
	c, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	fmt.Fprintf(stdout, "\n%s (one number per request):\n", protocol.SeqSubject(o.prefix, o.seq, protocol.EndpointNext))
	for range o.show {
		n, err := client.SeqNext(c, o.seq)
		if err != nil {
			fmt.Fprintln(stderr, "client-demo:", err)
			return 1
		}
		fmt.Fprintln(stdout, n)
	}
	fmt.Fprintf(stdout, "\n%s %d (binary):\n", protocol.SeqSubject(o.prefix, o.seq, protocol.EndpointBatch), o.show)
	nums, err := client.SeqBatch(c, o.seq, o.show)
	if err != nil {
		fmt.Fprintln(stderr, "client-demo:", err)
		return 1
	}
	for _, n := range nums {
		fmt.Fprintln(stdout, n)
	}
	return 0
}

func connect(ctx context.Context, url string) (*natsconn.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return natsconn.Connect(cctx, natsconn.Config{URL: url, Name: "client-demo"})
}

// dial connects for the demos and says where; false when it could not.
func dial(ctx context.Context, o options, stdout, stderr io.Writer) (*uidclient.Client, func(), bool) {
	conn, err := connect(ctx, o.url)
	if err != nil {
		fmt.Fprintln(stderr, "client-demo:", err)
		return nil, nil, false
	}
	fmt.Fprintf(stdout, "connected to %s\n", conn.RedactedURL())
	return uidclient.New(conn.Conn, uidclient.Config{SubjectPrefix: o.prefix}), conn.Close, true
}

func runDemo(ctx context.Context, o options, stdout, stderr io.Writer) int {
	client, closeConn, ok := dial(ctx, o, stdout, stderr)
	if !ok {
		return 1
	}
	defer closeConn()
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, o.timeout) }

	fmt.Fprintf(stdout, "\n%s (one ID per request):\n", protocol.Subject(o.prefix, protocol.EndpointNext))
	var ids []uint64
	for range o.show {
		c, cancel := call()
		id, err := client.Next(c)
		cancel()
		if err != nil {
			fmt.Fprintln(stderr, "client-demo:", err)
			return 1
		}
		ids = append(ids, id)
	}
	if !printParsed(ctx, o, client, ids, stdout, stderr) {
		return 1
	}

	fmt.Fprintf(stdout, "\n%s %d (binary):\n", protocol.Subject(o.prefix, protocol.EndpointBatch), o.show)
	c, cancel := call()
	ids, err := client.Batch(c, o.show)
	cancel()
	if err != nil {
		fmt.Fprintln(stderr, "client-demo:", err)
		return 1
	}
	if !printParsed(ctx, o, client, ids, stdout, stderr) {
		return 1
	}
	return 0
}

// printParsed prints each ID with its fields as the service parses them.
func printParsed(ctx context.Context, o options, client *uidclient.Client, ids []uint64, stdout, stderr io.Writer) bool {
	for _, id := range ids {
		c, cancel := context.WithTimeout(ctx, o.timeout)
		p, err := client.Parse(c, id)
		cancel()
		if err != nil {
			fmt.Fprintln(stderr, "client-demo:", err)
			return false
		}
		fmt.Fprintf(stdout, "  %-20d time %s  worker %-5d sequence %d\n", id, p.Time.Format(time.DateTime+"Z"), p.WorkerID, p.Sequence)
	}
	return true
}

// worker is one load client's tally.
type worker struct {
	ids       []uint64 // kept for the distinctness check, up to -keep in all
	buf       []uint64 // the last call's IDs
	count     int      // IDs received, kept or not
	ages      []time.Duration
	latencies []time.Duration
	errors    int
	lastErr   error
	inFlight  int   // calls the end of the run cut short: neither ok nor errors
	cutErr    error // what the last of them returned
}

// keep appends ids to w.ids, as far as limit. The first call reserves
// room for limit IDs at once: growing by doubling copied hundreds of
// megabytes at high rates and cut a blocks run's rate by a quarter, while
// memory reserved and not yet written costs nothing.
func (w *worker) keep(ids []uint64, limit int) {
	if w.ids == nil && limit > 0 {
		w.ids = make([]uint64, 0, limit)
	}
	w.ids = append(w.ids, ids[:max(min(len(ids), limit-len(w.ids)), 0)]...)
}

func runLoad(ctx context.Context, o options, stdout, stderr io.Writer) int {
	conns := make([]*natsconn.Conn, o.clients)
	for i := range conns {
		conn, err := connect(ctx, o.url)
		if err != nil {
			fmt.Fprintln(stderr, "client-demo:", err)
			return 1
		}
		defer conn.Close()
		conns[i] = conn
	}
	mode := fmt.Sprintf("%s (1 ID per request)", protocol.Subject(o.prefix, protocol.EndpointNext))
	if o.batch > 1 {
		mode = fmt.Sprintf("%s (%d IDs per request, binary)", protocol.Subject(o.prefix, protocol.EndpointBatch), o.batch)
	}
	limit := fmt.Sprintf("for %s", o.duration)
	if o.requests > 0 {
		limit = fmt.Sprintf("for %d requests", o.requests)
	}
	fmt.Fprintf(stdout, "load: clients %d, server %s, %s %s\n", o.clients, conns[0].RedactedURL(), mode, limit)

	clients := make([]*uidclient.Client, o.clients)
	for i, conn := range conns {
		clients[i] = uidclient.New(conn.Conn, uidclient.Config{SubjectPrefix: o.prefix})
	}
	keep := o.keep / o.clients
	workers, elapsed := drive(ctx, o, func(ctx context.Context, i int, w *worker) (int, error) {
		if o.batch == 1 {
			id, err := clients[i].Next(ctx)
			if err != nil {
				return 0, err
			}
			w.buf = append(w.buf[:0], id)
			w.keep(w.buf, keep)
			return 1, nil
		}
		var err error
		if w.buf, err = clients[i].AppendBatch(ctx, w.buf[:0], o.batch); err != nil {
			return 0, err
		}
		w.keep(w.buf, keep)
		return o.batch, nil
	}, stderr)
	code := report(o, workers, elapsed, stdout, stderr)
	var absorbed uidclient.ClientStats
	for _, c := range clients {
		st := c.Stats()
		absorbed.Requests += st.Requests
		absorbed.Retries += st.Retries
		absorbed.Unavailable += st.Unavailable
		absorbed.NoResponders += st.NoResponders
		absorbed.TimedOut += st.TimedOut
	}
	// The client retries what another attempt may cure; the callers above
	// saw only the outcome, so say what it took.
	fmt.Fprintf(stdout, "retried     %s attempts: %s 503s, %s no responders, %s timed out (absorbed, not errors)\n",
		numfmt.Thousands(int64(absorbed.Retries)), numfmt.Thousands(int64(absorbed.Unavailable)),
		numfmt.Thousands(int64(absorbed.NoResponders)), numfmt.Thousands(int64(absorbed.TimedOut)))
	return code
}

// drive runs o.clients workers for o.duration, or until they have started
// o.requests calls of take in all, each call with o.timeout, while
// progress draws on stderr. take(ctx, i, w) is one call of client i: it
// keeps what it received in w.ids (up to -keep) and returns how many IDs
// that was (IDs received alongside an error count too).
func drive(ctx context.Context, o options, take func(ctx context.Context, i int, w *worker) (int, error), stderr io.Writer) ([]*worker, time.Duration) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.requests == 0 {
		runCtx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	var started, received atomic.Int64 // calls started, IDs received
	workers := make([]*worker, o.clients)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range workers {
		w := &worker{}
		workers[i] = w
		wg.Go(func() {
			for runCtx.Err() == nil {
				if o.requests > 0 && started.Add(1) > int64(o.requests) {
					return
				}
				c, cancel := context.WithTimeout(runCtx, o.timeout)
				t0 := time.Now()
				n, err := take(c, i, w)
				cancel()
				received.Add(int64(n))
				w.count += n
				if err != nil {
					if runCtx.Err() != nil {
						// The run ended during the call: not a failure,
						// but not a success either.
						w.inFlight++
						w.cutErr = err
						return
					}
					w.errors++
					w.lastErr = err
					continue
				}
				w.latencies = append(w.latencies, time.Since(t0))
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	progress(o, start, &received, done, stderr)
	return workers, time.Since(start)
}

// progress draws a progress bar on stderr until done.
func progress(o options, start time.Time, received *atomic.Int64, done <-chan struct{}, stderr io.Writer) {
	tty := false
	if f, ok := stderr.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	interval := time.Second
	if tty {
		interval = 200 * time.Millisecond
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	draw := func(final bool) {
		elapsed := time.Since(start)
		frac := float64(elapsed) / float64(o.duration)
		if o.requests > 0 {
			frac = float64(received.Load()) / float64(o.batch) / float64(o.requests)
		}
		if final {
			frac = 1
		}
		frac = min(max(frac, 0), 1)
		const width = 30
		bar := strings.Repeat("=", int(frac*width)) + strings.Repeat(" ", width-int(frac*width))
		ids := received.Load()
		line := fmt.Sprintf("[%s] %3.0f%% %6.1fs  %s IDs  %s IDs/s", bar, frac*100, elapsed.Seconds(), numfmt.Thousands(ids), numfmt.Thousands(int64(float64(ids)/elapsed.Seconds())))
		if tty {
			fmt.Fprintf(stderr, "\r%s", line)
			if final {
				fmt.Fprintln(stderr)
			}
		} else {
			fmt.Fprintln(stderr, line)
		}
	}
	for {
		select {
		case <-done:
			draw(true)
			return
		case <-tick.C:
			draw(false)
		}
	}
}

// checkNotice is the number of IDs kept from which report says, before
// it sorts them, that it is checking them for duplicates.
const checkNotice = 1_000_000

// report prints the totals and returns the exit code: 1 on any error or
// duplicate.
func report(o options, workers []*worker, elapsed time.Duration, stdout, stderr io.Writer) int {
	var ids []uint64
	var lat, ages []time.Duration
	errors, inFlight, count := 0, 0, 0
	var lastErr, cutErr error
	for _, w := range workers {
		ids = append(ids, w.ids...)
		lat = append(lat, w.latencies...)
		ages = append(ages, w.ages...)
		count += w.count
		errors += w.errors
		inFlight += w.inFlight
		if w.lastErr != nil {
			lastErr = w.lastErr
		}
		if w.cutErr != nil {
			cutErr = w.cutErr
		}
	}
	secs := elapsed.Seconds()
	fmt.Fprintf(stdout, "requests    %s ok in %.2fs: %s req/s\n", numfmt.Thousands(int64(len(lat))), secs, numfmt.Thousands(int64(float64(len(lat))/secs)))
	fmt.Fprintf(stdout, "IDs         %s: %s IDs/s\n", numfmt.Thousands(int64(count)), numfmt.Thousands(int64(float64(count)/secs)))
	if len(lat) > 0 {
		slices.Sort(lat)
		fmt.Fprintf(stdout, "latency     p50 %s  p99 %s  max %s\n", roundUs(percentile(lat, 50)), roundUs(percentile(lat, 99)), roundUs(lat[len(lat)-1]))
	}
	if len(ages) > 0 {
		slices.Sort(ages)
		fmt.Fprintf(stdout, "age         p50 %s  p99 %s  max %s (first ID of each take, from the start of its second, default layout)\n",
			percentile(ages, 50).Round(time.Millisecond), percentile(ages, 99).Round(time.Millisecond), ages[len(ages)-1].Round(time.Millisecond))
	}
	fmt.Fprintf(stdout, "errors      %d\n", errors)
	if inFlight > 0 {
		fmt.Fprintf(stdout, "in flight   %d calls still running when the run ended\n", inFlight)
	}
	if lastErr != nil {
		fmt.Fprintf(stdout, "last error  %v\n", lastErr)
	}
	if count == 0 {
		// Nothing answered: a run of nothing is no success.
		fmt.Fprintln(stdout, "no IDs received")
		if lastErr == nil && cutErr != nil {
			fmt.Fprintf(stdout, "last call   %v\n", cutErr)
		}
		return 1
	}
	if len(ids) >= checkNotice {
		// Sorting tens of millions of IDs takes seconds after the bar
		// reached 100%: say what the wait is for.
		fmt.Fprintf(stderr, "checking %s IDs for duplicates (sorting them)...\n", numfmt.Thousands(int64(len(ids))))
	}
	slices.Sort(ids)
	dups := 0
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			dups++
		}
	}
	switch {
	case len(ids) == 0:
		fmt.Fprintf(stdout, "unique      not checked: no IDs kept (-keep 0)\n")
	case dups == 0 && len(ids) < count:
		fmt.Fprintf(stdout, "unique      all %s IDs kept distinct (%s more not kept: -keep)\n", numfmt.Thousands(int64(len(ids))), numfmt.Thousands(int64(count-len(ids))))
	case dups == 0:
		fmt.Fprintf(stdout, "unique      all %s IDs distinct\n", numfmt.Thousands(int64(len(ids))))
	default:
		fmt.Fprintf(stdout, "unique      %d DUPLICATES among %s IDs\n", dups, numfmt.Thousands(int64(len(ids))))
	}
	// Worker IDs under the default layout; a fleet on another layout
	// shows other numbers here but the same distinctness check above.
	perWorker := map[uint64]int{}
	for _, id := range ids {
		if p, err := uidcore.DefaultLayout().Parse(id); err == nil {
			perWorker[p.WorkerID]++
		}
	}
	if len(perWorker) <= 16 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(perWorker)) {
			parts = append(parts, fmt.Sprintf("%d: %s", k, numfmt.Thousands(int64(perWorker[k]))))
		}
		fmt.Fprintf(stdout, "per worker  %s (default layout)\n", strings.Join(parts, "  "))
	}
	if errors > 0 || dups > 0 {
		return 1
	}
	return 0
}

func roundUs(d time.Duration) time.Duration { return d.Round(time.Microsecond) }

func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[min(max(i-1, 0), len(sorted)-1)]
}
