package composecheck

import (
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/uid-dispenser/uid-dispenser/dispenser"
)

const regionsFile = "docker-compose.regions.yml"

// natsNode is a NATS service of the regions deployment with its
// configuration as nats-server's own parser reads it.
type natsNode struct {
	service string
	conf    string // the configuration file on the host
	opts    *server.Options
}

// TestRegionsCompose loads docker-compose.regions.yml and checks what a
// supercluster deployment needs: every service references what exists;
// every NATS node's configuration file loads with nats-server's parser
// (its NATS_NAME as server name), is clustered with JetStream and routes
// only to nodes of its own cluster, its gateway is named after its
// cluster and dials every other cluster's nodes; every dispenser's
// configuration loads with the dispenser's own parser, all share one map
// of regions, each names a region that is a cluster and reaches NATS only
// through its own region's nodes, and every region of the map has
// dispensers.
func TestRegionsCompose(t *testing.T) {
	t.Chdir(composeDir)
	project := load(t, regionsFile)
	known := dispenserVariables(t)
	nodes := map[string]natsNode{}    // by service
	clusters := map[string][]string{} // cluster name: its nodes' services
	for svc, s := range project.Services {
		checkService(t, svc, s, known, project.Services)
		if !strings.HasPrefix(svc, "nats-") {
			continue
		}
		n := natsNode{service: svc, conf: hostPath(t, s, natsConfigArg(t, svc, s))}
		mustExist(t, n.conf)
		t.Setenv("NATS_NAME", env(s, "NATS_NAME"))
		opts, err := server.ProcessConfigFile(n.conf)
		if err != nil {
			t.Fatalf("%s: nats-server does not load %s: %v", svc, n.conf, err)
		}
		n.opts = opts
		if opts.ServerName != svc {
			t.Errorf("%s runs as server %q (NATS_NAME)", svc, opts.ServerName)
		}
		if !opts.JetStream || opts.Cluster.Name == "" || opts.Gateway.Name != opts.Cluster.Name || opts.Gateway.Port == 0 {
			t.Errorf("%s: JetStream %v, cluster %q, gateway %q on port %d: want JetStream, and a gateway named after the cluster",
				svc, opts.JetStream, opts.Cluster.Name, opts.Gateway.Name, opts.Gateway.Port)
		}
		nodes[svc] = n
		clusters[opts.Cluster.Name] = append(clusters[opts.Cluster.Name], svc)
	}
	if len(clusters) != 2 {
		t.Fatalf("clusters %v, want two regions", clusters)
	}
	for name, members := range clusters {
		if len(members) != 3 {
			t.Errorf("cluster %s has nodes %v, want 3", name, members)
		}
	}
	clusterOf := func(host string) string {
		if n, ok := nodes[host]; ok {
			return n.opts.Cluster.Name
		}
		return ""
	}
	for svc, n := range nodes {
		var routed []string
		for _, r := range n.opts.Routes {
			if clusterOf(r.Hostname()) != n.opts.Cluster.Name {
				t.Errorf("%s routes to %s, no node of its cluster %s", svc, r, n.opts.Cluster.Name)
			}
			routed = append(routed, r.Hostname())
		}
		if !sameSet(routed, clusters[n.opts.Cluster.Name]) {
			t.Errorf("%s routes to %v, want its cluster's nodes %v", svc, routed, clusters[n.opts.Cluster.Name])
		}
		dialled := map[string]bool{}
		for _, gw := range n.opts.Gateway.Gateways {
			dialled[gw.Name] = true
			var hosts []string
			for _, u := range gw.URLs {
				if clusterOf(u.Hostname()) != gw.Name {
					t.Errorf("%s: gateway %s lists %s, no node of cluster %s", svc, gw.Name, u, gw.Name)
				}
				hosts = append(hosts, u.Hostname())
			}
			if !sameSet(hosts, clusters[gw.Name]) {
				t.Errorf("%s: gateway %s lists %v, want that cluster's nodes %v", svc, gw.Name, hosts, clusters[gw.Name])
			}
		}
		for name := range clusters {
			if name != n.opts.Cluster.Name && !dialled[name] {
				t.Errorf("%s has no gateway to cluster %s", svc, name)
			}
		}
	}

	regionMaps := map[string][]string{} // DISPENSER_REGIONS: its dispensers
	served := map[string]int{}          // region: its dispensers
	var fleet dispenser.Config
	for svc, s := range project.Services {
		if !strings.HasPrefix(svc, "dispenser-") {
			continue
		}
		cfg := dispenserConfig(t, svc, s)
		fleet = cfg
		regionMaps[cfg.Regions.String()] = append(regionMaps[cfg.Regions.String()], svc)
		if _, ok := clusters[cfg.Region]; !ok {
			t.Errorf("%s is of region %q, which is no NATS cluster (clusters %v)", svc, cfg.Region, slices.Sorted(maps.Keys(clusters)))
		}
		served[cfg.Region]++
		for _, u := range strings.Split(cfg.NATSURL, ",") {
			if clusterOf(hostOf(u)) != cfg.Region {
				t.Errorf("%s of region %s connects to %s, no node of cluster %s", svc, cfg.Region, u, cfg.Region)
			}
		}
	}
	if len(regionMaps) != 1 || fleet.Regions.IsZero() {
		t.Fatalf("the dispensers' maps of regions %v, want one map", regionMaps)
	}
	for _, r := range fleet.Regions.List() {
		if served[r.Name] < 2 {
			t.Errorf("region %s of the map %s has %d dispensers, want at least 2", r.Name, fleet.Regions, served[r.Name])
		}
	}
	if len(fleet.Regions.List()) != len(clusters) {
		t.Errorf("the map %s has %d regions, the deployment %d clusters", fleet.Regions, len(fleet.Regions.List()), len(clusters))
	}
	// A load client per region, on its region's cluster.
	for name := range clusters {
		svc := "client-demo-" + name
		s, ok := project.Services[svc]
		if !ok {
			t.Errorf("no service %s", svc)
			continue
		}
		for _, u := range strings.Split(env(s, "NATS_URL"), ",") {
			if clusterOf(hostOf(u)) != name {
				t.Errorf("%s connects to %s, no node of cluster %s", svc, u, name)
			}
		}
	}
}

// hostOf is the host of a nats:// URL ("" when it does not parse).
func hostOf(u string) string {
	parsed, err := url.Parse(strings.TrimSpace(u))
	if err != nil {
		return ""
	}
	return parsed.Hostname()
}

// natsConfigArg is the configuration file a nats service runs with (its
// -c argument), as a path in its container.
func natsConfigArg(t *testing.T, svc string, s types.ServiceConfig) string {
	t.Helper()
	i := slices.Index(s.Command, "-c")
	if i < 0 || i+1 >= len(s.Command) {
		t.Fatalf("%s runs %v, without -c FILE", svc, s.Command)
	}
	return s.Command[i+1]
}

// hostPath is the file on the host behind the path p of the service's
// container, through its bind mounts (the longest that holds it).
func hostPath(t *testing.T, s types.ServiceConfig, p string) string {
	t.Helper()
	best, source := "", ""
	for target, src := range mounts(s) {
		if (p == target || strings.HasPrefix(p, target+"/")) && len(target) > len(best) {
			best, source = target, src
		}
	}
	if best == "" {
		t.Fatalf("%s is in no bind mount of the service (mounts %v)", p, mounts(s))
	}
	return filepath.Join(source, strings.TrimPrefix(p, best))
}

// dispenserConfig loads the service's dispenser configuration with the
// dispenser's own loader and checks (map of regions, region, layout), from
// its DISPENSER_ variables only.
func dispenserConfig(t *testing.T, svc string, s types.ServiceConfig) dispenser.Config {
	t.Helper()
	for _, v := range dispenser.Variables() {
		t.Setenv(v.Name, "")
		os.Unsetenv(v.Name)
	}
	for k := range s.Environment {
		if strings.HasPrefix(k, "DISPENSER_") {
			t.Setenv(k, env(s, k))
		}
	}
	cfg, err := dispenser.LoadConfig()
	if err != nil {
		t.Fatalf("the dispenser refuses the configuration of %s: %v", svc, err)
	}
	return cfg
}
