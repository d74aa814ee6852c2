package faults

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/netns"
)

// kvStream is the JetStream stream of the worker-ID bucket (uid_workers).
const kvStream = "KV_uid_workers"

// cut drops every packet between hosts of different sides, in both
// directions (each side's own namespace drops it). Hosts on no side (the
// clients, the harness) reach everyone.
func cut(ctx context.Context, sides ...[]*netns.Host) error {
	for i, side := range sides {
		var others []netip.Addr
		for j, o := range sides {
			if j != i {
				for _, h := range o {
					others = append(others, h.Addr)
				}
			}
		}
		for _, h := range side {
			if err := h.Block(ctx, others, true, true); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *run) nodeHosts(idx ...int) []*netns.Host {
	var out []*netns.Host
	for _, i := range idx {
		out = append(out, r.cluster.nodes[i].host)
	}
	return out
}

func (r *run) allHosts() []*netns.Host {
	var out []*netns.Host
	for _, n := range r.cluster.nodes {
		out = append(out, n.host)
	}
	for _, d := range r.dispensers {
		out = append(out, d.host)
	}
	return out
}

// healAll removes every cut and link fault, and returns the packets the
// cuts dropped.
func (r *run) healAll(ctx context.Context) (int64, error) {
	var dropped int64
	var firstErr error
	for _, h := range append(r.allHosts(), r.mysqlHosts()...) {
		n, err := h.Dropped(ctx)
		dropped += n
		if err == nil {
			err = h.Heal(ctx)
		}
		if err == nil && r.netem {
			err = h.ClearNetem(ctx)
		}
		if err == nil {
			_, err = h.Restore(ctx) // a link fault without netem
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return dropped, firstErr
}

// partition cuts the hosts along one of the Jepsen shapes, or with the
// MySQL fleet one of its store's (mysqlPartition), holds the cut 5–15 s
// and heals it. Proven when the cut rules dropped packets.
func (r *run) partition(ctx context.Context) (Proof, error) {
	nodes := len(r.cluster.nodes)
	shapes := []string{"one-node", "majority-minority", "leader-dispenser", "one-way"}
	if nodes >= 5 {
		shapes = append(shapes, "majorities-ring")
	}
	if r.mysql != nil {
		shapes = append(shapes, shapeMySQLReplica, shapeMySQLDispenser)
	}
	shape := shapes[r.rng.IntN(len(shapes))]
	if shape == shapeMySQLReplica || shape == shapeMySQLDispenser {
		return r.mysqlPartition(ctx, shape)
	}
	p := Proof{Kind: KindPartition, Start: time.Now()}
	var err error
	switch shape {
	case "one-node":
		i := r.rng.IntN(nodes)
		p.What = fmt.Sprintf("one node cut off: n%d from every other host", i)
		var rest []*netns.Host
		for _, h := range r.allHosts() {
			if h != r.cluster.nodes[i].host {
				rest = append(rest, h)
			}
		}
		err = cut(ctx, r.nodeHosts(i), rest)
	case "majority-minority":
		// The nodes split in a minority and a majority, the dispensers
		// split across both.
		perm := r.rng.Perm(nodes)
		minority := perm[:(nodes-1)/2]
		majority := perm[(nodes-1)/2:]
		dperm := r.rng.Perm(len(r.dispensers))
		small := r.nodeHosts(minority...)
		big := r.nodeHosts(majority...)
		for k, di := range dperm {
			if k == 0 {
				small = append(small, r.dispensers[di].host)
			} else {
				big = append(big, r.dispensers[di].host)
			}
		}
		p.What = fmt.Sprintf("minority %s vs majority %s", names(small), names(big))
		err = cut(ctx, small, big)
	case "leader-dispenser":
		// Right after a heal the stream may be electing: ask again.
		var leader *node
		var lerr error
		_ = waitFor(ctx, 15*time.Second, func() bool {
			leader, lerr = r.cluster.leader(ctx, kvStream)
			return lerr == nil
		})
		if lerr != nil {
			return Proof{}, lerr
		}
		d := r.dispensers[r.rng.IntN(len(r.dispensers))]
		small := []*netns.Host{leader.host, d.host}
		var big []*netns.Host
		for _, h := range r.allHosts() {
			if h != leader.host && h != d.host {
				big = append(big, h)
			}
		}
		p.What = fmt.Sprintf("KV leader %s with dispenser %s vs %s", leader.name, d.name, names(big))
		err = cut(ctx, small, big)
	case "one-way":
		// Node i hears nobody; everyone still hears node i.
		i := r.rng.IntN(nodes)
		var others []netip.Addr
		for _, h := range r.allHosts() {
			if h != r.cluster.nodes[i].host {
				others = append(others, h.Addr)
			}
		}
		p.What = fmt.Sprintf("one-way: n%d receives from no other host, sends to all", i)
		err = r.cluster.nodes[i].host.Block(ctx, others, true, false)
	case "majorities-ring":
		// Each node sees itself and its two ring neighbours: a majority
		// each, no two the same.
		p.What = "majorities ring over the nodes"
		for i := range nodes {
			var far []netip.Addr
			for j := range nodes {
				if d := (j - i + nodes) % nodes; d != 0 && d != 1 && d != nodes-1 {
					far = append(far, r.cluster.nodes[j].host.Addr)
				}
			}
			if err = r.cluster.nodes[i].host.Block(ctx, far, true, true); err != nil {
				break
			}
		}
	}
	if err != nil {
		_, _ = r.healAll(ctx)
		return p, err
	}
	r.holdDropping(ctx)
	dropped, err := r.healAll(ctx)
	p.End = time.Now()
	p.Proof = fmt.Sprintf("%d packets dropped by the cut rules", dropped)
	p.Proven = dropped > 0
	return p, err
}

// dropWithin bounds how long a cut or a link fault is held past its
// hold until it has proven itself (its rules dropped a packet, its
// delayer delayed one, …).
const dropWithin = 30 * time.Second

// holdDropping holds the cuts in force for a hold, and past it until
// their rules have dropped a packet: the proof that the fault happened.
func (r *run) holdDropping(ctx context.Context) {
	_ = sleep(ctx, r.hold())
	_ = waitFor(ctx, dropWithin, func() bool {
		var dropped int64
		for _, h := range append(r.allHosts(), r.mysqlHosts()...) {
			n, err := h.Dropped(ctx)
			if err != nil {
				return false
			}
			dropped += n
		}
		return dropped > 0
	})
}

func names(hs []*netns.Host) string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Name)
	}
	return strings.Join(out, ",")
}

// linkFault degrades one node's link or every node's for 5–15 s: tc
// netem (delay 50–200 ms, loss 5–20 %, reordering, duplication) where
// the kernel has it, else all of them at once in userspace (linkFallback).
func (r *run) linkFault(ctx context.Context) (Proof, error) {
	var hosts []*netns.Host
	where := "every node"
	if r.rng.IntN(2) == 0 {
		i := r.rng.IntN(len(r.cluster.nodes))
		hosts, where = r.nodeHosts(i), fmt.Sprintf("n%d", i)
	} else {
		for i := range r.cluster.nodes {
			hosts = append(hosts, r.cluster.nodes[i].host)
		}
	}
	if !r.netem {
		return r.linkFallback(ctx, hosts, where)
	}
	p := Proof{Kind: KindNetem, Start: time.Now()}
	var args []string
	switch r.rng.IntN(4) {
	case 0:
		d := 50 + r.rng.IntN(151)
		args = []string{"delay", fmt.Sprintf("%dms", d), fmt.Sprintf("%dms", d/5)}
	case 1:
		args = []string{"loss", fmt.Sprintf("%d%%", 5+r.rng.IntN(16))}
	case 2:
		args = []string{"delay", "20ms", "reorder", "25%", "50%"}
	default:
		args = []string{"duplicate", fmt.Sprintf("%d%%", 5+r.rng.IntN(16))}
	}
	var err error
	for _, h := range hosts {
		if err = h.Netem(ctx, args...); err != nil {
			break
		}
	}
	p.What = "netem " + strings.Join(args, " ") + " on " + where
	if err != nil {
		_, _ = r.healAll(ctx)
		return p, err
	}
	_ = sleep(ctx, r.hold())
	var proof []string
	proven := false
	for _, h := range hosts {
		st, err := h.NetemStats(ctx)
		if err == nil {
			proof = append(proof, fmt.Sprintf("%s: %d packets through netem, %d dropped", h.Name, st.Sent, st.Dropped))
			proven = proven || st.Sent > 0 && strings.Contains(st.Line, args[0])
		}
	}
	_, err = r.healAll(ctx)
	p.End = time.Now()
	p.Proof, p.Proven = strings.Join(proof, "; "), proven
	return p, err
}

// linkFallback is the link fault on a kernel without netem
// (netns.LinkFault): each host's received client and cluster packets
// held for a delay drawn from d to 4d/3 (d 50–150 ms: every delay within
// 50–200 ms, spread so that packets reorder), 5–20 % of them dropped,
// 5–20 % of those it sends duplicated, all at once. Held past the hold
// until the hosts delayed, reordered, dropped and duplicated packets,
// each at least one: the proof.
func (r *run) linkFallback(ctx context.Context, hosts []*netns.Host, where string) (Proof, error) {
	d := time.Duration(50+r.rng.IntN(101)) * time.Millisecond
	f := netns.LinkFault{Min: d, Max: d * 4 / 3,
		Loss: float64(5+r.rng.IntN(16)) / 100, Duplicate: float64(5+r.rng.IntN(16)) / 100,
		Protocol: "tcp", Ports: []int{clientPort, clusterPort}, Seed: r.rng.Uint64()}
	p := Proof{Kind: KindNetem, Start: time.Now(),
		What: fmt.Sprintf("%s on %s (NFQUEUE delayer and TEE: no netem in this kernel)", f, where)}
	var err error
	for _, h := range hosts {
		// Clones go to the packet's destination, one of the run's hosts.
		var peers []netip.Addr
		for _, o := range r.network.Hosts() {
			if o != h {
				peers = append(peers, o.Addr)
			}
		}
		if err = h.Degrade(ctx, f, peers); err != nil {
			break
		}
	}
	if err != nil {
		_, _ = r.healAll(ctx)
		return p, err
	}
	_ = sleep(ctx, r.hold())
	_ = waitFor(ctx, dropWithin, func() bool {
		var total netns.LinkStats
		for _, h := range hosts {
			s, err := h.LinkStats(ctx)
			if err != nil {
				return false
			}
			total = total.Add(s)
		}
		return total.Proven()
	})
	var proof []string
	var total netns.LinkStats
	var errs []error
	for _, h := range hosts {
		s, err := h.Restore(ctx)
		errs = append(errs, err)
		total = total.Add(s)
		proof = append(proof, fmt.Sprintf("%s: %s", h.Name, s))
	}
	_, err = r.healAll(ctx)
	p.End = time.Now()
	p.Proof, p.Proven = strings.Join(proof, "; "), total.Proven()
	return p, errors.Join(append(errs, err)...)
}

// pause stops a dispenser or a node with SIGSTOP for longer than the
// lease TTL, then resumes it. Proven by the process's state (T) while
// paused.
func (r *run) pause(ctx context.Context) (Proof, error) {
	var target *proc
	if r.rng.IntN(2) == 0 {
		target = r.dispensers[r.rng.IntN(len(r.dispensers))].current()
	} else {
		target = r.cluster.nodes[r.rng.IntN(len(r.cluster.nodes))].current()
	}
	if target == nil || !target.alive() {
		return Proof{}, errNoTarget
	}
	hold := r.cfg.LeaseTTL + r.between(time.Second, 3*time.Second)
	p := Proof{Kind: KindPause, What: fmt.Sprintf("SIGSTOP %s for %s (lease TTL %s)", target.name, hold.Round(time.Millisecond), r.cfg.LeaseTTL), Start: time.Now()}
	if err := target.signal(syscall.SIGSTOP); err != nil {
		return p, err
	}
	_ = sleep(ctx, 500*time.Millisecond)
	state := target.state()
	_ = sleep(ctx, hold-500*time.Millisecond)
	err := target.signal(syscall.SIGCONT)
	p.End = time.Now()
	p.Proof, p.Proven = "state while paused: "+state, state == "T"
	return p, err
}

// kill sends SIGKILL to a dispenser (started again 1–3 s later) or a node
// (2–5 s later). Proven by its exit status.
func (r *run) kill(ctx context.Context) (Proof, error) {
	p := Proof{Kind: KindKill, Start: time.Now()}
	var target *proc
	var restart func() error
	if r.rng.IntN(2) == 0 {
		d := r.dispensers[r.rng.IntN(len(r.dispensers))]
		target, restart = d.current(), d.start
	} else {
		n := r.cluster.nodes[r.rng.IntN(len(r.cluster.nodes))]
		target, restart = n.current(), n.start
	}
	if target == nil || !target.alive() {
		return Proof{}, errNoTarget
	}
	target.kill()
	target.mu.Lock()
	status := fmt.Sprint(target.exitErr)
	target.mu.Unlock()
	down := r.between(time.Second, 5*time.Second)
	p.What = fmt.Sprintf("kill -9 %s, restarted after %s", target.name, down.Round(time.Millisecond))
	_ = sleep(ctx, down)
	err := restart()
	p.End = time.Now()
	p.Proof, p.Proven = "exit: "+status, status == "signal: killed"
	return p, err
}

// powerLoss loses every node's last Δ seconds of writes, dispensers
// running through it: freeze every node (SIGSTOP) and copy its store,
// resume for Δ (3–10 s), kill -9 every node, put the copies back and
// restart. With SyncAlways every node is killed and restarted on its own
// store: it should lose nothing acknowledged, yet the KV stream's last
// write was lost in some such kills (docs/faults.md, the findings).
// Every node's own store is read at the copy, at the kill, as soon as it
// answers after its restart and once the cluster is healthy again
// (powerLossReport); the loss is what the stream's leader has after
// recovery short of what its leader had at the kill. Proven (default
// sync) when a restored store restarted short of what it had at the kill.
func (r *run) powerLoss(ctx context.Context) (Proof, error) {
	if !r.cfg.SyncAlways && r.rng.IntN(3) == 0 {
		return r.nodeTailLoss(ctx)
	}
	p := Proof{Kind: KindPowerLoss, Start: time.Now()}
	nodes := r.cluster.nodes
	delta := r.hold()
	var snapshot observation
	if !r.cfg.SyncAlways {
		snapshot = r.cluster.observe(ctx)
		for _, n := range nodes {
			if err := n.current().signal(syscall.SIGSTOP); err != nil {
				return p, err
			}
		}
		var err error
		for _, n := range nodes {
			if err = copyDir(ctx, n.store, n.store+".copy"); err != nil {
				break
			}
		}
		for _, n := range nodes {
			_ = n.current().signal(syscall.SIGCONT)
		}
		if err != nil {
			return p, err
		}
		p.What = fmt.Sprintf("every node loses its last %s (stores frozen and copied, restored after the kill)", delta.Round(time.Millisecond))
	} else {
		p.What = fmt.Sprintf("every node killed at once after %s (sync_interval: always)", delta.Round(time.Millisecond))
	}
	_ = sleep(ctx, delta)
	// What the nodes hold at the kill; a node's monitoring may not answer
	// within its 2 s on a loaded machine: ask again until the stream's
	// leader does.
	var kill observation
	_ = waitFor(ctx, 15*time.Second, func() bool {
		kill = r.cluster.observe(ctx)
		_, _, ok := kill.leader(kvStream)
		return ok
	})
	for _, n := range nodes {
		n.current().kill()
	}
	if !r.cfg.SyncAlways {
		for _, n := range nodes {
			if err := os.RemoveAll(n.store); err != nil {
				return p, fmt.Errorf("faults: %w", err)
			}
			if err := os.Rename(n.store+".copy", n.store); err != nil {
				return p, fmt.Errorf("faults: %w", err)
			}
		}
	}
	for _, n := range nodes {
		if err := n.start(); err != nil {
			return p, err
		}
	}
	streams := kill.streamNames()
	restart := r.cluster.firstViews(ctx, 90*time.Second, streams)
	err := r.cluster.waitHealthy(ctx, 90*time.Second)
	var recovered observation
	_ = waitFor(ctx, 30*time.Second, func() bool {
		recovered = r.cluster.observe(ctx)
		for _, s := range streams {
			if _, _, ok := recovered.leader(s); !ok {
				return false
			}
		}
		return true
	})
	p.End = time.Now()
	lost, forgot, report := powerLossReport(snapshot, kill, restart, recovered)
	if r.cfg.SyncAlways {
		p.Proof = fmt.Sprintf("%d nodes killed; %d acknowledged stream messages lost, the stores restarted %d short of the kill: %s", len(nodes), lost, forgot, report)
		p.Proven = len(streams) > 0
	} else {
		p.Proof = fmt.Sprintf("the restore lost %d acknowledged stream messages, the stores restarted %d short of the kill: %s", lost, forgot, report)
		p.Proven = forgot > 0
	}
	return p, err
}

// nodeTailLoss is nats-server #7567's case: one node loses its last Δ
// seconds (an OS crash under lazy fsync) and comes back while another node
// is cut off, so that the quorum needs the node that forgot. Node i's
// store is frozen and copied, it runs Δ, is killed, its copy put back;
// node j is cut from every host; i restarts; the cut is held, then
// healed. Proven by what i's restore lost and by the cut's drops.
func (r *run) nodeTailLoss(ctx context.Context) (Proof, error) {
	// Two of the KV stream's peers: i forgets, j is cut off.
	var peers []*node
	var err error
	_ = waitFor(ctx, 15*time.Second, func() bool {
		peers, err = r.cluster.peers(ctx, kvStream)
		return err == nil && len(peers) >= 2
	})
	if err != nil {
		return Proof{}, err
	}
	if len(peers) < 2 {
		return Proof{}, fmt.Errorf("faults: stream %s has %d peers", kvStream, len(peers))
	}
	perm := r.rng.Perm(len(peers))
	ni, nj := peers[perm[0]], peers[perm[1]]
	delta := r.hold()
	p := Proof{Kind: KindPowerLoss, Start: time.Now(),
		What: fmt.Sprintf("%s loses its last %s and restarts while %s is cut off (nats-server #7567)", ni.name, delta.Round(time.Millisecond), nj.name)}
	if err := ni.current().signal(syscall.SIGSTOP); err != nil {
		return p, err
	}
	err = copyDir(ctx, ni.store, ni.store+".copy")
	_ = ni.current().signal(syscall.SIGCONT)
	if err != nil {
		return p, err
	}
	_ = sleep(ctx, delta)
	before := map[string]uint64{}
	if ss, err := ni.streams(ctx); err == nil {
		for _, s := range ss {
			before[s.Name] = s.LastSeq
		}
	}
	ni.current().kill()
	if err := os.RemoveAll(ni.store); err != nil {
		return p, fmt.Errorf("faults: %w", err)
	}
	if err := os.Rename(ni.store+".copy", ni.store); err != nil {
		return p, fmt.Errorf("faults: %w", err)
	}
	var rest []*netns.Host
	for _, h := range r.allHosts() {
		if h != nj.host {
			rest = append(rest, h)
		}
	}
	if err := cut(ctx, []*netns.Host{nj.host}, rest); err != nil {
		_, _ = r.healAll(ctx)
		return p, err
	}
	if err := ni.start(); err != nil {
		_, _ = r.healAll(ctx)
		return p, err
	}
	// What i has right after its restart, before the others can repair
	// it: read as soon as it answers.
	after := map[string]uint64{}
	_ = waitFor(ctx, 30*time.Second, func() bool {
		ss, err := ni.streams(ctx)
		if err != nil {
			return false
		}
		for _, s := range ss {
			after[s.Name] = s.LastSeq
		}
		return true
	})
	_ = sleep(ctx, r.hold())
	dropped, err := r.healAll(ctx)
	p.End = time.Now()
	var lost uint64
	for name, b := range before {
		if a, ok := after[name]; ok && a < b {
			lost += b - a
		}
	}
	p.Proof = fmt.Sprintf("%s's restore lost %d stream messages; the cut of %s dropped %d packets", ni.name, lost, nj.name, dropped)
	p.Proven = lost > 0 && dropped > 0
	return p, err
}

// clockAckWithin bounds the wait for a dispenser's acknowledgement of a
// clock offset: a serving process reads its clock many times a second,
// but one still starting (restarted by a kill, or after a power loss)
// reads it first once it has reached the store, tens of seconds later
// on a loaded machine.
const clockAckWithin = 90 * time.Second

// clockStep steps one dispenser's clock: back 1–300 s, forward 1–60 s,
// a strobe flipping back and forth, or back followed at once by a
// restart. The step is undone after 5–15 s (a step forward of the same
// size). Proven by the process's acknowledgement of each offset (the
// faultclock build writes it when it reads a new one).
func (r *run) clockStep(ctx context.Context) (Proof, error) {
	d := r.dispensers[r.rng.IntN(len(r.dispensers))]
	p := Proof{Kind: KindClockStep, Start: time.Now()}
	seen := 0
	steps := 0
	step := func(off time.Duration) error {
		steps++
		ok, err := d.setClock(ctx, off, clockAckWithin)
		if ok {
			seen++
		}
		return err
	}
	var err error
	switch variant := r.rng.IntN(4); variant {
	case 0, 3:
		back := r.between(time.Second, 300*time.Second).Round(time.Second)
		p.What = fmt.Sprintf("%s's clock stepped back %s", d.name, back)
		err = step(-back)
		if variant == 3 && err == nil {
			p.What += ", then kill -9 and a restart at once"
			if cur := d.current(); cur != nil {
				cur.kill()
			}
			// The new process reads its clock first once it has reached
			// the store (after a power loss, seconds later): the hold
			// begins when it has read the stepped one, else the step could
			// be undone before it ever ran on it.
			steps++
			var ok bool
			ok, err = d.restartOnClock(ctx, clockAckWithin)
			if ok {
				seen++
			}
		}
	case 1:
		fwd := r.between(time.Second, 60*time.Second).Round(time.Second)
		p.What = fmt.Sprintf("%s's clock stepped forward %s", d.name, fwd)
		err = step(fwd)
	case 2:
		amp := r.between(time.Second, 30*time.Second).Round(time.Second)
		p.What = fmt.Sprintf("%s's clock strobing ±%s every 500 ms", d.name, amp)
		for k := 0; k < 8 && err == nil; k++ {
			off := amp
			if k%2 == 1 {
				off = -amp
			}
			err = step(off)
			_ = sleep(ctx, 500*time.Millisecond)
		}
	}
	if err == nil {
		_ = sleep(ctx, r.hold())
	}
	// The clock comes back to the machine's (a step forward after a step
	// back).
	if e := step(0); err == nil {
		err = e
	}
	p.End = time.Now()
	p.Proof = fmt.Sprintf("%d of %d offsets acknowledged by the process", seen, steps)
	p.Proven = seen == steps && steps > 0
	return p, err
}

func sortedKeys(m map[string]uint64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// mysqlFailover fails the MySQL fleet's store over, one of three ways
// at random: the replica's replication stopped for a while, then the
// primary killed and the replica promoted (asynchronous replication);
// the same under semi-synchronous replication that falls back to
// asynchronous (the primary's commits go on unacknowledged); or the
// failover undone, the old primary back on its own data, writable, and
// the address moved back to it. Proven by the transactions lost.
func (r *run) mysqlFailover(ctx context.Context) (Proof, error) {
	lag := r.hold()
	old, replica := r.mysql.primary.name, r.mysql.replica.name
	p := Proof{Kind: KindMySQL, Start: time.Now()}
	var err error
	switch r.rng.IntN(3) {
	case 0:
		p.What = fmt.Sprintf("primary %s killed after its replica %s missed %s of it, replica promoted, address %s moved", old, replica, lag.Round(time.Millisecond), r.mysql.vip)
		var lost int64
		lost, err = r.mysql.failover(ctx, lag)
		p.Proof = fmt.Sprintf("the promoted replica lacks %d of the primary's transactions", lost)
		p.Proven = lost > 0
	case 1:
		p.What = fmt.Sprintf("semi-sync: replica %s stops acknowledging, primary %s falls back to async for %s, is killed, replica promoted, address %s moved", replica, old, lag.Round(time.Millisecond), r.mysql.vip)
		var lost, unacked int64
		lost, unacked, err = r.mysql.semiSyncFailover(ctx, lag)
		p.Proof = fmt.Sprintf("the primary fell back to async (Rpl_semi_sync_master_status OFF, %d commits unacknowledged); the promoted replica lacks %d of its transactions", unacked, lost)
		p.Proven = lost > 0 && unacked > 0
	default:
		back := r.hold()
		p.What = fmt.Sprintf("primary %s killed after its replica %s missed %s of it, replica promoted; %s back on its own data, writable, and %s after the promotion the address %s moved back to it", old, replica, lag.Round(time.Millisecond), old, back.Round(time.Millisecond), r.mysql.vip)
		var lacked, lost int64
		var reign time.Duration
		lacked, lost, reign, err = r.mysql.failoverAndBack(ctx, lag, back)
		p.Proof = fmt.Sprintf("the promoted replica lacked %d of the old primary's transactions (back with it); %d of the promoted one's, written in the %s it served, lost when the address moved back", lacked, lost, reign.Round(time.Millisecond))
		p.Proven = lacked > 0 && lost > 0
	}
	p.End = time.Now()
	return p, err
}
