package netns

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// chain is the iptables chain of a host's cut rules, inside its own
// namespace: INPUT and OUTPUT jump to it, a heal flushes it, and its
// counters prove that a cut dropped packets.
const chain = "UFH_CUT"

// Block drops what the host receives from each of from (inbound) and what
// it sends to each of them (outbound), in its own namespace's iptables.
// Either side alone makes a one-way cut.
func (h *Host) Block(ctx context.Context, peers []netip.Addr, inbound, outbound bool) error {
	if err := h.ensureChain(ctx); err != nil {
		return err
	}
	for _, p := range peers {
		if inbound {
			if _, err := h.Exec(ctx, "iptables", "-w", "-A", chain, "-s", p.String(), "-j", "DROP"); err != nil {
				return err
			}
		}
		if outbound {
			if _, err := h.Exec(ctx, "iptables", "-w", "-A", chain, "-d", p.String(), "-j", "DROP"); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h *Host) ensureChain(ctx context.Context) error {
	if h.chained {
		return nil
	}
	steps := [][]string{
		{"-w", "-N", chain},
		{"-w", "-I", "INPUT", "-j", chain},
		{"-w", "-I", "OUTPUT", "-j", chain},
	}
	for _, s := range steps {
		if _, err := h.Exec(ctx, "iptables", s...); err != nil {
			return err
		}
	}
	h.chained = true
	return nil
}

// Dropped is the number of packets the host's cut rules dropped since
// they were last flushed (0 when it has none).
func (h *Host) Dropped(ctx context.Context) (int64, error) {
	if !h.chained {
		return 0, nil
	}
	out, err := h.Exec(ctx, "iptables", "-w", "-n", "-v", "-x", "-L", chain)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[2] == "DROP" {
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("netns: iptables counter %q: %w", f[0], err)
			}
			total += n
		}
	}
	return total, nil
}

// Heal removes the host's cut rules.
func (h *Host) Heal(ctx context.Context) error {
	if !h.chained {
		return nil // never cut
	}
	_, err := h.Exec(ctx, "iptables", "-w", "-F", chain)
	return err
}

// Netem puts a tc netem qdisc with the given arguments (e.g. "delay",
// "100ms", "20ms", "loss", "10%") on the host's link, replacing any.
func (h *Host) Netem(ctx context.Context, args ...string) error {
	_, err := h.Exec(ctx, "tc", append([]string{"qdisc", "replace", "dev", "eth0", "root", "netem"}, args...)...)
	return err
}

// NetemStats is what tc reports of the host's netem qdisc: packets sent,
// dropped, and the qdisc's line as configured.
type NetemStats struct {
	Sent, Dropped int64
	Line          string
}

// NetemStats reads the netem qdisc's counters.
func (h *Host) NetemStats(ctx context.Context) (NetemStats, error) {
	out, err := h.Exec(ctx, "tc", "-s", "qdisc", "show", "dev", "eth0")
	if err != nil {
		return NetemStats{}, err
	}
	var s NetemStats
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "qdisc netem"):
			s.Line = line
		case strings.HasPrefix(line, "Sent ") && s.Line != "" && s.Sent == 0:
			// "Sent 1234 bytes 56 pkt (dropped 7, overlimits 0 requeues 0)"
			f := strings.Fields(strings.NewReplacer("(", " ", ")", " ", ",", " ").Replace(line))
			for i := 0; i+1 < len(f); i++ {
				switch f[i+1] {
				case "pkt":
					s.Sent, _ = strconv.ParseInt(f[i], 10, 64)
				}
				if f[i] == "dropped" {
					s.Dropped, _ = strconv.ParseInt(f[i+1], 10, 64)
				}
			}
		}
	}
	return s, nil
}

// ClearNetem removes the host's netem qdisc.
func (h *Host) ClearNetem(ctx context.Context) error {
	_, err := h.Exec(ctx, "tc", "qdisc", "del", "dev", "eth0", "root")
	if err != nil && strings.Contains(err.Error(), "No such file") || err != nil && strings.Contains(err.Error(), "Cannot delete qdisc with handle of zero") {
		return nil
	}
	return err
}

// NetemAvailable tells whether the kernel has tc's netem qdisc (a
// Firecracker guest kernel, for one, has none).
func (h *Host) NetemAvailable(ctx context.Context) bool {
	if err := h.Netem(ctx, "delay", "1ms"); err != nil {
		return false
	}
	return h.ClearNetem(ctx) == nil
}
