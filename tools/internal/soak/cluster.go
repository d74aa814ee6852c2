package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// cluster is a NATS cluster with JetStream, each node its own nats-server
// process, so that a fault is what an operator meets: SIGKILL (no
// goodbye to routes or clients, a store cut mid-write), SIGSTOP (a node
// that holds its connections open and answers nothing). A node keeps its
// ports, configuration file and store across restarts, so clients and
// routes find it again and it rejoins with its data.
type cluster struct {
	name  string
	bin   string // the nats-server binary
	nodes []*clusterNode
}

// clusterOptions are the nodes' settings the soak varies.
type clusterOptions struct {
	// writeDeadline is the nodes' write_deadline (0: nats-server's
	// default, 10s): how long a node blocks writing to a connection that
	// does not read (a paused dispenser) before it drops it as a slow
	// consumer.
	writeDeadline time.Duration
	// pingInterval and pingMax, for clients and routes alike: a peer
	// that answers no ping for pingInterval × pingMax is dropped. Short,
	// so that a paused node (or dispenser) is noticed within seconds.
	pingInterval time.Duration
	pingMax      int
	// onCrash is told of a node that exits without being stopped (nil:
	// nobody): the soak counts it as a violation.
	onCrash func(string)
	// name is the cluster's name (default "uid-soak"); in regions mode
	// it is the region's, and its nodes are named after it.
	name string
	// gateway, when set, joins the cluster to others (regions mode).
	gateway *gatewayOptions
}

// gatewayOptions join a cluster's nodes to other clusters by gateways:
// node i listens on listen[i] and advertises advertise[i] (a proxy in
// front of it, so that the other clusters' gossip never learns the
// direct address and a cut of the proxies cuts every link); remotes are
// the other clusters' advertised URLs, by cluster name.
type gatewayOptions struct {
	listen    []int
	advertise []string
	remotes   map[string][]string
}

// defaultPing is the nodes' ping interval and count: a silent peer is
// dropped after about 3 s. Shorter would risk dropping healthy routes on
// a loaded 2-core machine (the soak has seen its own process stall 3 s).
const (
	defaultPingInterval = time.Second
	defaultPingMax      = 3
)

func (o clusterOptions) withDefaults() clusterOptions {
	if o.pingInterval <= 0 {
		o.pingInterval = defaultPingInterval
	}
	if o.pingMax <= 0 {
		o.pingMax = defaultPingMax
	}
	if o.name == "" {
		o.name = "uid-soak"
	}
	return o
}

// silence is how long a peer may be silent before the nodes drop it.
func (o clusterOptions) silence() time.Duration {
	o = o.withDefaults()
	return o.pingInterval * time.Duration(o.pingMax)
}

type clusterNode struct {
	name        string
	index       int
	host        string
	port        int // client port
	clusterPort int
	httpPort    int // monitoring (healthz, routez)
	dir         string
	confPath    string
	logPath     string

	onCrash func(string)

	mu     sync.Mutex
	proc   *exec.Cmd
	exited chan struct{} // closed when proc has exited
	paused bool
}

// startCluster starts n nodes on free loopback ports with their stores
// and logs under dir and waits until JetStream is healthy on every node.
func startCluster(ctx context.Context, bin, dir string, n int, opts clusterOptions) (*cluster, error) {
	c, err := newCluster(bin, dir, n, opts)
	if err != nil {
		return nil, err
	}
	if err := c.startNodes(); err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// newCluster lays out n nodes on free loopback ports, their
// configuration files, stores and logs under dir, without starting them.
func newCluster(bin, dir string, n int, opts clusterOptions) (*cluster, error) {
	if bin == "" {
		return nil, errors.New("soak: no nats-server binary")
	}
	opts = opts.withDefaults()
	c := &cluster{name: opts.name, bin: bin}
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("%q", "nats-route://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[n+i]))))
	}
	prefix := "soak"
	if opts.gateway != nil {
		prefix = opts.name
	}
	for i := range n {
		node := &clusterNode{
			name:        fmt.Sprintf("%s-n%d", prefix, i),
			index:       i,
			host:        "127.0.0.1",
			port:        ports[i],
			clusterPort: ports[n+i],
			httpPort:    ports[2*n+i],
			dir:         filepath.Join(dir, fmt.Sprintf("n%d", i)),
			onCrash:     opts.onCrash,
		}
		node.confPath = filepath.Join(node.dir, "nats-server.conf")
		node.logPath = filepath.Join(dir, fmt.Sprintf("nats-%d.log", i))
		if err := os.MkdirAll(node.dir, 0o750); err != nil {
			return nil, fmt.Errorf("soak: %w", err)
		}
		if err := os.WriteFile(node.confPath, []byte(node.config(c.name, routes, opts)), 0o640); err != nil {
			return nil, fmt.Errorf("soak: %w", err)
		}
		c.nodes = append(c.nodes, node)
	}
	return c, nil
}

// startNodes starts every node without waiting for JetStream: its meta
// group needs a quorum, of this cluster's nodes or (joined by gateways)
// of every cluster's, to become healthy.
func (c *cluster) startNodes() error {
	for _, node := range c.nodes {
		if err := node.start(c.bin); err != nil {
			c.shutdown()
			return err
		}
	}
	return nil
}

// waitReady waits until every node's JetStream is healthy and the routes
// have settled.
func (c *cluster) waitReady(ctx context.Context) error {
	for _, node := range c.nodes {
		if err := node.waitHealthy(ctx, 60*time.Second); err != nil {
			c.shutdown()
			return err
		}
	}
	c.settle(ctx)
	return nil
}

// config is the node's configuration file. no_advertise keeps the nodes
// from telling clients the other nodes' URLs: a dispenser whose only URL
// is a proxy in front of its node must not reconnect around the proxy
// when the soak cuts it. Everyone else is given every node's URL.
func (n *clusterNode) config(cluster string, routes []string, o clusterOptions) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	timing := func(indent string) {
		p("%sping_interval: %q", indent, o.pingInterval.String())
		p("%sping_max: %d", indent, o.pingMax)
		if o.writeDeadline > 0 {
			p("%swrite_deadline: %q", indent, o.writeDeadline.String())
		}
	}
	p("server_name: %q", n.name)
	p("listen: %q", net.JoinHostPort(n.host, strconv.Itoa(n.port)))
	p("http: %q", net.JoinHostPort(n.host, strconv.Itoa(n.httpPort)))
	timing("")
	p("jetstream {")
	p("  store_dir: %q", filepath.Join(n.dir, "store"))
	p("  sync_interval: always") // as every deployment must (docs/operations.md)
	p("}")
	p("cluster {")
	p("  name: %q", cluster)
	p("  listen: %q", net.JoinHostPort(n.host, strconv.Itoa(n.clusterPort)))
	p("  routes: [%s]", strings.Join(routes, ", "))
	p("  no_advertise: true")
	timing("  ")
	p("}")
	if g := o.gateway; g != nil {
		p("gateway {")
		p("  name: %q", cluster)
		p("  listen: %q", net.JoinHostPort(n.host, strconv.Itoa(g.listen[n.index])))
		p("  advertise: %q", g.advertise[n.index])
		p("  gateways: [")
		for _, name := range sortedKeys(g.remotes) {
			var urls []string
			for _, u := range g.remotes[name] {
				urls = append(urls, fmt.Sprintf("%q", u))
			}
			p("    {name: %q, urls: [%s]}", name, strings.Join(urls, ", "))
		}
		p("  ]")
		p("}")
	}
	return b.String()
}

// settle waits (up to 10s) until the route connections between the nodes
// stop changing for a second. Right after start-up, nodes drop duplicate
// routes, and a JetStream API request crossing one of those may go
// unanswered (a dispenser creating its stream then times out).
func (c *cluster) settle(ctx context.Context) {
	deadline := time.Now().Add(10 * time.Second)
	last, stableSince := -1, time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		routes := 0
		for _, n := range c.nodes {
			routes += n.numRoutes(ctx)
		}
		if routes != last {
			last, stableSince = routes, time.Now()
		} else if time.Since(stableSince) >= time.Second {
			return
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// freePorts finds n free loopback TCP ports. Another process could take
// one before the server binds it; on a test machine that does not happen
// in practice.
func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("soak: find a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// URL is the client URL of node i.
func (c *cluster) URL(i int) string { return c.nodes[i].url() }

// URLs lists every node's client URL, node first first: a connection
// made with it goes to node first when it can and fails over to the
// others (no_advertise: the nodes do not tell clients about each other).
func (c *cluster) URLs(first int) string {
	var urls []string
	for k := range c.nodes {
		urls = append(urls, c.URL((first+k)%len(c.nodes)))
	}
	return strings.Join(urls, ",")
}

// nodeByName is the index of the node named name, -1 when none is.
func (c *cluster) nodeByName(name string) int {
	for i, n := range c.nodes {
		if n.name == name {
			return i
		}
	}
	return -1
}

func (n *clusterNode) url() string {
	return "nats://" + net.JoinHostPort(n.host, strconv.Itoa(n.port))
}

// start starts the node's process, its output appended to its log, and
// waits until it accepts connections.
func (n *clusterNode) start(bin string) error {
	logFile, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	cmd := exec.Command(bin, "-c", n.confPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: a Ctrl-C of the soak must not reach it
	// before the soak stops it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("soak: start nats node %s: %w", n.name, err)
	}
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		logFile.Close()
		n.mu.Lock()
		crashed := n.proc == cmd // stop clears proc before it signals
		n.mu.Unlock()
		close(exited)
		if crashed && n.onCrash != nil {
			n.onCrash(fmt.Sprintf("nats node %s (pid %d) exited without being told to: %v (log %s)", n.name, cmd.Process.Pid, err, n.logPath))
		}
	}()
	n.mu.Lock()
	n.proc, n.exited, n.paused = cmd, exited, false
	n.mu.Unlock()

	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(n.host, strconv.Itoa(n.port)), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("soak: nats node %s exited at start-up (log %s)", n.name, n.logPath)
		case <-time.After(50 * time.Millisecond):
		}
	}
	n.kill()
	return fmt.Errorf("soak: nats node %s not accepting connections after 20s (log %s)", n.name, n.logPath)
}

// monitor GETs a path of the node's monitoring port.
func (n *clusterNode) monitor(ctx context.Context, path string, into any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(n.host, strconv.Itoa(n.httpPort))+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(into)
}

func (n *clusterNode) numRoutes(ctx context.Context) int {
	var rz struct {
		NumRoutes int `json:"num_routes"`
	}
	if _, err := n.monitor(ctx, "/routez", &rz); err != nil {
		return -1
	}
	return rz.NumRoutes
}

// waitHealthy waits until the node's JetStream is current with the
// cluster (its healthz says ok).
func (n *clusterNode) waitHealthy(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	last := "no answer"
	for {
		var hz struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		code, err := n.monitor(ctx, "/healthz", &hz)
		switch {
		case err == nil && code == http.StatusOK && hz.Status == "ok":
			return nil
		case err == nil:
			last = hz.Error
		default:
			last = err.Error()
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return fmt.Errorf("soak: nats node %s not healthy: %s (%w)", n.name, last, ctx.Err())
		}
	}
}

// signal sends sig to the node's process (a no-op when it is not running).
func (n *clusterNode) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return nil
	}
	switch sig {
	case syscall.SIGSTOP:
		n.paused = true
	case syscall.SIGCONT:
		n.paused = false
	}
	if err := n.proc.Process.Signal(sig); err != nil {
		return fmt.Errorf("soak: %s to nats node %s: %w", sig, n.name, err)
	}
	return nil
}

// kill SIGKILLs the node and waits until the process is gone.
func (n *clusterNode) kill() {
	n.stop(syscall.SIGKILL, 0)
}

// stop sends sig (after SIGCONT when paused) and waits for the process to
// exit; after within (0: never) it is killed.
func (n *clusterNode) stop(sig syscall.Signal, within time.Duration) {
	n.mu.Lock()
	proc, exited, paused := n.proc, n.exited, n.paused
	n.proc = nil
	n.mu.Unlock()
	if proc == nil {
		return
	}
	if paused {
		_ = proc.Process.Signal(syscall.SIGCONT)
	}
	_ = proc.Process.Signal(sig)
	if within > 0 {
		select {
		case <-exited:
			return
		case <-time.After(within):
			_ = proc.Process.Signal(syscall.SIGKILL)
		}
	}
	<-exited
}

// killAndRestart SIGKILLs node i, keeps it down for down, starts it again
// on the same ports and store and waits until it is healthy. It returns
// when the restarted node first accepted a connection (zero when it did
// not).
func (c *cluster) killAndRestart(ctx context.Context, i int, down time.Duration) (accepting time.Time, err error) {
	n := c.nodes[i]
	n.kill()
	sleep(ctx, down)
	// The ports may linger briefly after the process is gone: retry.
	for attempt := 0; attempt < 20 && ctx.Err() == nil; attempt++ {
		if err = n.start(c.bin); err == nil {
			return time.Now(), n.waitHealthy(ctx, 60*time.Second)
		}
		sleep(ctx, 250*time.Millisecond)
	}
	if err == nil {
		err = ctx.Err() // the run ended before the node was started again
	}
	return time.Time{}, err
}

// pause SIGSTOPs node i for d, then SIGCONTs it and waits until it is
// healthy again.
func (c *cluster) pause(ctx context.Context, i int, d time.Duration) error {
	n := c.nodes[i]
	if err := n.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	sleep(ctx, d)
	if err := n.signal(syscall.SIGCONT); err != nil {
		return err
	}
	return n.waitHealthy(ctx, 60*time.Second)
}

// shutdown stops every node gracefully (SIGTERM, killed after 10 s).
func (c *cluster) shutdown() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() { n.stop(syscall.SIGTERM, 10*time.Second) })
	}
	wg.Wait()
}

// streamLeaders names the node that leads each of streams, found through
// the JetStream API (stream info's cluster leader) on nc; a stream whose
// info does not come is left out.
func streamLeaders(ctx context.Context, nc *nats.Conn, streams ...string) map[string]string {
	out := map[string]string{}
	js, err := jetstream.New(nc)
	if err != nil {
		return out
	}
	for _, name := range streams {
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := js.Stream(ictx, name)
		if err == nil {
			var info *jetstream.StreamInfo
			if info, err = s.Info(ictx); err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
				out[name] = info.Cluster.Leader
			}
		}
		cancel()
	}
	return out
}
