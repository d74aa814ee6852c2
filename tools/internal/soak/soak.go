package soak

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/uid-dispenser/uid-dispenser/internal/faultproxy"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// Config configures a soak run. Zero values take the defaults of
// DefaultConfig, except DispenserBin, which is required.
type Config struct {
	Duration     time.Duration // how long the clients run (the first fault cycle may extend it)
	DispenserBin string        // path of the dispenser binary (cmd/dispenser)
	// NATSServerBin is the nats-server binary every node runs (required;
	// NATSServerBinary builds the product go.mod's version).
	NATSServerBin string
	// The soak starts its own mariadbd (data directory, port and error
	// log under WorkDir/mysql), which it can kill and pause. With
	// ExternalMySQL, or when no mariadbd is installed (a progress line
	// says so), it uses the server MySQLDSN names instead, without the
	// mysql-kill and mysql-pause faults.
	ExternalMySQL bool
	// MySQLDSN reaches that server (go-sql-driver form). With a database
	// name, that database is used (it should be empty) and left in place;
	// without, a fresh one is created and dropped at the end. Default
	// root@tcp(127.0.0.1:3306)/.
	MySQLDSN string
	// MySQLDown is how long a SIGKILLed mariadbd stays down before its
	// restart (default 500ms): with its crash recovery, the outage stays
	// well within the lease TTL and the reservation, which the leases
	// must ride out.
	MySQLDown time.Duration
	// WorkDir holds the dispensers' logs, the soak's log and the NATS
	// stores. Default: a temporary directory, removed after a run without
	// violations unless Keep.
	WorkDir string
	Keep    bool

	Clients int     // default 16
	Rate    float64 // load multiplier, default 1 (about 40,000 IDs/s)
	// BulkClients ask for batches of 4,096 at BulkRate IDs/s each during
	// the high-rate phase (the first third of the faulted part of the
	// run, at most a minute): by default 4 × 200,000, about 24 times what
	// one worker ID of the soak's layout sustains, so the dispensers must
	// hold lanes, with the faults running. 0 clients: no phase.
	BulkClients int
	BulkRate    float64
	// SeqClients ask for numbers of the named sequences the dispensers
	// declare (seqClient: SeqNext and SeqBatch of 1 to 100, orders and
	// invoices, both fleets): default 8, 0 none. In the regions mode,
	// that many in each region, asking for the homed sequences.
	SeqClients      int
	LeaseTTL        time.Duration // DISPENSER_LEASE_TTL, default 4s
	ReserveChunk    time.Duration // DISPENSER_RESERVE_CHUNK, default 5s
	ShutdownTimeout time.Duration // DISPENSER_SHUTDOWN_TIMEOUT, default 5s
	CallDeadline    time.Duration // every client call's deadline, default 3s
	Grace           time.Duration // how late a call may return after its deadline, default 1s
	ShortCut        time.Duration // default 0.4 × LeaseTTL: longer than the renewal interval (TTL/3), within the expiry
	LongCut         time.Duration // default LeaseTTL + 2s
	NATSDown        time.Duration // how long a killed NATS node stays down, default 2s
	// NATSPause is how long a node stays SIGSTOPped: default the nodes'
	// ping interval × max pings out (after which routes and clients drop
	// it) + 2s.
	NATSPause time.Duration
	// NATSWriteDeadline is the NATS nodes' write_deadline (0: the
	// server's default, 10s). See docs/soak.md: a paused
	// dispenser stalls the cluster for up to this long.
	NATSWriteDeadline time.Duration
	FaultGap          time.Duration // pause before each fault, default 2s
	WarmUp            time.Duration // before the first fault, default 3s
	Quiet             time.Duration // after the last fault, default max(8s, Duration/10)
	ServeWithin       time.Duration // a started dispenser must serve within it, default 30s
	SampleEvery       time.Duration // resource sampling interval, default 1s
	Progress          io.Writer     // progress lines (nil: none)
	// Regions, when 2 or more, runs the regions mode (regions.go): a
	// cluster per region joined by gateways, both fleets in every
	// region, the regions faults. 0: the ordinary soak.
	Regions int
	// GatewayDelay delays every gateway link each way (regions mode;
	// default 30ms, a WAN's; negative: none), so that local-first serving
	// shows in the latency.
	GatewayDelay time.Duration
	// RegionDown is how long a region-down fault keeps a region's
	// dispensers down (default 10s).
	RegionDown time.Duration
	// GatewayCut is how long a gateway-cut fault keeps the gateways cut
	// once no request crosses (default 8s, twice the lease TTL).
	GatewayCut time.Duration
	// Faults, when not empty, are the only fault kinds the cycle
	// injects (by name, as in the summary: "nats-kill-kv-leader", …),
	// back to back in the cycle's order: a reproduction of one kind's
	// failures without waiting through the others. An unknown kind is
	// an error of Run.
	Faults []string
}

// DefaultConfig is the configuration of `make soak` but for the duration
// and the dispenser binary.
func DefaultConfig() Config {
	return Config{
		Duration: 10 * time.Minute, MySQLDSN: "root@tcp(127.0.0.1:3306)/", Clients: 16, Rate: 1,
		BulkClients: 4, BulkRate: 200_000, SeqClients: 8,
		LeaseTTL: 4 * time.Second, ReserveChunk: 5 * time.Second, ShutdownTimeout: 5 * time.Second,
		CallDeadline: 3 * time.Second, Grace: time.Second, NATSDown: 2 * time.Second, MySQLDown: 500 * time.Millisecond, FaultGap: 2 * time.Second,
		WarmUp: 3 * time.Second, ServeWithin: 30 * time.Second, SampleEvery: time.Second,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	set := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&c.Duration, d.Duration)
	set(&c.LeaseTTL, d.LeaseTTL)
	set(&c.ReserveChunk, d.ReserveChunk)
	set(&c.ShutdownTimeout, d.ShutdownTimeout)
	set(&c.CallDeadline, d.CallDeadline)
	set(&c.Grace, d.Grace)
	set(&c.ShortCut, c.LeaseTTL*2/5)
	set(&c.LongCut, c.LeaseTTL+2*time.Second)
	set(&c.NATSDown, d.NATSDown)
	set(&c.MySQLDown, d.MySQLDown)
	set(&c.NATSPause, clusterOptions{}.silence()+2*time.Second)
	set(&c.FaultGap, d.FaultGap)
	set(&c.WarmUp, d.WarmUp)
	set(&c.Quiet, max(8*time.Second, c.Duration/10))
	set(&c.ServeWithin, d.ServeWithin)
	set(&c.SampleEvery, d.SampleEvery)
	set(&c.RegionDown, 10*time.Second)
	set(&c.GatewayCut, 2*c.LeaseTTL)
	switch {
	case c.GatewayDelay == 0:
		c.GatewayDelay = 30 * time.Millisecond
	case c.GatewayDelay < 0:
		c.GatewayDelay = 0
	}
	if c.MySQLDSN == "" {
		c.MySQLDSN = d.MySQLDSN
	}
	if c.Clients <= 0 {
		c.Clients = d.Clients
	}
	if c.Rate <= 0 {
		c.Rate = d.Rate
	}
	if c.BulkClients < 0 {
		c.BulkClients = 0
	}
	c.SeqClients = max(c.SeqClients, 0)
	if c.BulkRate <= 0 {
		c.BulkRate = d.BulkRate
	}
	return c
}

// highRatePhase is when the bulk clients run, from the run's origin: the
// first third of the faulted part, at most a minute. The cycle opens with
// kills, a NATS node restart and the short MySQL cut, which the phase
// must ride through; the long MySQL cut, which stops lane claims and
// runs the reservations out by design, comes after it in a short run.
func (c Config) highRatePhase() (from, to time.Duration) {
	faulted := c.Duration - c.WarmUp - c.Quiet
	third := max(faulted/3, 0)
	return c.WarmUp, c.WarmUp + min(third, time.Minute)
}

// soak is one run.
type soak struct {
	cfg     Config
	origin  time.Time
	log     *slog.Logger // the soak's own log file (clients' connection notices)
	cluster *cluster
	mysqld  *mysqld           // nil: an external MySQL server
	admin   *natsconn.Conn    // the soak's own connection, for the JetStream API (stream leaders)
	proxy   *faultproxy.Proxy // MySQL
	natsCut *faultproxy.Proxy // between the partitioned dispenser and its node
	slots   []*dispenserSlot
	events  *events
	// The regions mode's regions and map (empty otherwise).
	regions    []*region
	regionsMap workerid.Regions
	homedSeqs  []namedSeq // one sequence homed in each region
	self       []sample

	mu        sync.Mutex
	faults    []faultRecord
	takeovers int
	// mysqlDown is how long each mysql-kill left mariadbd unable to
	// accept a login.
	mysqlDown []time.Duration
	// slowHandled counts the requests dispensers took over the client's
	// attempt timeout to handle (their request duration histograms).
	slowHandled int64
}

func (s *soak) since() time.Duration { return time.Since(s.origin) }

func (s *soak) progress(format string, args ...any) {
	if s.cfg.Progress != nil {
		fmt.Fprintf(s.cfg.Progress, "[%6.1fs] %s\n", s.since().Seconds(), fmt.Sprintf(format, args...))
	}
}

// Run runs the soak and returns its summary; the run failed when the
// summary has violations. An error means the soak could not be set up or
// torn down (no MySQL, no binary), not a finding.
func Run(ctx context.Context, cfg Config) (sum *Summary, err error) {
	cfg = cfg.withDefaults()
	if cfg.DispenserBin == "" {
		return nil, errors.New("soak: no dispenser binary")
	}
	if _, err := os.Stat(cfg.DispenserBin); err != nil {
		return nil, fmt.Errorf("soak: dispenser binary: %w", err)
	}
	if cfg.NATSServerBin == "" {
		return nil, errors.New("soak: no nats-server binary (NATSServerBinary builds the product go.mod's)")
	}
	if _, err := os.Stat(cfg.NATSServerBin); err != nil {
		return nil, fmt.Errorf("soak: nats-server binary: %w", err)
	}
	if err := checkFaultKindsOf(cfg.kinds(), cfg.Faults); err != nil {
		return nil, err
	}
	s := &soak{cfg: cfg, origin: time.Now(), events: newEvents()}

	workDir := cfg.WorkDir
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "uid-soak-"); err != nil {
			return nil, fmt.Errorf("soak: %w", err)
		}
		defer func() {
			if !cfg.Keep && err == nil && !sum.Failed() {
				os.RemoveAll(workDir)
			}
		}()
	} else if err := os.MkdirAll(workDir, 0o750); err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	logFile, err := os.Create(filepath.Join(workDir, "soak.log"))
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	defer logFile.Close()
	s.log = slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo}))

	if cfg.Regions > 0 {
		return s.runRegions(ctx, workDir)
	}

	// MySQL: a fresh database (unless given one), reached through the proxy.
	mysqlDSN, err := s.startMySQL(ctx, workDir)
	if err != nil {
		return nil, err
	}
	if s.mysqld != nil {
		defer s.mysqld.stop()
	}
	dsn, dropDB, err := prepareDatabase(mysqlDSN)
	if err != nil {
		return nil, err
	}
	defer dropDB()
	s.proxy, err = faultproxy.Listen(dsn.Addr)
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	defer s.proxy.Close()
	dsn.Addr = s.proxy.Addr()

	s.progress("starting a 3-node NATS cluster of nats-server processes (work dir %s)", workDir)
	s.cluster, err = startCluster(ctx, cfg.NATSServerBin, workDir, numNodes, clusterOptions{writeDeadline: cfg.NATSWriteDeadline, onCrash: func(msg string) { s.events.violation("%s", msg) }})
	if err != nil {
		return nil, err
	}
	defer s.cluster.shutdown()
	s.admin, err = natsconn.Connect(ctx, natsconn.Config{URL: s.cluster.URLs(0), Name: "uid-soak admin", Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	defer s.admin.Close()
	// The partitioned dispenser's only way to NATS.
	s.natsCut, err = faultproxy.Listen(strings.TrimPrefix(s.cluster.URL(0), "nats://"))
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	defer s.natsCut.Close()

	if err := s.makeSlots(workDir, dsn.FormatDSN()); err != nil {
		return nil, err
	}
	s.progress("starting %d dispensers on MySQL and %d on JetStream KV (lease TTL %s, reserve chunk %s), all at once",
		numDispensers, numKVDispensers, cfg.LeaseTTL, cfg.ReserveChunk)
	for _, slot := range s.slots {
		if _, err := slot.start(); err != nil {
			s.stopDispensers()
			return nil, err
		}
	}
	for _, slot := range s.slots {
		if err := slot.current().waitServing(ctx, cfg.ServeWithin); err != nil {
			s.stopDispensers()
			return nil, fmt.Errorf("soak: %w", err)
		}
	}

	ld := defaultLoad(cfg.Rate)
	ld.bulkEvery = time.Duration(float64(time.Second) * bulkBatch / cfg.BulkRate)
	ld.bulkFrom, ld.bulkTo = cfg.highRatePhase()
	clients, err := startClients(ctx, cfg.Clients, cfg.BulkClients, cfg.SeqClients, s.cluster, s.log, ld)
	if err != nil {
		s.stopDispensers()
		return nil, err
	}
	watch := newSlowCalls(s, workDir)
	for _, c := range clients {
		c.watch = watch
	}
	s.origin = time.Now() // the run's clock starts with the clients
	rec := newRecorder(s.origin)
	s.progress("%d clients running for %s (and %d bulk clients at %.0f IDs/s each from %s to %s; %d sequence clients)",
		cfg.Clients, cfg.Duration, cfg.BulkClients, cfg.BulkRate, ld.bulkFrom, ld.bulkTo, cfg.SeqClients)

	stalls := s.drive(ctx, clients, rec, ld,
		watch.sampleConns,
		watch.auditInterest)
	watch.mu.Lock()
	s.mu.Lock()
	slowHandled := s.slowHandled
	s.mu.Unlock()
	s.progress("slow calls: %d snapshots; interest audit: %d mismatches seen twice in a row; %d requests the dispensers took over 1s to handle (details in soak.log)", watch.snaps, watch.mismatches, slowHandled)
	watch.mu.Unlock()
	blocks := blockStats(clients)
	closeClients(clients)
	s.progress("clients stopped; stopping the dispensers")
	s.stopDispensers()
	s.cluster.shutdown()

	sum = s.summarise(rec, clients, blocks, stalls)
	sum.WorkDir = workDir
	if err := sum.writeRecords(workDir); err != nil {
		return nil, err
	}
	return sum, nil
}

// drive runs the clients for the configured duration, the faults from
// the warm-up to the quiet tail, the resource sampling and background
// (samplers, until the clients have stopped), and returns the stalls of
// the soak's own process.
func (s *soak) drive(ctx context.Context, clients []*soakClient, rec *recorder, ld load, background ...func(context.Context)) []stall {
	cfg := s.cfg
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var wg sync.WaitGroup
	wg.Go(func() { s.sample(runCtx) })
	for _, f := range background {
		wg.Go(func() { f(runCtx) })
	}
	var stalls []stall
	wg.Go(func() { stalls = watchStalls(runCtx, s.origin, 50*time.Millisecond) })
	clientsCtx, stopClients := context.WithCancel(ctx)
	defer stopClients()
	clientsDone := make(chan struct{})
	go func() {
		runClients(clientsCtx, clients, rec, cfg.CallDeadline, ld)
		close(clientsDone)
	}()

	end := s.origin.Add(cfg.Duration)
	if sleep(ctx, cfg.WarmUp) {
		s.runFaults(ctx, end.Add(-cfg.Quiet))
	}
	// The quiet tail: everything recovers while the clients go on.
	sleep(ctx, max(time.Until(end), cfg.Quiet/2))
	stopClients()
	<-clientsDone
	stopRun() // the last samples are of a running system, not of one closing
	wg.Wait()
	return stalls
}

// numNodes is the NATS cluster's size.
const numNodes = 3

// makeSlots lays the dispensers out: the MySQL fleet's d0..d2, each
// connected to its own node first (failing over to the others), and the
// KV fleet's k0, which reaches node 0 only through the partition proxy,
// and k1.
func (s *soak) makeSlots(workDir, dsn string) error {
	metricsPorts, err := freePorts(numDispensers + numKVDispensers)
	if err != nil {
		return err
	}
	for i := range numDispensers + numKVDispensers {
		f, label, natsURL := mysqlFleet, fmt.Sprintf("d%d", i), s.cluster.URLs(i%numNodes)
		if i >= numDispensers {
			f, label = kvFleet, fmt.Sprintf("k%d", i-numDispensers)
		}
		if i == partitionedSlot {
			natsURL = "nats://" + s.natsCut.Addr()
		}
		metrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(metricsPorts[i]))
		s.slots = append(s.slots, &dispenserSlot{
			index: i, label: label, fleet: f, bin: s.cfg.DispenserBin, logDir: workDir, metrics: metrics, events: s.events,
			env: dispenserEnv(s.cfg, f, natsURL, dsn, metrics),
		})
	}
	return nil
}

// dispenserEnv is a dispenser's whole environment: nothing inherited, so
// no DISPENSER_* (or unprefixed NATS_URL, MYSQL_DSN …) of the caller's
// leaks in. The MySQL fleet leases on dsn; the KV fleet, with no DSN, in
// the KV bucket at 3 replicas.
func dispenserEnv(cfg Config, f *fleet, natsURL, dsn, metrics string) []string {
	store := []string{"DISPENSER_MYSQL_DSN=" + dsn}
	if f == kvFleet {
		store = []string{"DISPENSER_WORKER_KV_BUCKET=" + kvBucket, "DISPENSER_WORKER_KV_REPLICAS=3"}
	}
	return append(store,
		"HOME="+os.Getenv("HOME"),
		"DISPENSER_NATS_URL="+natsURL,
		"DISPENSER_NATS_CONNECT_TIMEOUT=10s",
		"DISPENSER_SUBJECT_PREFIX="+f.name,
		"DISPENSER_QUEUE_GROUP="+f.queueGroup,
		"DISPENSER_BLOCKS_STREAM="+f.blocksStream,
		"DISPENSER_BLOCKS_SUBJECT="+f.blocksSubject,
		"DISPENSER_WORKER_MODE=leased",
		// 32,768 IDs a second a worker ID: the high-rate phase needs lanes.
		fmt.Sprintf("DISPENSER_TIME_BITS=%d", layout.TimeBits),
		fmt.Sprintf("DISPENSER_WORKER_BITS=%d", layout.WorkerBits),
		fmt.Sprintf("DISPENSER_SEQ_BITS=%d", layout.SeqBits),
		"DISPENSER_MAX_LANES=8",
		"DISPENSER_LEASE_TTL="+cfg.LeaseTTL.String(),
		"DISPENSER_RESERVE_CHUNK="+cfg.ReserveChunk.String(),
		"DISPENSER_STORE_STARTUP_DEADLINE=20s",
		// The soak's stores keep what they acknowledge (sync_interval:
		// always, innodb_flush_log_at_trx_commit=1) and lose no power: no
		// loss window, so takeovers start right after the reservation, as
		// the soak's checks of them expect.
		"DISPENSER_STORE_LOSS_WINDOW=0",
		"DISPENSER_SHUTDOWN_TIMEOUT="+cfg.ShutdownTimeout.String(),
		"DISPENSER_BLOCKS_ENABLED=true",
		"DISPENSER_BLOCKS_REPLICAS=3",
		"DISPENSER_BLOCKS_BLOCK_SIZE=1024",
		"DISPENSER_BLOCKS_TARGET_DEPTH=16",
		// Small segments, so that they turn over within seconds and the
		// sequence clients meet segment changes under the faults.
		"DISPENSER_SEQUENCES="+sequencesEnv(sequences),
		"DISPENSER_SEQUENCE_STEP=500",
		"DISPENSER_SEQUENCE_MAX_STEP=2000",
		"DISPENSER_METRICS_ADDR="+metrics,
		"DISPENSER_LOG_FORMAT=json",
		"DISPENSER_LOG_LEVEL=info",
	)
}

// startMySQL starts the soak's own mariadbd unless the configuration
// asks for an external server or none is installed; it returns the DSN
// of the server to use.
func (s *soak) startMySQL(ctx context.Context, workDir string) (string, error) {
	if s.cfg.ExternalMySQL {
		return s.cfg.MySQLDSN, nil
	}
	start := time.Now()
	// The driver logs a connection a SIGKILL broke to stderr; the soak's
	// log is the place for it.
	_ = mysql.SetLogger(slog.NewLogLogger(s.log.Handler(), slog.LevelWarn))
	m, err := startMySQLd(ctx, filepath.Join(workDir, "mysql"), s.log, func(msg string) { s.events.violation("%s", msg) })
	if errors.Is(err, errNoMariaDB) {
		s.progress("no mariadbd installed: using the MySQL server of the DSN given (-mysql), without the mysql-kill and mysql-pause faults")
		return s.cfg.MySQLDSN, nil
	}
	if err != nil {
		return "", err
	}
	s.mysqld = m
	s.progress("started mariadbd on %s in %.1fs (error log %s)", m.DSN(), time.Since(start).Seconds(), m.ErrorLog())
	return m.DSN(), nil
}

// prepareDatabase parses dsn and, when it names no database, creates a
// fresh one; drop removes that one again (a no-op for a given database).
func prepareDatabase(raw string) (dsn *mysql.Config, drop func(), err error) {
	dsn, err = mysql.ParseDSN(raw)
	if err != nil {
		return nil, nil, errors.New("soak: the MySQL DSN does not parse") // never echo a DSN
	}
	if dsn.Net != "tcp" {
		return nil, nil, fmt.Errorf("soak: the MySQL DSN must use tcp (the soak proxies it), not %q", dsn.Net)
	}
	if dsn.DBName != "" {
		return dsn, func() {}, nil
	}
	admin := dsn.Clone()
	admin.Timeout = 5 * time.Second
	db, err := sql.Open("mysql", admin.FormatDSN())
	if err == nil {
		err = db.Ping()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("soak: MySQL at %s: %s", dsn.Addr, redact(err.Error(), dsn.Passwd))
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "uidsoak_" + hex.EncodeToString(b)
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("soak: create database: %s", redact(err.Error(), dsn.Passwd))
	}
	dsn.DBName = name
	return dsn, func() {
		_, _ = db.Exec("DROP DATABASE IF EXISTS " + name)
		db.Close()
	}, nil
}

func redact(msg, password string) string {
	if password == "" {
		return msg
	}
	return strings.ReplaceAll(msg, password, "***")
}

// stopDispensers stops every dispenser gracefully; each must exit 0.
func (s *soak) stopDispensers() {
	var wg sync.WaitGroup
	for _, slot := range s.slots {
		p := slot.current()
		if p == nil {
			continue
		}
		if p.isPaused() {
			_ = p.signal(syscall.SIGCONT)
		}
		wg.Go(func() {
			if err := p.terminate(s.cfg.ShutdownTimeout + 5*time.Second); err != nil {
				s.events.violation("final stop: %v", err)
			}
		})
	}
	wg.Wait()
}

// sample measures the dispensers and the soak itself until ctx is done.
func (s *soak) sample(ctx context.Context) {
	t := time.NewTicker(s.cfg.SampleEvery)
	defer t.Stop()
	procStart := time.Now()
	slowSeen := map[*dispenserProc]int64{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.self = append(s.self, selfSample(procStart))
		for _, slot := range s.slots {
			p := slot.current()
			if p == nil || p.isPaused() {
				continue
			}
			select {
			case <-p.exited:
				continue
			case <-p.serving:
			default:
				continue // starting
			}
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			m := scrapeMetrics(sctx, slot.metrics)
			smp := sample{at: time.Since(p.start), fds: procFDs(p.pid), rssKiB: procRSS(p.pid), goroutines: m.goroutines}
			cancel()
			if ctx.Err() != nil {
				return
			}
			p.addSample(smp)
			s.noteSlowRequests(p, m.slowRequests, slowSeen)
		}
	}
}

// noteSlowRequests logs the requests p took longer than the Go client's
// attempt timeout to handle since the last sample (the client had given
// up on them: to it they timed out) and counts them; seen holds each
// process's last count.
func (s *soak) noteSlowRequests(p *dispenserProc, slow int64, seen map[*dispenserProc]int64) {
	if slow < 0 || slow <= seen[p] {
		return
	}
	s.log.Warn("soak: a dispenser took over 1s (the client's attempt timeout) to handle requests", "dispenser", p.name, "requests", slow-seen[p], "at_s", fmt.Sprintf("%.1f", s.since().Seconds()))
	s.mu.Lock()
	s.slowHandled += slow - seen[p]
	s.mu.Unlock()
	seen[p] = slow
}

// layout is the dispensers' ID layout: the default's time and epoch with
// 32,768 IDs a second per worker ID, so that the high-rate phase (ten
// times that and more) needs a dozen lanes over the three dispensers.
var layout = uidcore.Layout{TimeBits: 31, WorkerBits: 17, SeqBits: 15, Epoch: uidcore.DefaultEpoch}
