package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/check"
	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/history"
	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/netns"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// Config is a run.
type Config struct {
	Duration time.Duration // of the fault schedule
	Seed     uint64        // 0: from the time
	Dir      string        // work directory: stores, logs, histories (kept)

	Nodes      int // nats-server nodes (3; 5 gives the majorities ring a meaning)
	Dispensers int
	Clients    int // client processes, each in a host of its own
	Workers    int // callers per client process

	// Kinds of fault to schedule (nil: every kind).
	Kinds []string
	// SyncAlways runs the nodes with JetStream's sync_interval: always;
	// a power loss is then a kill -9 of every node without restoring old
	// stores, instead of the loss of the last Δ seconds.
	SyncAlways bool
	// MySQL adds a second fleet (subject prefix uidmy, 2 dispensers)
	// whose store is a mariadbd primary with an asynchronous replica, and
	// the mysql-failover fault.
	MySQL    bool
	LeaseTTL time.Duration
	// AloneShare is the share of faults (0 to 1) that come after a quiet
	// gap longer than the recovery period instead of a short one
	// (HoldMax/6 to /3), so that the checker has windows with no other
	// fault's aftermath in them (check.Result.Alone) to measure each kind
	// by; the others meet the aftermath of the fault before them. 0 (the
	// CI-minute run, to stay short): none.
	AloneShare float64
	// PingInterval is the dispensers' DISPENSER_NATS_PING_INTERVAL
	// (default 2 s, what docs/operations.md recommends where a
	// partition's unavailability matters): a dispenser on a server cut
	// off from its cluster leaves it after 2 to 3 of them.
	PingInterval time.Duration
	// HoldMax bounds how long a fault is held (default 15 s): from a
	// third of it to all of it. A pause lasts the lease TTL and 1–3 s
	// more whatever it is.
	HoldMax time.Duration
	// NoClientRetry makes each client call one request; by default a
	// call retries no responders and 503s within its timeout, as the
	// product's clients do (client.Config.NoRetry).
	NoClientRetry bool
	// NoClientMove keeps each client on its server when that server is
	// cut off from the cluster; by default a client moves to another
	// server, as the product's clients do (client.Config.MoveAfter).
	NoClientMove bool

	NATSServer string // nats-server binary
	Dispenser  string // the dispenser built with the faultclock tag
	Self       string // this program (its client subcommand runs the clients)

	Log io.Writer // progress
}

// clientMoveAfter is the clients' -move-after: their default, or never.
func (cfg Config) clientMoveAfter() int {
	if cfg.NoClientMove {
		return -1
	}
	return 0
}

// lossWindow is the dispensers' DISPENSER_STORE_LOSS_WINDOW: a fault
// makes a store forget at most a hold.
func (cfg Config) lossWindow() time.Duration { return cfg.HoldMax + 2*time.Second }

// recovery is how long a fault's effects may last after it ends by
// design: a worker ID reclaimed after a lease regression or takeover
// issues only once its first reservation is durable, W and a renewal
// (TTL/3) after the claim (docs/operations.md); a TTL bounds the claim
// and the renewal together.
func (cfg Config) recovery() time.Duration { return cfg.lossWindow() + cfg.LeaseTTL }

// DefaultPingInterval is the dispensers' NATS ping interval in a run
// (Config.PingInterval).
const DefaultPingInterval = 2 * time.Second

// Fault kinds, as the summary names them.
const (
	KindPartition = "partition"
	KindNetem     = "netem"
	KindPowerLoss = "power-loss"
	KindMySQL     = "mysql-failover"
	KindClockStep = "clock-step"
	KindPause     = "pause"
	KindKill      = "kill"
)

// AllKinds are the kinds a run schedules by default. mysql-failover is
// not implemented: it stays at 0.
var AllKinds = []string{KindPartition, KindNetem, KindPowerLoss, KindClockStep, KindPause, KindKill}

// Proof is one fault as it happened, with the evidence that it did.
type Proof struct {
	Kind   string    `json:"kind"`
	What   string    `json:"what"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Proof  string    `json:"proof"`
	Proven bool      `json:"proven"`
}

// Summary is the run's machine-readable result.
type Summary struct {
	Seed     uint64         `json:"seed"`
	Duration string         `json:"duration"`
	Sync     string         `json:"sync"`
	Faults   map[string]int `json:"faults"`
	IDs      struct {
		Acknowledged int64 `json:"acknowledged"`
		Duplicated   int64 `json:"duplicated"`
	} `json:"ids"`
	Numbers struct {
		Acknowledged int64 `json:"acknowledged"`
		Duplicated   int64 `json:"duplicated"`
	} `json:"numbers"`
	Calls struct {
		OK      int64 `json:"ok"`
		Failed  int64 `json:"failed"`
		Unknown int64 `json:"unknown"`
	} `json:"calls"`
	LeaseOverlaps   int `json:"lease_overlaps"`
	SegmentOverlaps int `json:"segment_overlaps"`
	// What the lease and segment checks read from the logs: 0 means
	// those checks saw nothing (the dispensers logged no such event).
	LeaseClaims int           `json:"lease_claims_read"`
	Segments    int           `json:"segments_read"`
	Passed      bool          `json:"passed"`
	Unproven    int           `json:"unproven_faults"`
	Exits       []string      `json:"unexpected_exits,omitempty"`
	Proofs      []Proof       `json:"proofs"`
	Check       *check.Result `json:"check"`
	Dir         string        `json:"dir"`
	Load        string        `json:"load"`
	// Recovery splits the calls outside every window (check's
	// AfterKind): those within it of a window's end (Config.recovery).
	Recovery Duration `json:"recovery,omitempty"`
}

// Duration is a time.Duration written as its text ("23s") in JSON.
type Duration time.Duration

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// run is a run in progress.
type run struct {
	cfg        Config
	rng        *rand.Rand
	network    *netns.Network
	cluster    *cluster
	dispensers []*dispenser
	clients    []*proc
	histories  []string
	netem      bool
	mysql      *mysqlPair

	logMu  sync.Mutex // serialises writes to cfg.Log
	mu     sync.Mutex
	proofs []Proof
	exits  []string
}

func (r *run) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "%s %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
}

func (cfg Config) withDefaults() Config {
	if cfg.Nodes <= 0 {
		cfg.Nodes = 3
	}
	if cfg.Dispensers <= 0 {
		cfg.Dispensers = 3
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 2
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 6 * time.Second
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = DefaultPingInterval
	}
	if cfg.HoldMax <= 0 {
		cfg.HoldMax = 15 * time.Second
	}
	if cfg.Kinds == nil {
		cfg.Kinds = AllKinds
		if cfg.MySQL {
			cfg.Kinds = append(slices.Clone(AllKinds), KindMySQL)
		}
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	return cfg
}

// Run runs the cluster, dispensers and clients in hosts of their own,
// injects faults on a schedule drawn from the seed for cfg.Duration,
// then checks the histories and logs. Every namespace, interface and
// process it made is gone when it returns, also on an error or a
// cancelled ctx.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	cfg = cfg.withDefaults()
	if cfg.AloneShare < 0 || cfg.AloneShare > 1 {
		return nil, fmt.Errorf("faults: the share of faults alone is %v, want 0 to 1", cfg.AloneShare)
	}
	r := &run{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	network, err := netns.New(ctx)
	if err != nil {
		return nil, err
	}
	r.network = network
	defer func() {
		r.stopAll()
		if err := network.Close(context.WithoutCancel(ctx)); err != nil {
			r.logf("cleanup: %v", err)
		}
	}()
	if err := r.setUp(ctx); err != nil {
		return nil, err
	}
	r.logf("seed %d: faults for %s (%s)", cfg.Seed, cfg.Duration, strings.Join(cfg.Kinds, ", "))
	r.schedule(ctx)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// A quiet end: every fault healed, the clients go on a few seconds.
	_ = sleep(ctx, 5*time.Second)
	r.stopClients()
	r.stopDispensers()
	return r.summarize()
}

func (r *run) setUp(ctx context.Context) error {
	cfg := r.cfg
	c, err := newCluster(ctx, r.network, cfg.NATSServer, cfg.Dir, cfg.Nodes, r.unexpectedExit)
	r.cluster = c
	if err != nil {
		return err
	}
	if cfg.SyncAlways {
		for _, n := range c.nodes {
			if err := n.writeConfig(c.routes, true); err != nil {
				return err
			}
		}
		if err := r.restartNodes(ctx); err != nil {
			return err
		}
	}
	r.logf("cluster of %d nodes healthy on %s/24", cfg.Nodes, r.network.Gateway())
	prefixes := "uid"
	fleets := []string{""}
	if cfg.MySQL {
		pair, err := newMySQLPair(ctx, r.network, filepath.Join(cfg.Dir, "mysql"), r.unexpectedExit)
		r.mysql = pair
		if err != nil {
			return err
		}
		r.logf("mariadbd primary and async replica up; the MySQL fleet reaches the primary at %s", pair.vip)
		prefixes = "uid,uidmy"
		fleets = append(fleets, "my")
	}
	if err := r.startFleets(ctx, fleets); err != nil {
		return err
	}
	for i := range cfg.Clients {
		h, err := r.network.AddHost(ctx, fmt.Sprintf("c%d", i))
		if err != nil {
			return err
		}
		name := fmt.Sprintf("c%d", i)
		hist := filepath.Join(cfg.Dir, "history-"+name+".jsonl")
		p, err := startProc(h, name, filepath.Join(cfg.Dir, "client-"+name+".log"), os.Environ(), r.unexpectedExit,
			cfg.Self, "client", "-name", name, "-nats", c.urls(i%cfg.Nodes), "-history", hist,
			"-workers", fmt.Sprint(cfg.Workers), "-sequences", "orders,invoices", "-prefixes", prefixes,
			"-retry="+fmt.Sprint(!cfg.NoClientRetry), "-move-after="+fmt.Sprint(cfg.clientMoveAfter()))
		if err != nil {
			return err
		}
		r.clients = append(r.clients, p)
		r.histories = append(r.histories, hist)
	}
	r.netem = r.cluster.nodes[0].host.NetemAvailable(ctx)
	if !r.netem {
		r.logf("no tc netem in this kernel: link faults are NFQUEUE rules and a delayer (delay, reordering, loss) and TEE rules (duplication)")
	}
	return nil
}

// startFleets starts the fleets' dispensers: the KV fleet ("": subjects
// uid.*, cfg.Dispensers of them, d0..) and the MySQL one ("my": uidmy.*,
// two, e0 and e1). The first of each fleet creates its bucket or tables;
// once every first one serves, the others start together. The fleets
// start side by side: most of a start is waiting for a durable claim.
func (r *run) startFleets(ctx context.Context, fleets []string) error {
	byFleet := make([][]*dispenser, len(fleets))
	for _, first := range []bool{true, false} {
		for k, fleet := range fleets {
			from, to := 0, 1
			if !first {
				from, to = 1, r.fleetSize(fleet)
			}
			for i := from; i < to; i++ {
				d, err := r.addDispenser(ctx, fleet, i)
				if err != nil {
					return err
				}
				byFleet[k] = append(byFleet[k], d)
			}
		}
		for _, d := range r.dispensers {
			if err := waitFor(ctx, 90*time.Second, d.serving); err != nil {
				return fmt.Errorf("faults: dispenser %s not serving: %w (log %s)", d.name, err, d.current().logPath)
			}
		}
	}
	// In fleet order (d0.., e0..), as the schedule draws them.
	r.dispensers = slices.Concat(byFleet...)
	for k, fleet := range fleets {
		r.logf("%d dispensers of fleet %q serving", len(byFleet[k]), fleet)
	}
	return nil
}

func (r *run) fleetSize(fleet string) int {
	if fleet == "my" {
		return 2
	}
	return r.cfg.Dispensers
}

// addDispenser starts dispenser i of a fleet in a host of its own.
func (r *run) addDispenser(ctx context.Context, fleet string, i int) (*dispenser, error) {
	cfg, c := r.cfg, r.cluster
	role := "d"
	if fleet == "my" {
		role = "e"
	}
	// W: a fault makes a store forget at most a hold (a power loss puts
	// back copies a hold old; a MySQL failover loses a hold's
	// transactions); on nodes that sync always a kill of every node has
	// still lost the last acknowledged write (docs/faults.md), so W stays.
	// A lease issues only reservations older than W, so the chunk covers
	// W, a renewal interval and the ahead bound (2 s).
	lossWindow := cfg.lossWindow()
	chunk := max(10*time.Second, lossWindow+cfg.LeaseTTL/3+5*time.Second)
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"DISPENSER_NATS_URL=" + c.urls(i%cfg.Nodes),
		"DISPENSER_LOG_FORMAT=json", "DISPENSER_LOG_LEVEL=debug",
		"DISPENSER_WORKER_KV_REPLICAS=3",
		"DISPENSER_SEQUENCES=orders,invoices",
		"DISPENSER_SEQUENCE_STEP=100", "DISPENSER_SEQUENCE_MAX_STEP=2000", "DISPENSER_SEQUENCE_TARGET=2s",
		"DISPENSER_LEASE_TTL=" + cfg.LeaseTTL.String(), "DISPENSER_RESERVE_CHUNK=" + chunk.String(),
		"DISPENSER_STORE_LOSS_WINDOW=" + lossWindow.String(),
		"DISPENSER_STORE_STARTUP_DEADLINE=120s", "DISPENSER_NATS_CONNECT_TIMEOUT=60s",
		"DISPENSER_MAX_LANES=2",
		"DISPENSER_NATS_PING_INTERVAL=" + cfg.PingInterval.String(),
	}
	prefix := "uid"
	if fleet == "my" {
		env = append(env, "DISPENSER_MYSQL_DSN="+r.mysql.dsn(), "DISPENSER_SUBJECT_PREFIX=uidmy", "DISPENSER_QUEUE_GROUP=uidmy")
		prefix = "uidmy"
	}
	d, err := newDispenser(ctx, r.network, fmt.Sprintf("%s%d", role, i), prefix, cfg.Dispenser, cfg.Dir, env, r.unexpectedExit)
	if err != nil {
		return nil, err
	}
	r.dispensers = append(r.dispensers, d)
	if fleet == "my" {
		r.mysql.clients = append(r.mysql.clients, d.host)
	}
	return d, d.start()
}

func (r *run) unexpectedExit(p *proc, err error) {
	r.mu.Lock()
	r.exits = append(r.exits, fmt.Sprintf("%s %s: %v (log %s)", time.Now().UTC().Format(time.TimeOnly), p.name, err, p.logPath))
	r.mu.Unlock()
	r.logf("unexpected exit of %s: %v", p.name, err)
	if r.cluster != nil {
		for _, n := range r.cluster.nodes {
			if n.current() == p {
				go func() {
					time.Sleep(time.Second)
					if n.current() == p {
						if err := n.start(); err != nil {
							r.logf("restart %s: %v", n.name, err)
						}
					}
				}()
			}
		}
	}
	for _, d := range r.dispensers {
		if d.current() == p {
			// Back in its place, as a supervisor would: after a second.
			go func() {
				time.Sleep(time.Second)
				if d.current() == p {
					if err := d.start(); err != nil {
						r.logf("restart %s: %v", d.name, err)
					}
				}
			}()
		}
	}
}

// waitFor polls cond every 100 ms until it holds or within passes.
func waitFor(ctx context.Context, within time.Duration, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", within)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// schedule injects one fault after another, each after a quiet gap,
// until the duration is over and every kind was injected at least once.
func (r *run) schedule(ctx context.Context) {
	end := time.Now().Add(r.cfg.Duration)
	// Each kind in turn in a shuffled order, reshuffled each round, so
	// that a short run still has every kind.
	var order []string
	rounds := 0
	for (time.Now().Before(end) || rounds == 1 && len(order) > 0) && ctx.Err() == nil {
		if len(order) == 0 {
			rounds++
			order = slices.Clone(r.cfg.Kinds)
			r.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		kind := order[0]
		order = order[1:]
		if err := sleep(ctx, r.gap()); err != nil {
			return
		}
		p, err := r.inject(ctx, kind)
		if err != nil {
			r.logf("%s: %v", kind, err)
			if p.Kind == "" {
				continue
			}
		}
		r.mu.Lock()
		r.proofs = append(r.proofs, p)
		r.mu.Unlock()
		r.logf("%s %s: %s (proven %v)", p.Kind, p.What, p.Proof, p.Proven)
	}
}

// gap is the quiet time before the next fault: longer than the recovery
// period for a share AloneShare of the faults, else HoldMax/6 to /3.
func (r *run) gap() time.Duration {
	if r.cfg.AloneShare > 0 && r.rng.Float64() < r.cfg.AloneShare {
		rec := r.cfg.recovery()
		return r.between(rec, rec+r.cfg.HoldMax/3)
	}
	return r.between(r.cfg.HoldMax/6, r.cfg.HoldMax/3)
}

// hold is how long a fault is held.
func (r *run) hold() time.Duration {
	return r.between(r.cfg.HoldMax/3, r.cfg.HoldMax)
}

// between is a random duration in [lo, hi].
func (r *run) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.rng.Int64N(int64(hi-lo)+1))
}

func (r *run) inject(ctx context.Context, kind string) (Proof, error) {
	switch kind {
	case KindPartition:
		return r.partition(ctx)
	case KindNetem:
		return r.linkFault(ctx)
	case KindPause:
		return r.pause(ctx)
	case KindKill:
		return r.kill(ctx)
	case KindPowerLoss:
		return r.powerLoss(ctx)
	case KindClockStep:
		return r.clockStep(ctx)
	case KindMySQL:
		if r.mysql != nil {
			return r.mysqlFailover(ctx)
		}
	}
	return Proof{}, fmt.Errorf("no such fault kind %q", kind)
}

func (r *run) stopClients() {
	for _, c := range r.clients {
		if err := c.stop(30 * time.Second); err != nil {
			r.logf("%v", err)
		}
	}
}

func (r *run) stopDispensers() {
	for _, d := range r.dispensers {
		if p := d.current(); p != nil && p.alive() {
			if err := p.stop(20 * time.Second); err != nil {
				r.logf("%v", err)
			}
		}
	}
}

// stopAll kills whatever still runs (an error or a cancelled run).
func (r *run) stopAll() {
	for _, c := range r.clients {
		if c.alive() {
			c.kill()
		}
	}
	for _, d := range r.dispensers {
		if p := d.current(); p != nil && p.alive() {
			p.kill()
		}
	}
	if r.cluster != nil {
		r.cluster.shutdown()
	}
	if r.mysql != nil {
		r.mysql.shutdown()
	}
}

func (r *run) summarize() (*Summary, error) {
	var ops []history.Op
	for _, h := range r.histories {
		o, err := history.ReadFile(h)
		if err != nil {
			return nil, err
		}
		ops = append(ops, o...)
	}
	var logs []check.Log
	for _, d := range r.dispensers {
		logs = append(logs, d.allLogs()...)
	}
	r.mu.Lock()
	proofs := slices.Clone(r.proofs)
	exits := slices.Clone(r.exits)
	r.mu.Unlock()
	var windows []check.Window
	for _, p := range proofs {
		windows = append(windows, check.Window{Kind: p.Kind, What: p.What, Start: p.Start, End: p.End})
	}
	recovery := r.cfg.recovery()
	res := check.Check(check.Input{Ops: ops, Logs: logs, Windows: windows, Layout: uidcore.DefaultLayout(), Recovery: recovery})
	s := &Summary{Seed: r.cfg.Seed, Duration: r.cfg.Duration.String(), Faults: map[string]int{}, Proofs: proofs,
		Check: res, Dir: r.cfg.Dir, Exits: exits, Load: loadAverage(), Recovery: Duration(recovery)}
	s.Sync = "default"
	if r.cfg.SyncAlways {
		s.Sync = "always"
	}
	for _, k := range []string{KindPartition, KindNetem, KindPowerLoss, KindMySQL, KindClockStep, KindPause, KindKill} {
		s.Faults[k] = 0
	}
	for _, p := range proofs {
		s.Faults[p.Kind]++
		if !p.Proven {
			s.Unproven++
		}
	}
	s.IDs.Acknowledged, s.IDs.Duplicated = res.IDs.Acknowledged, res.IDs.Duplicated
	s.Numbers.Acknowledged, s.Numbers.Duplicated = res.Numbers.Acknowledged, res.Numbers.Duplicated
	s.Calls.OK, s.Calls.Failed, s.Calls.Unknown = res.Calls.OK, res.Calls.Failed, res.Calls.Unknown
	s.LeaseOverlaps, s.SegmentOverlaps = len(res.LeaseOverlaps), len(res.SegmentOverlaps)
	s.LeaseClaims, s.Segments = res.Claims, res.Segments
	s.Passed = res.Valid && s.Unproven == 0 && res.Calls.OK > 0
	return s, nil
}

// Recheck runs the checker again on a finished run's work directory and
// summary (its histories, the dispensers' logs, the faults' windows):
// for a checker changed after the run.
func Recheck(dir string, s *Summary) (*check.Result, error) {
	hists, _ := filepath.Glob(filepath.Join(dir, "history-*.jsonl"))
	var ops []history.Op
	for _, h := range hists {
		o, err := history.ReadFile(h)
		if err != nil {
			return nil, err
		}
		ops = append(ops, o...)
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "dispenser-*-*.log"))
	var logs []check.Log
	for _, p := range paths {
		// dispenser-d0-2.log: place d0, its second process.
		parts := strings.Split(strings.TrimSuffix(filepath.Base(p), ".log"), "-")
		if len(parts) != 3 {
			continue
		}
		fleet := "uid"
		if strings.HasPrefix(parts[1], "e") {
			fleet = "uidmy"
		}
		logs = append(logs, check.Log{Process: parts[1] + "#" + parts[2], Path: p, Fleet: fleet})
	}
	var windows []check.Window
	for _, p := range s.Proofs {
		windows = append(windows, check.Window{Kind: p.Kind, What: p.What, Start: p.Start, End: p.End})
	}
	return check.Check(check.Input{Ops: ops, Logs: logs, Windows: windows, Layout: uidcore.DefaultLayout(), Recovery: time.Duration(s.Recovery)}), nil
}

// WriteSummary writes the summary as indented JSON.
func WriteSummary(path string, s *Summary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o640)
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// restartNodes kills every node and starts it again (its store kept).
func (r *run) restartNodes(ctx context.Context) error {
	for _, n := range r.cluster.nodes {
		if p := n.current(); p != nil && p.alive() {
			p.kill()
		}
	}
	for _, n := range r.cluster.nodes {
		if err := n.start(); err != nil {
			return err
		}
	}
	return r.cluster.waitHealthy(ctx, 90*time.Second)
}

var errNoTarget = errors.New("faults: no target for the fault")
