package netns

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	nfqueue "github.com/florianl/go-nfqueue/v2"
	"github.com/mdlayher/netlink"
)

// A kernel without sch_netem (a Firecracker guest's) still has NFQUEUE
// and TEE: LinkFault is netem's delay, jitter, loss and duplication done
// with them. Packets the host receives on its link go to a netfilter
// queue; a delayer reading that queue over a netlink socket opened in
// the host's namespace holds each packet for its delay, then accepts it,
// or drops it at once with the loss probability. Delays drawn per packet
// from [Min, Max] release packets out of their arrival order. Packets the
// host sends are cloned with iptables' TEE to their own destination.
//
// The delayer runs in the harness's process: when it dies, its socket
// closes and the queue rule's --queue-bypass lets packets through; when
// it falls behind, the queue's fail-open flag accepts what does not fit.
// A dead delayer degrades the fault, it never wedges the run.

// Chains of a host's link fault, in its own namespace: the filter table's
// INPUT jumps to linkChain (packets to the queue), the mangle table's
// POSTROUTING to dupChain (TEE clones).
const (
	linkChain = "UFH_LINK"
	dupChain  = "UFH_DUP"
)

// cloneMark is the packet mark bit (value/mask) the duplication rules
// set on a packet before they may clone it. A mark does not leave its
// namespace.
const cloneMark = "0x10000/0x10000"

// queueLen bounds the packets the kernel holds for the delayer; past it
// the queue fails open. A node on a loaded link receives a few thousand
// packets a second, and the harness's longest delay holds 200 ms of them.
const queueLen = 16384

// LinkFault is what a host's link does to the packets of one protocol on
// a few ports (either end's).
type LinkFault struct {
	Min, Max  time.Duration // each received packet is held for a delay drawn from [Min, Max]
	Loss      float64       // probability that a received packet is dropped
	Duplicate float64       // probability that a sent packet is cloned
	Protocol  string        // "tcp" or "udp"
	Ports     []int         // the packets whose source or destination port is one of these
	Seed      uint64        // seeds the delays and losses drawn
}

// String is the fault as a line of the harness's log.
func (f LinkFault) String() string {
	return fmt.Sprintf("delay %d–%d ms, loss %.0f%%, duplicate %.0f%% (%s ports %s)",
		f.Min.Milliseconds(), f.Max.Milliseconds(), 100*f.Loss, 100*f.Duplicate, f.Protocol, f.ports())
}

func (f LinkFault) ports() string {
	s := make([]string, len(f.Ports))
	for i, p := range f.Ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// LinkStats counts what a link fault did.
type LinkStats struct {
	Delayed    int64 // held for their delay, then delivered
	Reordered  int64 // delivered after a packet that arrived later
	Dropped    int64 // dropped by the loss probability
	Duplicated int64 // clones the TEE rules sent
	Bypassed   int64 // queued by the kernel but not delivered to the delayer (fail-open)
}

// Proven tells whether the fault did each thing it claims: delayed,
// reordered, dropped and duplicated packets.
func (s LinkStats) Proven() bool {
	return s.Delayed > 0 && s.Reordered > 0 && s.Dropped > 0 && s.Duplicated > 0
}

func (s LinkStats) String() string {
	out := fmt.Sprintf("%d packets delayed, %d reordered, %d dropped, %d duplicated", s.Delayed, s.Reordered, s.Dropped, s.Duplicated)
	if s.Bypassed > 0 {
		out += fmt.Sprintf(", %d bypassed the delayer", s.Bypassed)
	}
	return out
}

// Add sums two hosts' counts.
func (s LinkStats) Add(o LinkStats) LinkStats {
	return LinkStats{s.Delayed + o.Delayed, s.Reordered + o.Reordered, s.Dropped + o.Dropped,
		s.Duplicated + o.Duplicated, s.Bypassed + o.Bypassed}
}

// Degrade puts the link fault on the host: its received packets of the
// fault's protocol and ports are delayed and dropped, its sent ones to
// each of peers (the run's other hosts, never an address beyond them)
// cloned. It replaces none: a host carries at most one.
func (h *Host) Degrade(ctx context.Context, f LinkFault, peers []netip.Addr) error {
	if h.link != nil {
		return fmt.Errorf("netns: %s already has a link fault", h.Name)
	}
	if f.Min <= 0 || f.Max < f.Min || len(f.Ports) == 0 || f.Protocol == "" {
		return fmt.Errorf("netns: link fault %s: want 0 < Min ≤ Max, a protocol and ports", f)
	}
	d, err := startDelayer(h.NS, f)
	if err != nil {
		return err
	}
	h.link = d
	// The delayer listens before any packet is queued. The rules go in
	// at once (iptables-restore), the jumps last in their chains: after
	// a cut's (inserted first), a cut host drops before it delays.
	match := fmt.Sprintf("-p %s -m multiport --ports %s", f.Protocol, f.ports())
	var rules strings.Builder
	fmt.Fprintf(&rules, "*filter\n:%s - [0:0]\n", linkChain)
	fmt.Fprintf(&rules, "-A %s -i eth0 %s -j NFQUEUE --queue-num 0 --queue-bypass\n", linkChain, match)
	fmt.Fprintf(&rules, "-A INPUT -j %s\nCOMMIT\n", linkChain)
	fmt.Fprintf(&rules, "*mangle\n:%s - [0:0]\n-A POSTROUTING -j %s\n", dupChain, dupChain)
	if f.Duplicate > 0 {
		// A clone goes out through the same hooks, nested in its
		// original's TEE: the mark its original got makes it return at
		// once, so that the TEE rules count clones only (a clone is
		// never cloned again, but its pass would hit the rules' counters).
		fmt.Fprintf(&rules, "-A %s -m mark --mark %s -j RETURN\n", dupChain, cloneMark)
		fmt.Fprintf(&rules, "-A %s -j MARK --set-xmark %s\n", dupChain, cloneMark)
		// TEE's gateway is the next hop of the clone: each peer gets a
		// rule of its own, so a clone goes to its packet's destination.
		for _, p := range peers {
			fmt.Fprintf(&rules, "-A %s -o eth0 -d %s %s -m statistic --mode random --probability %.3f -j TEE --gateway %s\n",
				dupChain, p, match, f.Duplicate, p)
		}
	}
	rules.WriteString("COMMIT\n")
	if err := h.restoreRules(ctx, rules.String()); err != nil {
		d.stop()
		h.link = nil
		return err
	}
	return nil
}

// restoreRules applies rules in iptables-restore's format to the host's
// tables, all or none, leaving its other rules (the cuts) as they are.
func (h *Host) restoreRules(ctx context.Context, rules string) error {
	_, err := runInput(ctx, rules, "ip", "netns", "exec", h.NS, "iptables-restore", "-w", "--noflush")
	return err
}

// LinkStats reads the host's link fault's counts so far (zero without one).
func (h *Host) LinkStats(ctx context.Context) (LinkStats, error) {
	if h.link == nil {
		return LinkStats{}, nil
	}
	s := h.link.stats()
	dup, err := h.counted(ctx, "mangle", dupChain, "TEE")
	s.Duplicated = dup
	return s, err
}

// Restore takes the host's link fault off and returns its final counts:
// it removes the rules, lets the delayer deliver every packet it holds,
// and stops it. It goes on past errors and returns them joined.
func (h *Host) Restore(ctx context.Context) (LinkStats, error) {
	d := h.link
	if d == nil {
		return LinkStats{}, nil
	}
	var errs []error
	dup, err := h.counted(ctx, "mangle", dupChain, "TEE")
	errs = append(errs, err)
	// No packet is queued once the jump is gone; the delayer still
	// releases the ones it holds, each after its own delay.
	err = h.restoreRules(ctx, fmt.Sprintf("*filter\n-D INPUT -j %[1]s\n-F %[1]s\n-X %[1]s\nCOMMIT\n"+
		"*mangle\n-D POSTROUTING -j %[2]s\n-F %[2]s\n-X %[2]s\nCOMMIT\n", linkChain, dupChain))
	if err != nil && !strings.Contains(err.Error(), "does not exist") {
		errs = append(errs, err) // else Degrade's rules never went in
	}
	errs = append(errs, h.drain(ctx, d))
	d.stop()
	h.link = nil
	s := d.stats()
	s.Duplicated = dup
	return s, errors.Join(errs...)
}

// drain waits until neither the kernel's queue nor the delayer holds a
// packet: closing the socket earlier would drop the rest (the kernel
// drops what a queue holds when its listener goes). Bounded by the
// longest delay and a margin, since no packet is queued any more.
func (h *Host) drain(ctx context.Context, d *delayer) error {
	deadline := time.Now().Add(d.fault.Max + 5*time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		q, err := h.kernelQueue(ctx)
		if err == nil {
			d.bypassed.Store(max(0, q.idSequence-d.seen.Load()))
			if q.total == 0 && (d.holding() == 0 || d.stopped()) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netns: %s's link queue not drained: %d held by the delayer (%v)", h.Name, d.holding(), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// kernelQueueState is queue 0's line of /proc/net/netfilter/nfnetlink_queue
// in the host's namespace.
type kernelQueueState struct {
	total      int64 // packets queued, not yet given a verdict
	idSequence int64 // packets handed to the listener since the queue was bound
}

func (h *Host) kernelQueue(ctx context.Context) (kernelQueueState, error) {
	out, err := h.Exec(ctx, "cat", "/proc/net/netfilter/nfnetlink_queue")
	if err != nil {
		return kernelQueueState{}, err
	}
	// "    0  12345     3 2 65531     0     0      812  1"
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 8 && f[0] == "0" {
			total, err1 := strconv.ParseInt(f[2], 10, 64)
			ids, err2 := strconv.ParseInt(f[7], 10, 64)
			if err := errors.Join(err1, err2); err != nil {
				return kernelQueueState{}, fmt.Errorf("netns: nfnetlink_queue line %q: %w", line, err)
			}
			return kernelQueueState{total: total, idSequence: ids}, nil
		}
	}
	return kernelQueueState{}, nil // no queue bound: nothing held
}

// counted sums the packet counters of a chain's rules with the target.
func (h *Host) counted(ctx context.Context, table, chain, target string) (int64, error) {
	out, err := h.Exec(ctx, "iptables", "-w", "-t", table, "-n", "-v", "-x", "-L", chain)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[2] == target {
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("netns: iptables counter %q: %w", f[0], err)
			}
			total += n
		}
	}
	return total, nil
}

// delayer holds the packets of a host's queue for their delays.
type delayer struct {
	fault  LinkFault
	q      *nfqueue.Nfqueue
	cancel context.CancelFunc
	done   chan struct{} // closed when release returns
	wake   chan struct{} // a packet was queued
	once   sync.Once     // stop's

	rng *rand.Rand // the receiving goroutine's alone

	mu      sync.Mutex
	held    heldPackets
	arrived uint64 // arrival order of the last packet queued
	latest  uint64 // the latest arrival order delivered so far

	seen, delayed, reordered, dropped, bypassed atomic.Int64
}

// heldPacket is a packet waiting for its delay.
type heldPacket struct {
	id      uint32 // the kernel's packet ID, for the verdict
	arrival uint64 // its arrival order
	release time.Time
}

// heldPackets is a min-heap by release time.
type heldPackets []heldPacket

func (p heldPackets) Len() int           { return len(p) }
func (p heldPackets) Less(i, j int) bool { return p[i].release.Before(p[j].release) }
func (p heldPackets) Swap(i, j int)      { p[i], p[j] = p[j], p[i] }
func (p *heldPackets) Push(x any)        { *p = append(*p, x.(heldPacket)) }
func (p *heldPackets) Pop() any {
	old := *p
	x := old[len(old)-1]
	*p = old[:len(old)-1]
	return x
}

// startDelayer binds queue 0 of the namespace ns. The netlink socket is
// opened inside ns (and stays there); the delayer's goroutines run in the
// caller's process.
func startDelayer(ns string, f LinkFault) (*delayer, error) {
	nsFile, err := os.Open(filepath.Join("/var/run/netns", ns))
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	defer nsFile.Close()
	q, err := nfqueue.Open(&nfqueue.Config{
		NetNS:        int(nsFile.Fd()),
		NfQueue:      0,
		MaxPacketLen: 0,
		MaxQueueLen:  queueLen,
		Copymode:     nfqueue.NfQnlCopyMeta, // the verdict needs the packet's ID only
		Flags:        nfqueue.NfQaCfgFlagFailOpen | nfqueue.NfQaCfgFlagGSO,
		AfFamily:     syscall.AF_INET,
		WriteTimeout: time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("netns: nfqueue in %s: %w", ns, err)
	}
	// A burst of packets must not overflow the socket (the kernel would
	// let them through undelayed); ENOBUFS is not an error to stop on.
	_ = q.Con.SetReadBuffer(8 << 20)
	_ = q.SetOption(netlink.NoENOBUFS, true)
	ctx, cancel := context.WithCancel(context.Background())
	d := &delayer{fault: f, q: q, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1),
		rng: rand.New(rand.NewPCG(f.Seed, f.Seed^0x6a09e667f3bcc909))}
	err = q.RegisterWithErrorFunc(ctx, d.arrive, func(error) int {
		if ctx.Err() != nil {
			return 1
		}
		return 0 // a read error (a timeout, an overrun) is no reason to stop
	})
	if err != nil {
		cancel()
		q.Close()
		return nil, fmt.Errorf("netns: nfqueue in %s: %w", ns, err)
	}
	go d.release(ctx)
	return d, nil
}

// arrive takes a packet from the queue: dropped now with the loss
// probability, else held until its release time.
func (d *delayer) arrive(a nfqueue.Attribute) int {
	if a.PacketID == nil {
		return 0
	}
	d.seen.Add(1)
	if d.rng.Float64() < d.fault.Loss {
		if d.q.SetVerdict(*a.PacketID, nfqueue.NfDrop) == nil {
			d.dropped.Add(1)
		}
		return 0
	}
	delay := d.fault.Min + time.Duration(d.rng.Int64N(int64(d.fault.Max-d.fault.Min)+1))
	d.mu.Lock()
	d.arrived++
	heap.Push(&d.held, heldPacket{id: *a.PacketID, arrival: d.arrived, release: time.Now().Add(delay)})
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
	return 0
}

// release delivers each held packet at its release time, in release
// order, counting those delivered after a packet that arrived later.
func (d *delayer) release(ctx context.Context) {
	defer close(d.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		d.mu.Lock()
		var next time.Duration = -1
		for d.held.Len() > 0 {
			p := d.held[0]
			if wait := time.Until(p.release); wait > 0 {
				next = wait
				break
			}
			heap.Pop(&d.held)
			// The verdict under the lock: the order of verdicts is the
			// order of delivery that the reorder count describes.
			if d.q.SetVerdict(p.id, nfqueue.NfAccept) == nil {
				d.delayed.Add(1)
				if p.arrival < d.latest {
					d.reordered.Add(1)
				} else {
					d.latest = p.arrival
				}
			}
		}
		d.mu.Unlock()
		if next >= 0 {
			timer.Reset(next)
		}
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-timer.C:
		}
	}
}

func (d *delayer) holding() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.held.Len()
}

func (d *delayer) stats() LinkStats {
	return LinkStats{Delayed: d.delayed.Load(), Reordered: d.reordered.Load(), Dropped: d.dropped.Load(), Bypassed: d.bypassed.Load()}
}

// stop closes the delayer's socket (the kernel drops what it still
// queues for it) and waits for its goroutines.
func (d *delayer) stop() {
	d.once.Do(func() {
		d.cancel()
		<-d.done
		d.q.Close()
	})
}

// stopped tells whether the delayer no longer releases packets.
func (d *delayer) stopped() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}
