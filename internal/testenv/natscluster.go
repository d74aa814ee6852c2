package testenv

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// NATSCluster runs n nats-server processes of the binary bin (of
// version) as one cluster with clustered JetStream, each with its own
// store, with jetstream (say "sync_interval: always") added to every
// node's jetstream block. It returns the nodes; they stop when the test
// ends.
func NATSCluster(t testing.TB, bin, version string, n int, jetstream string) []*ServerProcess {
	t.Helper()
	ports, routes := clusterPorts(t, n)
	nodes := make([]*ServerProcess, n)
	for i := range nodes {
		dir := t.TempDir()
		conf := fmt.Sprintf("server_name: %q\njetstream { store_dir: %q\n%s\n}\ncluster { name: \"c\", listen: \"127.0.0.1:%d\", routes: [%s] }\n",
			fmt.Sprintf("n%d", i+1), filepath.Join(dir, "js"), jetstream, ports[i], strings.Join(routes, ", "))
		path := filepath.Join(dir, "server.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		nodes[i] = StartNATSServer(t, bin, version, dir, "-c", path, "-a", "127.0.0.1", "-p", "-1")
	}
	return nodes
}

// clusterPorts picks n distinct cluster ports and the routes to them
// (quoted for a config). Ports free a moment ago can repeat when the
// system hands a closed port out again, and nats-server refuses a
// duplicate route entry.
func clusterPorts(t testing.TB, n int) ([]int, []string) {
	t.Helper()
	ports := make([]int, 0, n)
	routes := make([]string, 0, n)
	taken := make(map[int]bool, n)
	for len(ports) < n {
		p := freeLoopbackPort(t)
		if taken[p] {
			continue
		}
		taken[p] = true
		ports = append(ports, p)
		routes = append(routes, fmt.Sprintf("%q", fmt.Sprintf("nats-route://127.0.0.1:%d", p)))
	}
	return ports, routes
}

// freeLoopbackPort is a port free a moment ago, for a cluster port that
// every node's routes must know before the nodes start.
func freeLoopbackPort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// ClusterNode is a node of NATSClusterNodes, restartable on its store.
type ClusterNode struct {
	*ServerProcess
	Name  string
	Dir   string // its directory: config, log, ports file
	Store string // its JetStream store directory ("" without JetStream)

	bin, version string
	args         []string
}

// Restart starts the node again (after Kill) on the same directory,
// store and cluster port; its client port is a new one.
func (n *ClusterNode) Restart(t testing.TB) {
	t.Helper()
	n.ServerProcess = StartNATSServer(t, n.bin, n.version, n.Dir, n.args...)
}

// NATSClusterNodes runs len(jetstream) nats-server processes of bin as one
// cluster; node i has JetStream with jetstream[i] added to its jetstream
// block, or no JetStream when jetstream[i] is "-" (a client connected to
// such a node stays connected whatever the JetStream nodes go through).
func NATSClusterNodes(t testing.TB, bin, version string, jetstream []string) []*ClusterNode {
	t.Helper()
	n := len(jetstream)
	ports, routes := clusterPorts(t, n)
	nodes := make([]*ClusterNode, n)
	for i := range nodes {
		node := &ClusterNode{Name: fmt.Sprintf("n%d", i+1), Dir: t.TempDir(), bin: bin, version: version}
		js := ""
		if jetstream[i] != "-" {
			node.Store = filepath.Join(node.Dir, "js")
			js = fmt.Sprintf("jetstream { store_dir: %q\n%s\n}\n", node.Store, jetstream[i])
		}
		conf := fmt.Sprintf("server_name: %q\n%scluster { name: \"c\", listen: \"127.0.0.1:%d\", routes: [%s] }\n",
			node.Name, js, ports[i], strings.Join(routes, ", "))
		path := filepath.Join(node.Dir, "server.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		node.args = []string{"-c", path, "-a", "127.0.0.1", "-p", "-1"}
		node.Restart(t)
		nodes[i] = node
	}
	return nodes
}
