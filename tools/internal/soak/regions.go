package soak

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/internal/faultproxy"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// The regions mode (Config.Regions, `-regions 2`): a NATS supercluster
// of one 3-node cluster per region, joined by gateways through cuttable,
// delayable proxies, and both fleets in every region (issue 21). Each
// region's dispensers claim worker IDs only in the region's range
// (DISPENSER_REGION, the same DISPENSER_REGIONS everywhere), the MySQL
// fleet in a database of the region's own on the soak's mariadbd, the KV
// fleet in the region's bucket (uid_workers_<region>, placed in its
// cluster). The clients of a region connect to its cluster only; NATS
// serves them from their own region and through the gateway when their
// region has no dispenser. One named sequence is homed in each region
// (homedSequences), declared the same on every dispenser of both fleets;
// the sequence clients of every region ask for all of them, so each
// region calls its own sequence locally and the others' through the
// gateway, and a call failing with a HomeUnreachableError while the home
// region is down or the gateway cut is the documented unavailability
// (seqUnavailable). Blocks are left out: a region's block stream is fed
// by its own dispensers only, so its block sources run dry while they
// are down by design.

// regionNames name the regions, in order.
var regionNames = []string{"east", "west", "north", "south"}

// The regions mode's fault kinds (besides faultKillKVLeader, which kills
// the leader of one region's KV stream in turn).
const (
	faultRegionDown = "region-down"         // SIGKILL every dispenser of a region, restart them later
	faultGatewayCut = "gateway-cut"         // cut every gateway link, heal
	faultNodeEach   = "nats-kill-node-each" // SIGKILL a node of every cluster at once, restart them
)

// regionFaultCycle is a cycle of the regions mode.
var regionFaultCycle = []string{faultRegionDown, faultGatewayCut, faultNodeEach, faultKillKVLeader}

// region is one region: its cluster, the proxies in front of its nodes'
// gateways and the soak's connection to it.
type region struct {
	name     string
	span     workerid.WorkerRange
	cluster  *cluster
	gateways []*faultproxy.Proxy // one in front of each node's gateway
	admin    *natsconn.Conn
}

// kvStream is the stream behind the region's KV bucket.
func (r *region) kvStream() string { return "KV_" + kvBucket + "_" + r.name }

// homedNames name the regions mode's sequences after the ordinary
// mode's two, for a third and fourth region.
var homedNames = []string{"payments", "shipments"}

// homedSequences are the regions mode's sequences: one homed in each
// region, the ordinary mode's first (orders@east, invoices@west), each
// with first numbers far apart.
func homedSequences(regions []string) []namedSeq {
	var out []namedSeq
	for i, r := range regions {
		s := namedSeq{first: uint64(i)*1_000_000 + 1, home: r}
		if i < len(sequences) {
			s.name, s.first = sequences[i].name, sequences[i].first
		} else {
			s.name = homedNames[i-len(sequences)]
		}
		out = append(out, s)
	}
	return out
}

// regionsMap splits the layout's worker IDs into n equal ranges, one per
// region.
func regionsMap(n int) (workerid.Regions, error) {
	if n < 2 || n > len(regionNames) {
		return workerid.Regions{}, fmt.Errorf("soak: -regions %d: 2 to %d regions", n, len(regionNames))
	}
	per := (layout.MaxWorkerID() + 1) / uint64(n)
	var parts []string
	for i := range n {
		parts = append(parts, fmt.Sprintf("%s=%d-%d", regionNames[i], uint64(i)*per, uint64(i+1)*per-1))
	}
	return workerid.ParseRegions(strings.Join(parts, ","))
}

// runRegions is Run in the regions mode, after the work directory and
// the soak's log are set up.
func (s *soak) runRegions(ctx context.Context, workDir string) (*Summary, error) {
	// No high-rate phase: see the mode's doc.
	s.cfg.BulkClients = 0
	regions, err := regionsMap(s.cfg.Regions)
	if err != nil {
		return nil, err
	}
	s.regionsMap = regions
	var names []string
	for _, r := range regions.List() {
		names = append(names, r.Name)
	}
	s.homedSeqs = homedSequences(names)
	mysqlDSN, err := s.startMySQL(ctx, workDir)
	if err != nil {
		return nil, err
	}
	if s.mysqld != nil {
		defer s.mysqld.stop()
	}
	// A database of each region's own (in production: a server in the
	// region).
	dsns := map[string]string{}
	for _, r := range regions.List() {
		dsn, drop, err := prepareDatabase(mysqlDSN)
		if err != nil {
			return nil, err
		}
		defer drop()
		dsns[r.Name] = dsn.FormatDSN()
	}
	s.progress("starting %d regions (%s), each a 3-node NATS cluster, joined by gateways through proxies delaying %s each way (work dir %s)",
		s.cfg.Regions, regions, s.cfg.GatewayDelay, workDir)
	if err := s.startRegions(ctx, workDir, regions); err != nil {
		return nil, err
	}
	defer s.stopRegions()
	if err := s.makeRegionSlots(workDir, dsns); err != nil {
		return nil, err
	}
	s.progress("starting %d dispensers per region, %d on MySQL and %d on JetStream KV (lease TTL %s, reserve chunk %s), all at once",
		2*regionDispensers, regionDispensers, regionDispensers, s.cfg.LeaseTTL, s.cfg.ReserveChunk)
	for _, slot := range s.slots {
		if _, err := slot.start(); err != nil {
			s.stopDispensers()
			return nil, err
		}
	}
	for _, slot := range s.slots {
		if err := slot.current().waitServing(ctx, s.cfg.ServeWithin); err != nil {
			s.stopDispensers()
			return nil, fmt.Errorf("soak: %w", err)
		}
	}
	ld := defaultLoad(s.cfg.Rate)
	clients, err := s.startRegionClients(ctx, ld)
	if err != nil {
		s.stopDispensers()
		return nil, err
	}
	s.origin = time.Now() // the run's clock starts with the clients
	rec := newRecorder(s.origin)
	s.progress("%d clients (next, batch and prefetch on each fleet in each region, and %d sequence clients per region asking for %s) running for %s",
		len(clients), s.cfg.SeqClients, sequencesEnv(s.homedSeqs), s.cfg.Duration)
	stalls := s.drive(ctx, clients, rec, ld)
	closeClients(clients)
	s.progress("clients stopped; stopping the dispensers")
	s.stopDispensers()
	s.stopRegions()

	sum := s.summarise(rec, clients, uidclient.BlockSourceStats{}, stalls)
	sum.Regions = s.regionFigures(sum.FaultLog, clients, sum.errorKinds)
	sum.WorkDir = workDir
	if err := sum.writeRecords(workDir); err != nil {
		return nil, err
	}
	return sum, nil
}

// startRegions starts every region's cluster, the gateway proxies in
// front of them, and waits until JetStream is healthy everywhere and
// requests cross every gateway.
func (s *soak) startRegions(ctx context.Context, workDir string, regions workerid.Regions) error {
	list := regions.List()
	gwPorts := map[string][]int{}
	advertised := map[string][]string{} // region → its proxies' URLs
	for _, rr := range list {
		r := &region{name: rr.Name, span: rr.Range}
		s.regions = append(s.regions, r)
		ports, err := freePorts(numNodes)
		if err != nil {
			return err
		}
		gwPorts[r.name] = ports
		for _, p := range ports {
			px, err := faultproxy.Listen(net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				return fmt.Errorf("soak: %w", err)
			}
			px.SetDelay(s.cfg.GatewayDelay)
			r.gateways = append(r.gateways, px)
			advertised[r.name] = append(advertised[r.name], px.Addr())
		}
	}
	for _, r := range s.regions {
		remotes := map[string][]string{}
		for _, o := range s.regions {
			if o != r {
				for _, a := range advertised[o.name] {
					remotes[o.name] = append(remotes[o.name], "nats://"+a)
				}
			}
		}
		c, err := newCluster(s.cfg.NATSServerBin, filepath.Join(workDir, r.name), numNodes, clusterOptions{
			writeDeadline: s.cfg.NATSWriteDeadline, onCrash: func(msg string) { s.events.violation("%s", msg) },
			name: r.name, gateway: &gatewayOptions{listen: gwPorts[r.name], advertise: advertised[r.name], remotes: remotes},
		})
		if err != nil {
			return err
		}
		r.cluster = c
	}
	// Every node before any wait: the JetStream meta group spans the
	// supercluster and needs a quorum of all its nodes.
	for _, r := range s.regions {
		if err := r.cluster.startNodes(); err != nil {
			return err
		}
	}
	for _, r := range s.regions {
		if err := r.cluster.waitReady(ctx); err != nil {
			return err
		}
		nc, err := natsconn.Connect(ctx, natsconn.Config{URL: r.cluster.URLs(0), Name: "uid-soak admin " + r.name, Logger: s.log})
		if err != nil {
			return fmt.Errorf("soak: %w", err)
		}
		r.admin = nc
		// The probe the gateway waits use: only this region answers it.
		if _, err := nc.Subscribe(probeSubject(r), func(m *nats.Msg) { _ = m.Respond([]byte(r.name)) }); err != nil {
			return fmt.Errorf("soak: %w", err)
		}
	}
	if _, err := s.waitGateways(ctx, true, 60*time.Second); err != nil {
		return err
	}
	return nil
}

func probeSubject(r *region) string { return "uid-soak.probe." + r.name }

// stopRegions stops every region's cluster and gateway proxies (again a
// no-op).
func (s *soak) stopRegions() {
	for _, r := range s.regions {
		if r.admin != nil {
			r.admin.Close()
			r.admin = nil
		}
		if r.cluster != nil {
			r.cluster.shutdown()
		}
		for _, px := range r.gateways {
			px.Close()
		}
	}
}

// waitGateways waits (up to within) until a request from every region
// reaches a responder only each other region has (linked), or none does
// (cut), and says how long it took.
func (s *soak) waitGateways(ctx context.Context, linked bool, within time.Duration) (time.Duration, error) {
	began := time.Now()
	state := map[bool]string{true: "linked", false: "cut"}[linked]
	for _, from := range s.regions {
		for _, to := range s.regions {
			if from == to {
				continue
			}
			for {
				_, err := from.admin.Request(probeSubject(to), nil, 500*time.Millisecond)
				if (err == nil) == linked {
					break
				}
				if time.Since(began) > within || !sleep(ctx, 50*time.Millisecond) {
					return time.Since(began), fmt.Errorf("soak: gateway %s → %s not %s after %s (last: %v)", from.name, to.name, state, within, err)
				}
			}
		}
	}
	return time.Since(began), nil
}

// regionDispensers is each region's number of dispensers of each fleet.
const regionDispensers = 2

// makeRegionSlots lays out each region's dispensers: dispensers of the
// MySQL fleet (<region>-d0, -d1) on the region's database and of the KV
// fleet (<region>-k0, -k1) on its bucket, each given every node of its
// region's cluster, its own first.
func (s *soak) makeRegionSlots(workDir string, dsns map[string]string) error {
	metricsPorts, err := freePorts(2 * regionDispensers * len(s.regions))
	if err != nil {
		return err
	}
	for _, r := range s.regions {
		for _, f := range fleets {
			for i := range regionDispensers {
				n := len(s.slots)
				label := fmt.Sprintf("%s-%s%d", r.name, map[*fleet]string{mysqlFleet: "d", kvFleet: "k"}[f], i)
				metrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(metricsPorts[n]))
				env := dispenserEnv(s.cfg, f, r.cluster.URLs(i%numNodes), dsns[r.name], metrics)
				env = setEnv(env, "DISPENSER_REGION", r.name)
				env = setEnv(env, "DISPENSER_REGIONS", s.regionsMap.String())
				env = setEnv(env, "DISPENSER_BLOCKS_ENABLED", "false")
				env = setEnv(env, "DISPENSER_SEQUENCES", sequencesEnv(s.homedSeqs))
				s.slots = append(s.slots, &dispenserSlot{
					index: n, label: label, region: r.name, fleet: f, bin: s.cfg.DispenserBin, logDir: workDir, metrics: metrics,
					events: s.events, env: env,
				})
			}
		}
	}
	return nil
}

// setEnv sets key to value in env, or removes it when value is empty.
func setEnv(env []string, key, value string) []string {
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, key+"=") })
	if value != "" {
		env = append(env, key+"="+value)
	}
	return env
}

// startRegionClients connects, in every region, a Next, a Batch and a
// Prefetcher client on each fleet and SeqClients sequence clients
// (seqClient over the homed sequences: the default 8 cover both kinds,
// both sequences and both fleets with two regions), each given every
// node of its region's cluster (never another region's: NATS is what
// takes its requests to another region).
func (s *soak) startRegionClients(ctx context.Context, ld load) ([]*soakClient, error) {
	var clients []*soakClient
	add := func(r *region, kind callKind, f *fleet, seq string) error {
		id := len(clients)
		node := id % numNodes
		c, err := newClient(ctx, clientLog{id: id, node: node, kind: kind, fleet: f.name, seq: seq, region: r.name}, r.cluster.URLs(node), s.log, ld)
		if err != nil {
			closeClients(clients)
			return err
		}
		clients = append(clients, c)
		return nil
	}
	for _, r := range s.regions {
		for _, f := range fleets {
			for _, kind := range []callKind{kindNext, kindBatch, kindPrefetch} {
				if err := add(r, kind, f, ""); err != nil {
					return nil, err
				}
			}
		}
		for j := range s.cfg.SeqClients {
			kind, name, f := seqClient(j, s.homedSeqs)
			if err := add(r, kind, f, name); err != nil {
				return nil, err
			}
		}
	}
	return clients, nil
}

// injectRegions injects a fault of the regions mode into rec.
func (s *soak) injectRegions(ctx context.Context, rec *faultRecord, cycle int) {
	if len(s.regions) == 0 {
		return
	}
	switch rec.Kind {
	case faultRegionDown:
		rec.Target, rec.Note = s.regionDown(ctx, s.regions[cycle%len(s.regions)])
	case faultGatewayCut:
		rec.Target, rec.Note = s.cutGateways(ctx)
	case faultNodeEach:
		rec.Target, rec.Note = s.killNodeEach(ctx, cycle)
	}
}

// regionDown SIGKILLs every dispenser of r at once, keeps them down for
// RegionDown (r's clients must be served by another region through the
// gateway meanwhile) and starts them again.
func (s *soak) regionDown(ctx context.Context, r *region) (target, note string) {
	var slots []*dispenserSlot
	var procs []*dispenserProc
	var names []string
	for _, slot := range s.slots {
		if slot.region != r.name {
			continue
		}
		slots = append(slots, slot)
		if p := slot.current(); p != nil {
			_ = p.signal(syscall.SIGKILL)
			procs = append(procs, p)
			names = append(names, p.name)
		}
	}
	for _, p := range procs {
		p.kill() // waits until it is gone
	}
	sleep(ctx, s.cfg.RegionDown)
	restart := time.Now()
	var wg sync.WaitGroup
	for _, slot := range slots {
		wg.Go(func() { s.startSlot(ctx, slot) })
	}
	wg.Wait()
	return r.name, fmt.Sprintf("SIGKILL %s; down %s; all serving again %.1fs after the restart", strings.Join(names, ", "), s.cfg.RegionDown, time.Since(restart).Seconds())
}

// cutGateways cuts every gateway link for GatewayCut, then heals them:
// both sides must go on serving their own clients (the JetStream meta
// group has no quorum on either side meanwhile, which running instances
// do not need).
func (s *soak) cutGateways(ctx context.Context) (target, note string) {
	s.setGateways(false)
	down, err := s.waitGateways(ctx, false, 15*time.Second)
	if err != nil {
		s.events.violation("%v", err)
	}
	sleep(ctx, s.cfg.GatewayCut)
	s.setGateways(true)
	up, err := s.waitGateways(ctx, true, 60*time.Second)
	if err != nil {
		s.events.violation("%v", err)
	}
	return "gateways", fmt.Sprintf("no request crossed %.1fs after the cut; cut for %s more; crossing again %.1fs after the heal", down.Seconds(), s.cfg.GatewayCut, up.Seconds())
}

// setGateways cuts every gateway proxy (up false) or restores them.
func (s *soak) setGateways(up bool) {
	for _, r := range s.regions {
		for _, px := range r.gateways {
			if up {
				px.Restore()
			} else {
				px.Cut()
			}
		}
	}
}

// killNodeEach SIGKILLs node cycle%3 of every cluster at once, keeps
// them down for NATSDown and starts them again on their stores.
func (s *soak) killNodeEach(ctx context.Context, cycle int) (target, note string) {
	before := s.regionLeaderNote(ctx)
	i := cycle % numNodes
	var names []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range s.regions {
		names = append(names, r.cluster.nodes[i].name)
		wg.Go(func() {
			accepting, err := r.cluster.killAndRestart(ctx, i, s.cfg.NATSDown)
			if err != nil && !errors.Is(err, context.Canceled) {
				s.events.violation("kill -9 and restart of NATS node %s: %v", r.cluster.nodes[i].name, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if !accepting.IsZero() {
				before += fmt.Sprintf("; %s accepting at %.1fs", r.cluster.nodes[i].name, accepting.Sub(s.origin).Seconds())
			}
		})
	}
	wg.Wait()
	return strings.Join(names, "+"), fmt.Sprintf("down %s; %s; healthy at %.1fs", s.cfg.NATSDown, before, s.since().Seconds())
}

// killRegionKVLeader kills the node leading one region's KV stream (the
// regions in turn).
func (s *soak) killRegionKVLeader(ctx context.Context, cycle int) (target, note string) {
	r := s.regions[cycle%len(s.regions)]
	return s.killLeaderOf(ctx, r.cluster, r.admin.Conn, r.kvStream(), cycle, s.regionLeaderNote(ctx))
}

// regionLeaderNote says which node leads each region's KV stream.
func (s *soak) regionLeaderNote(ctx context.Context) string {
	var parts []string
	for _, r := range s.regions {
		l := streamLeaders(ctx, r.admin.Conn, r.kvStream())[r.kvStream()]
		if l == "" {
			l = "?"
		}
		parts = append(parts, r.kvStream()+" led by "+l)
	}
	return strings.Join(parts, ", ")
}
