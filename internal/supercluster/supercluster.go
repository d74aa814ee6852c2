// Package supercluster runs a NATS supercluster for tests: one
// nats-server process per cluster (a region), clustered JetStream, the
// clusters joined by gateways through TCP proxies that a test cuts,
// heals and delays like a WAN.
//
// Each gateway advertises its proxy, so the gossip that tells servers of
// each other's gateways never hands out the direct address: every
// gateway connection goes through a proxy (REFERENCE.md, "NATS
// superclusters"). The proxy in front of a cluster's gateway carries both
// the other clusters' connections to it; Cut and Delay act on all of
// them.
package supercluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/faultproxy"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
)

// BinEnv names the nats-server binary for superclusters. Without it the
// first of $(go env GOPATH)/bin/nats-server and the one on PATH that is
// at least 2.10 is used (the machine's 2.9 runs one-node clustered
// JetStream unreliably); install one with
// `go install github.com/nats-io/nats-server/v2@v2.15.2`.
const BinEnv = "UID_TEST_NATS_SUPERCLUSTER_SERVER"

// Cluster is one region: a one-node cluster with JetStream.
type Cluster struct {
	Name   string
	URL    string                 // client URL
	Server *testenv.ServerProcess // the node
	proxy  *faultproxy.Proxy      // in front of its gateway
	conns  map[string]*nats.Conn  // probes, by purpose
}

// Supercluster is the clusters joined by gateways.
type Supercluster struct {
	Clusters []*Cluster
	Version  string
}

// Cluster is the cluster called name.
func (s *Supercluster) Cluster(name string) *Cluster {
	for _, c := range s.Clusters {
		if c.Name == name {
			return c
		}
	}
	panic("supercluster: no cluster " + name)
}

// Options adjusts the servers Start runs.
type Options struct {
	// Config is appended to every server's configuration, say an
	// authorization block under test. The package's own connections
	// (Connect, the link probes) carry no credentials: a Config with
	// users must make one with every permission its no_auth_user.
	Config string
}

// Start runs one cluster per name, joined by gateways, and waits until
// every pair of clusters routes requests to each other and JetStream
// answers in each. The servers stop when the test ends.
func Start(t testing.TB, names ...string) *Supercluster {
	t.Helper()
	return StartWith(t, Options{}, names...)
}

// StartWith is Start with the servers adjusted by opts.
func StartWith(t testing.TB, opts Options, names ...string) *Supercluster {
	t.Helper()
	bin := binary(t)
	sc := &Supercluster{Version: testenv.NATSServerVersion(t, bin)}
	// Every server's gateway, cluster and client port, distinct (a port
	// picked, released and picked again for another listener made a
	// server fail at start: "address already in use").
	ports := freePorts(t, 3*len(names))
	gatewayPorts, clusterPorts, clientPorts := map[string]int{}, map[string]int{}, map[string]int{}
	for i, name := range names {
		gatewayPorts[name], clusterPorts[name], clientPorts[name] = ports[3*i], ports[3*i+1], ports[3*i+2]
		proxy := faultproxy.NewProxy(t, "127.0.0.1:"+strconv.Itoa(gatewayPorts[name]))
		sc.Clusters = append(sc.Clusters, &Cluster{Name: name, proxy: proxy, conns: map[string]*nats.Conn{}})
	}
	for _, c := range sc.Clusters {
		dir := t.TempDir()
		conf := filepath.Join(dir, "server.conf")
		if err := os.WriteFile(conf, []byte(sc.config(c, dir, gatewayPorts[c.Name], clusterPorts[c.Name])+opts.Config), 0o600); err != nil {
			t.Fatal(err)
		}
		c.Server = testenv.StartNATSServer(t, bin, sc.Version, dir, "-c", conf, "-a", "127.0.0.1", "-p", strconv.Itoa(clientPorts[c.Name]))
		c.URL = c.Server.URL
	}
	sc.WaitLinked(t, 30*time.Second)
	for _, c := range sc.Clusters {
		nc := c.Connect(t)
		js, _ := jetstream.New(nc)
		testenv.WaitFor(t, 30*time.Second, "JetStream in cluster "+c.Name, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := js.AccountInfo(ctx)
			return err == nil
		})
	}
	return sc
}

// config is the server configuration of c's one node: clustered
// JetStream (a route to its own cluster port makes a one-node cluster)
// and a gateway advertising c's proxy, dialling the others' proxies.
func (s *Supercluster) config(c *Cluster, dir string, gatewayPort, clusterPort int) string {
	var gateways []string
	for _, o := range s.Clusters {
		if o != c {
			gateways = append(gateways, fmt.Sprintf("{name: %q, urls: [%q]}", o.Name, "nats://"+o.proxy.Addr()))
		}
	}
	return fmt.Sprintf(`server_name: %q
jetstream { store_dir: %q }
cluster { name: %q, listen: "127.0.0.1:%d", routes: ["nats-route://127.0.0.1:%d"] }
gateway {
  name: %q
  listen: "127.0.0.1:%d"
  advertise: %q
  gateways: [%s]
}
`, c.Name+"-1", filepath.Join(dir, "js"), c.Name, clusterPort, clusterPort, c.Name, gatewayPort, c.proxy.Addr(), strings.Join(gateways, ", "))
}

// Connect is a client connection to the cluster, closed when the test
// ends.
func (c *Cluster) Connect(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(c.URL, nats.Name("supercluster test "+c.Name), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("supercluster: connect to %s: %v", c.Name, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Cut cuts every gateway link (all proxies) and waits until no request
// crosses between any two clusters.
func (s *Supercluster) Cut(t testing.TB) {
	t.Helper()
	for _, c := range s.Clusters {
		c.proxy.Cut()
	}
	s.waitLinks(t, 30*time.Second, false)
}

// Heal restores the gateway links and waits until every pair routes
// requests again.
func (s *Supercluster) Heal(t testing.TB) {
	t.Helper()
	for _, c := range s.Clusters {
		c.proxy.Restore()
	}
	s.WaitLinked(t, 60*time.Second)
}

// Delay delays the gateway links by d each way (a round trip across a
// gateway takes 2d more).
func (s *Supercluster) Delay(d time.Duration) {
	for _, c := range s.Clusters {
		c.proxy.SetDelay(d)
	}
}

// WaitLinked waits until a request from each cluster reaches a
// responder that only the other cluster has.
func (s *Supercluster) WaitLinked(t testing.TB, within time.Duration) {
	t.Helper()
	s.waitLinks(t, within, true)
}

func (s *Supercluster) waitLinks(t testing.TB, within time.Duration, linked bool) {
	t.Helper()
	for _, from := range s.Clusters {
		for _, to := range s.Clusters {
			if from == to {
				continue
			}
			subject := "supercluster.probe." + to.Name
			responder := to.probe(t, "responder")
			if responder.conns["sub:"+subject] == nil {
				if _, err := responder.conns["responder"].Subscribe(subject, func(m *nats.Msg) { _ = m.Respond([]byte(to.Name)) }); err != nil {
					t.Fatal(err)
				}
				responder.conns["sub:"+subject] = responder.conns["responder"]
			}
			requester := from.probe(t, "requester").conns["requester"]
			state := map[bool]string{true: "linked", false: "cut"}[linked]
			testenv.WaitFor(t, within, fmt.Sprintf("gateway %s -> %s %s", from.Name, to.Name, state), func() bool {
				_, err := requester.Request(subject, nil, 500*time.Millisecond)
				return (err == nil) == linked
			})
		}
	}
}

// probe returns c with a probe connection for purpose opened.
func (c *Cluster) probe(t testing.TB, purpose string) *Cluster {
	t.Helper()
	if c.conns[purpose] == nil {
		c.conns[purpose] = c.Connect(t)
	}
	return c
}

// binary finds a nats-server of at least 2.10 (BinEnv).
func binary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv(BinEnv); bin != "" {
		return bin
	}
	var candidates []string
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		candidates = append(candidates, filepath.Join(strings.TrimSpace(string(out)), "bin", "nats-server"))
	}
	if p, err := exec.LookPath("nats-server"); err == nil {
		candidates = append(candidates, p)
	}
	for _, bin := range candidates {
		if out, err := exec.Command(bin, "--version").Output(); err == nil && atLeast210(string(out)) {
			return bin
		}
	}
	msg := fmt.Sprintf("supercluster: no nats-server of at least 2.10 (%s; tried %v): go install github.com/nats-io/nats-server/v2@v2.15.2", BinEnv, candidates)
	if os.Getenv(testenv.RequireNATSServerEnv) == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// atLeast210 reads "nats-server: v2.15.2".
func atLeast210(version string) bool {
	v := strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(version), "nats-server:")), "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (major > 2 || major == 2 && minor >= 10)
}

// freePorts is n distinct ports, each free a moment ago: the servers'
// ports must be known before they start (the proxies target the
// gateways'). Each is held until all are picked, so none is picked twice;
// another process could take one before its server starts, which then
// fails visibly.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("supercluster: no free port: %v", err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
