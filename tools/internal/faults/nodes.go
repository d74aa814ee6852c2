package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/netns"
)

// NATS ports: every node has an address of its own, so all use the same.
const (
	clientPort  = 4222
	clusterPort = 6222
	httpPort    = 8222
)

// node is one nats-server of the cluster, in a host of its own. It keeps
// its configuration and store across restarts.
type node struct {
	name  string // n0.. (its server_name)
	host  *netns.Host
	bin   string
	dir   string
	store string // JetStream's store directory
	conf  string
	log   string

	onExit func(*proc, error)

	mu         sync.Mutex
	proc       *proc
	syncAlways bool // the configuration in force
}

func (n *node) url() string { return fmt.Sprintf("nats://%s:%d", n.host.Addr, clientPort) }

// writeConfig writes the node's configuration, with JetStream's
// sync_interval: always when syncAlways, else nats-server's default
// (fsync every 2 minutes).
func (n *node) writeConfig(routes []string, syncAlways bool) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("server_name: %q", n.name)
	p("listen: \"%s:%d\"", n.host.Addr, clientPort)
	p("http: \"%s:%d\"", n.host.Addr, httpPort)
	// A silent peer (a paused node or dispenser) is dropped within ~3 s.
	p("ping_interval: \"1s\"")
	p("ping_max: 3")
	p("jetstream {")
	p("  store_dir: %q", n.store)
	if syncAlways {
		p("  sync_interval: always")
	}
	p("}")
	p("cluster {")
	p("  name: \"faults\"")
	p("  listen: \"%s:%d\"", n.host.Addr, clusterPort)
	p("  routes: [%s]", strings.Join(routes, ", "))
	p("  no_advertise: true")
	p("  ping_interval: \"1s\"")
	p("  ping_max: 3")
	p("}")
	n.mu.Lock()
	n.syncAlways = syncAlways
	n.mu.Unlock()
	return os.WriteFile(n.conf, []byte(b.String()), 0o640)
}

func (n *node) start() error {
	p, err := startProc(n.host, n.name, n.log, os.Environ(), n.onExit, n.bin, "-c", n.conf)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.proc = p
	n.mu.Unlock()
	return nil
}

func (n *node) current() *proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// get reads a monitoring endpoint of the node (from the harness's own
// address on the bridge).
func (n *node) get(ctx context.Context, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s:%d%s", n.host.Addr, httpPort, path), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(body, v)
}

// streamState is one stream's state as a node's /jsz reports it.
type streamState struct {
	Name     string
	LastSeq  uint64
	Messages uint64
	Leader   string
	Replicas []string // the other peers of the stream, as this node knows them
}

// jsz is the part of a node's /jsz?accounts=true&streams=true the
// harness reads: each stream's state in the node's own store, and the
// stream's cluster as the node knows it.
type jsz struct {
	AccountDetails []struct {
		StreamDetail []struct {
			Name    string `json:"name"`
			Cluster *struct {
				Leader   string `json:"leader"`
				Replicas []struct {
					Name string `json:"name"`
				} `json:"replicas"`
			} `json:"cluster"`
			State struct {
				Messages uint64 `json:"messages"`
				LastSeq  uint64 `json:"last_seq"`
			} `json:"state"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

func (j *jsz) streams() []streamState {
	var out []streamState
	for _, a := range j.AccountDetails {
		for _, s := range a.StreamDetail {
			st := streamState{Name: s.Name, LastSeq: s.State.LastSeq, Messages: s.State.Messages}
			if s.Cluster != nil {
				st.Leader = s.Cluster.Leader
				for _, r := range s.Cluster.Replicas {
					st.Replicas = append(st.Replicas, r.Name)
				}
			}
			out = append(out, st)
		}
	}
	return out
}

// streams reads the node's view of every stream.
func (n *node) streams(ctx context.Context) ([]streamState, error) {
	var j jsz
	if err := n.get(ctx, "/jsz?accounts=true&streams=true", &j); err != nil {
		return nil, err
	}
	return j.streams(), nil
}

// cluster is the run's NATS nodes.
type cluster struct {
	nodes  []*node
	routes []string
}

func newCluster(ctx context.Context, network *netns.Network, bin, dir string, n int, onExit func(*proc, error)) (*cluster, error) {
	c := &cluster{}
	for i := range n {
		h, err := network.AddHost(ctx, fmt.Sprintf("n%d", i))
		if err != nil {
			return nil, err
		}
		nd := &node{name: fmt.Sprintf("n%d", i), host: h, bin: bin, dir: filepath.Join(dir, fmt.Sprintf("n%d", i)), onExit: onExit}
		nd.store = filepath.Join(nd.dir, "store")
		nd.conf = filepath.Join(nd.dir, "nats-server.conf")
		nd.log = filepath.Join(dir, fmt.Sprintf("nats-%s.log", nd.name))
		if err := os.MkdirAll(nd.store, 0o750); err != nil {
			return nil, fmt.Errorf("faults: %w", err)
		}
		c.nodes = append(c.nodes, nd)
		c.routes = append(c.routes, fmt.Sprintf("\"nats-route://%s:%d\"", h.Addr, clusterPort))
	}
	for _, nd := range c.nodes {
		if err := nd.writeConfig(c.routes, false); err != nil {
			return nil, err
		}
		if err := nd.start(); err != nil {
			return nil, err
		}
	}
	return c, c.waitHealthy(ctx, 60*time.Second)
}

// urls lists every node's client URL, node first first.
func (c *cluster) urls(first int) string {
	var out []string
	for k := range c.nodes {
		out = append(out, c.nodes[(first+k)%len(c.nodes)].url())
	}
	return strings.Join(out, ",")
}

// waitHealthy waits until every node's JetStream answers healthy.
func (c *cluster) waitHealthy(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for _, n := range c.nodes {
		for {
			err := n.get(ctx, "/healthz?js-enabled-only=true", nil)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("faults: node %s not healthy after %s: %w (log %s)", n.name, within, err, n.log)
			}
			if err := sleep(ctx, 250*time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}

// leader is the node that leads the named stream, as the first node that
// answers says.
func (c *cluster) leader(ctx context.Context, stream string) (*node, error) {
	for _, n := range c.nodes {
		ss, err := n.streams(ctx)
		if err != nil {
			continue
		}
		for _, s := range ss {
			if s.Name == stream && s.Leader != "" {
				for _, m := range c.nodes {
					if m.name == s.Leader {
						return m, nil
					}
				}
			}
		}
	}
	return nil, fmt.Errorf("faults: no node names the leader of stream %s", stream)
}

// peers are the nodes holding the named stream, its leader first, as the
// leader reports them.
func (c *cluster) peers(ctx context.Context, stream string) ([]*node, error) {
	leader, err := c.leader(ctx, stream)
	if err != nil {
		return nil, err
	}
	ss, err := leader.streams(ctx)
	if err != nil {
		return nil, err
	}
	out := []*node{leader}
	for _, s := range ss {
		if s.Name != stream {
			continue
		}
		for _, name := range s.Replicas {
			for _, n := range c.nodes {
				if n.name == name {
					out = append(out, n)
				}
			}
		}
	}
	return out, nil
}

func (c *cluster) shutdown() {
	for _, n := range c.nodes {
		if p := n.current(); p != nil && p.alive() {
			p.kill() // SIGKILL ends a paused process too
		}
	}
}

// copyDir copies src to dst with cp -a (the store of a frozen node).
func copyDir(ctx context.Context, src, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "cp", "-a", src, dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("faults: cp -a %s %s: %w: %s", src, dst, err, out)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
