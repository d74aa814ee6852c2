package soak

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// cluster is a NATS cluster with JetStream, its nodes embedded in this
// process. A node keeps its ports and store across restarts, so clients
// and routes find it again.
type cluster struct {
	name  string
	nodes []*clusterNode
}

// clusterOptions are the nodes' settings the soak varies.
type clusterOptions struct {
	// writeDeadline is the nodes' write_deadline (0: nats-server's
	// default, 10s): how long a node blocks writing to a connection that
	// does not read (a paused dispenser) before it drops it as a slow
	// consumer.
	writeDeadline time.Duration
}

// serverLog sends a node's log to the soak's log file.
type serverLog struct{ log *slog.Logger }

func (l serverLog) Noticef(format string, v ...any) { l.log.Info(fmt.Sprintf(format, v...)) }
func (l serverLog) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l serverLog) Fatalf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l serverLog) Errorf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l serverLog) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l serverLog) Tracef(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }

type clusterNode struct {
	name        string
	host        string
	port        int // client port
	clusterPort int
	storeDir    string
	routes      []*url.URL
	log         *slog.Logger
	opts        clusterOptions

	mu  sync.Mutex
	srv *server.Server
}

// startCluster starts n nodes on free loopback ports with their stores
// under dir and waits until JetStream is healthy on every node.
func startCluster(ctx context.Context, dir string, n int, opts clusterOptions, log *slog.Logger) (*cluster, error) {
	c := &cluster{name: "uid-soak"}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	var routes []*url.URL
	for i := range n {
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[n+i]))})
	}
	for i := range n {
		c.nodes = append(c.nodes, &clusterNode{
			name:        fmt.Sprintf("soak-n%d", i),
			host:        "127.0.0.1",
			port:        ports[i],
			clusterPort: ports[n+i],
			storeDir:    filepath.Join(dir, fmt.Sprintf("n%d", i)),
			routes:      routes,
			log:         log.With("nats_node", fmt.Sprintf("soak-n%d", i)),
			opts:        opts,
		})
	}
	// Start every node before waiting: JetStream's meta group needs a
	// quorum to become healthy.
	for _, node := range c.nodes {
		if err := node.start(c.name); err != nil {
			c.shutdown()
			return nil, err
		}
	}
	for _, node := range c.nodes {
		if err := node.waitHealthy(ctx); err != nil {
			c.shutdown()
			return nil, err
		}
	}
	c.settle(ctx)
	return c, nil
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
			n.mu.Lock()
			if n.srv != nil {
				routes += n.srv.NumRoutes()
			}
			n.mu.Unlock()
		}
		if routes != last {
			last, stableSince = routes, time.Now()
		} else if time.Since(stableSince) >= time.Second {
			return
		}
		time.Sleep(50 * time.Millisecond)
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

func (n *clusterNode) url() string {
	return "nats://" + net.JoinHostPort(n.host, strconv.Itoa(n.port))
}

func (n *clusterNode) start(clusterName string) error {
	opts := &server.Options{
		ServerName: n.name,
		Host:       n.host,
		Port:       n.port,
		JetStream:  true,
		StoreDir:   n.storeDir,
		NoSigs:     true,
		// Clients and routes alike.
		WriteDeadline: n.opts.writeDeadline,
		Cluster: server.ClusterOpts{
			Name:          clusterName,
			Host:          n.host,
			Port:          n.clusterPort,
			WriteDeadline: n.opts.writeDeadline,
		},
		Routes: n.routes,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("soak: nats node %s: %w", n.name, err)
	}
	srv.SetLoggerV2(serverLog{n.log}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(20 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("soak: nats node %s not accepting connections after 20s", n.name)
	}
	n.mu.Lock()
	n.srv = srv
	n.mu.Unlock()
	return nil
}

// waitHealthy waits until the node's JetStream is current with the
// cluster (its healthz says ok).
func (n *clusterNode) waitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last string
	for {
		n.mu.Lock()
		srv := n.srv
		n.mu.Unlock()
		if srv != nil {
			st := srv.Healthz(nil)
			if st.Status == "ok" {
				return nil
			}
			last = st.Error
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("soak: nats node %s not healthy: %s (%w)", n.name, last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (n *clusterNode) stop() {
	n.mu.Lock()
	srv := n.srv
	n.srv = nil
	n.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// restart shuts node i down, keeps it down for down, starts it again on
// the same ports and store and waits until it is healthy.
func (c *cluster) restart(ctx context.Context, i int, down time.Duration) error {
	n := c.nodes[i]
	n.stop()
	select {
	case <-ctx.Done():
	case <-time.After(down):
	}
	// The ports may linger briefly after a shutdown: retry the start.
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if err = n.start(c.name); err == nil {
			return n.waitHealthy(ctx)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return err
}

func (c *cluster) shutdown() {
	for _, n := range c.nodes {
		n.stop()
	}
}
