// Package netns gives the fault harness hosts of its own: each host a
// network namespace joined to a bridge the run creates by a veth pair,
// with an address on a private /24 and no route beyond it. Processes run
// inside a host with `ip netns exec`; partitions are iptables rules and
// link faults tc netem qdiscs (or, without netem, iptables NFQUEUE and
// TEE rules and a delayer: linkfault.go) inside the hosts' own
// namespaces, so the machine's own tables are never touched and deleting
// a namespace deletes its rules.
//
// Every name the run makes starts with Prefix and the run's process ID
// (ufh12345n0): a later run sweeps away what an earlier one left behind
// when that process is gone, and never touches another live run's.
package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// Prefix starts the name of every namespace and interface a run makes.
const Prefix = "ufh"

// Network is a run's bridge and its hosts.
type Network struct {
	tag    string // Prefix and the run's process ID
	bridge string
	subnet netip.Prefix
	gw     netip.Addr // the bridge's address: the harness's own, in the root namespace
	next   int        // the last host octet handed out
	hosts  []*Host
}

// Host is one network namespace with an address on the run's bridge.
type Host struct {
	Name string     // short role name, e.g. n0, d1, c0
	NS   string     // the namespace's name
	Addr netip.Addr // its address on the bridge
	veth string     // the root namespace's end of its veth pair
	// chained: the host's cut chain exists (links.go). Only the run's
	// goroutine that injects faults changes it.
	chained bool
	// link: the host's link fault's delayer (linkfault.go), nil without
	// one. Changed by the same goroutine as chained.
	link *delayer
}

// Available tells whether this machine lets the run make namespaces: it
// is root and has the ip command. The error says what is missing.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("netns: network namespaces need root")
	}
	for _, tool := range []string{"ip", "iptables", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("netns: %s not installed: %w", tool, err)
		}
	}
	return nil
}

// New sweeps away what earlier runs left behind, then creates the run's
// bridge on a /24 that no route of the machine covers.
func New(ctx context.Context) (*Network, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if err := Sweep(ctx); err != nil {
		return nil, err
	}
	pid := os.Getpid()
	n := &Network{tag: fmt.Sprintf("%s%d", Prefix, pid)}
	n.bridge = n.tag + "br"
	subnet, err := freeSubnet(ctx, pid)
	if err != nil {
		return nil, err
	}
	n.subnet = subnet
	n.gw = subnet.Addr().Next()
	n.next = 1
	steps := [][]string{
		{"link", "add", n.bridge, "type", "bridge"},
		{"addr", "add", netip.PrefixFrom(n.gw, 24).String(), "dev", n.bridge},
		{"link", "set", n.bridge, "up"},
	}
	for _, s := range steps {
		if _, err := run(ctx, "ip", s...); err != nil {
			n.Close(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	return n, nil
}

// Gateway is the harness's own address on the bridge.
func (n *Network) Gateway() netip.Addr { return n.gw }

// Hosts lists the hosts in the order they were added.
func (n *Network) Hosts() []*Host { return append([]*Host(nil), n.hosts...) }

// AddHost creates a namespace named after the run and role, joins it to
// the bridge and gives it the next address. Its only routes are the
// bridge's /24 and its own loopback.
func (n *Network) AddHost(ctx context.Context, role string) (*Host, error) {
	addr, err := n.SpareAddr()
	if err != nil {
		return nil, err
	}
	h := &Host{Name: role, NS: n.tag + role, Addr: addr, veth: n.tag + role}
	if len(h.veth) > 15 {
		return nil, fmt.Errorf("netns: interface name %q longer than 15 characters", h.veth)
	}
	steps := [][]string{
		{"netns", "add", h.NS},
		{"link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.NS},
		{"link", "set", h.veth, "master", n.bridge},
		{"link", "set", h.veth, "up"},
		{"-n", h.NS, "addr", "add", netip.PrefixFrom(addr, 24).String(), "dev", "eth0"},
		{"-n", h.NS, "link", "set", "eth0", "up"},
		{"-n", h.NS, "link", "set", "lo", "up"},
	}
	n.hosts = append(n.hosts, h)
	for _, s := range steps {
		if _, err := run(ctx, "ip", s...); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// Command is a command that runs inside the host's namespace. `ip netns
// exec` execs the program in place, so the process's ID is the
// program's: signals reach it directly.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
	// Its own process group: a Ctrl-C of the harness does not reach it
	// before the harness stops it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// Exec runs a command inside the host's namespace and returns its output.
func (h *Host) Exec(ctx context.Context, name string, args ...string) (string, error) {
	return run(ctx, "ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// Close kills every process left in the run's namespaces and deletes the
// namespaces, their interfaces and the bridge. It goes on past errors
// and returns them joined.
func (n *Network) Close(ctx context.Context) error {
	var errs []error
	for _, h := range n.hosts {
		if h.link != nil {
			// Its socket would keep the namespace alive, its goroutines
			// running: no draining, the namespace goes.
			h.link.stop()
			h.link = nil
		}
		errs = append(errs, removeNamespace(ctx, h.NS))
		errs = append(errs, removeLink(ctx, h.veth))
	}
	errs = append(errs, removeLink(ctx, n.bridge))
	n.hosts = nil
	return errors.Join(errs...)
}

// leftover matches the names a run makes: Prefix, the run's process ID,
// a role.
var leftover = regexp.MustCompile("^" + Prefix + `([0-9]+)([a-z][a-z0-9]*)$`)

// Sweep deletes the namespaces and interfaces of runs whose process is
// gone (a run killed before it could clean up).
func Sweep(ctx context.Context) error {
	var errs []error
	nsList, err := run(ctx, "ip", "netns", "list")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(nsList, "\n") {
		fields := strings.Fields(line)
		if len(fields) > 0 && stale(fields[0]) {
			errs = append(errs, removeNamespace(ctx, fields[0]))
		}
	}
	links, err := run(ctx, "ip", "-o", "link", "show")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(links, "\n") {
		// "12: ufh123n0@if11: <BROADCAST,…"
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(fields[1], ":"), "@")
		if stale(name) {
			errs = append(errs, removeLink(ctx, name))
		}
	}
	return errors.Join(errs...)
}

// stale tells whether name is one a run made whose process is gone.
func stale(name string) bool {
	m := leftover.FindStringSubmatch(name)
	if m == nil {
		return false
	}
	pid, err := strconv.Atoi(m[1])
	if err != nil {
		return false
	}
	return !alive(pid)
}

// alive tells whether pid is a live process that could be a harness run
// (a reused ID of an unrelated program does not count).
func alive(pid int) bool {
	if pid == os.Getpid() {
		return true
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false
	}
	// The harness (faults), its CI test (faults.test), this package's
	// tests (netns.test).
	base := filepath.Base(exe)
	return strings.HasPrefix(base, "faults") || strings.HasPrefix(base, "netns.test")
}

func removeNamespace(ctx context.Context, ns string) error {
	// Kill what still runs inside (a process keeps a namespace's network
	// alive after its name is deleted).
	if pids, err := run(ctx, "ip", "netns", "pids", ns); err == nil {
		for _, f := range strings.Fields(pids) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGCONT)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if _, err := run(ctx, "ip", "netns", "delete", ns); err != nil && !strings.Contains(err.Error(), "No such file") {
		return err
	}
	return nil
}

// removeLink deletes an interface unless it is gone. A veth whose peer's
// namespace was just deleted is being removed by the kernel: ip finds it
// and then the kernel answers "No such device" (TestHostsCutHealClose
// under load).
func removeLink(ctx context.Context, name string) error {
	if _, err := run(ctx, "ip", "link", "delete", name); err != nil &&
		!strings.Contains(err.Error(), "Cannot find device") && !strings.Contains(err.Error(), "does not exist") &&
		!strings.Contains(err.Error(), "No such device") {
		return err
	}
	return nil
}

// freeSubnet picks a 10.x.y.0/24 from the run's process ID that no route
// of the machine covers.
func freeSubnet(ctx context.Context, pid int) (netip.Prefix, error) {
	routes, err := run(ctx, "ip", "-4", "route", "show", "table", "all")
	if err != nil {
		return netip.Prefix{}, err
	}
	var taken []netip.Prefix
	for _, line := range strings.Split(routes, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		dst := f[0]
		if dst == "local" || dst == "broadcast" {
			if len(f) < 2 {
				continue
			}
			dst = f[1]
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if p, err := netip.ParsePrefix(dst); err == nil && p.Bits() > 0 {
			taken = append(taken, p)
		}
	}
	for i := range 200 {
		k := (pid + i*7919) % (200 * 256)
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(50 + k/256), byte(k % 256), 0}), 24)
		free := true
		for _, t := range taken {
			if t.Overlaps(p) {
				free = false
				break
			}
		}
		if free {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("netns: no free 10.x.y.0/24")
}

// run runs a command and returns its standard output; an error carries
// its standard error.
func run(ctx context.Context, name string, args ...string) (string, error) {
	return runInput(ctx, "", name, args...)
}

// runInput is run with input on the command's standard input.
func runInput(ctx context.Context, input, name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(input)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("netns: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// SpareAddr hands out the next address of the run's /24 without a host:
// an address that moves between hosts (AddAddr, DelAddr), as a floating
// IP in front of a database primary.
func (n *Network) SpareAddr() (netip.Addr, error) {
	n.next++
	if n.next > 250 {
		return netip.Addr{}, errors.New("netns: no addresses left on the run's /24")
	}
	addr := n.subnet.Addr()
	for range n.next {
		addr = addr.Next()
	}
	return addr, nil
}

// AddAddr gives the host a second address on its link.
func (h *Host) AddAddr(ctx context.Context, a netip.Addr) error {
	_, err := run(ctx, "ip", "-n", h.NS, "addr", "add", netip.PrefixFrom(a, 24).String(), "dev", "eth0")
	return err
}

// DelAddr takes a second address off the host's link.
func (h *Host) DelAddr(ctx context.Context, a netip.Addr) error {
	_, err := run(ctx, "ip", "-n", h.NS, "addr", "del", netip.PrefixFrom(a, 24).String(), "dev", "eth0")
	return err
}

// FlushNeighbours forgets the host's ARP entries, so that an address that
// moved to another host is looked up again at once.
func (h *Host) FlushNeighbours(ctx context.Context) error {
	_, err := run(ctx, "ip", "-n", h.NS, "neigh", "flush", "all")
	return err
}
