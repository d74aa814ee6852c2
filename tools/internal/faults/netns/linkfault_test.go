package netns

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
)

// listenUDPIn opens a UDP socket inside the host's namespace: a socket
// stays in the namespace it was made in, whichever thread uses it later.
func listenUDPIn(t *testing.T, h *Host, port int) *net.UDPConn {
	t.Helper()
	type result struct {
		c   *net.UDPConn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer own.Close()
		f, err := os.Open(filepath.Join("/var/run/netns", h.NS))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(h.Addr, uint16(port))))
		// Back to the thread's own namespace; a thread that cannot go back
		// stays locked and ends with this goroutine (the main thread, which
		// cannot end, would leave the test process in the host's namespace).
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("UDP socket in %s: %v", h.NS, r.err)
	}
	// Room for every datagram of the test: none is lost to a full buffer,
	// so the counts below add up exactly.
	if err := r.c.SetReadBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}
	return r.c
}

// arrival is a datagram's echo as the client received it.
type arrival struct {
	seq uint32
	at  time.Time
}

// Host b's link fault, seen on the wire by UDP datagrams with sequence
// numbers that a sends and b echoes: every echo comes back no sooner than
// the minimum delay, some out of order, some twice (TEE), and the lost
// ones are exactly those the delayer dropped. With the delayer dead the
// link still carries packets (--queue-bypass), and the fault's removal
// leaves no rule behind; closing the network stops a delayer left on.
func TestLinkFaultDelaysReordersDuplicatesDrops(t *testing.T) {
	requireNetns(t)
	ctx := context.Background()
	n, err := New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(ctx)
	a, err := n.AddHost(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.AddHost(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	const port = 7070
	client, echo := listenUDPIn(t, a, 0), listenUDPIn(t, b, port)
	defer client.Close()
	defer echo.Close()
	var echoed atomic.Int64
	go func() {
		buf := make([]byte, 64)
		for {
			k, from, err := echo.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = echo.WriteToUDPAddrPort(buf[:k], from)
			echoed.Add(1) // after the write: its clone, if any, is counted by then
		}
	}()
	var mu sync.Mutex
	var got []arrival
	go func() {
		buf := make([]byte, 64)
		for {
			k, _, err := client.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			at := time.Now()
			if k == 4 {
				mu.Lock()
				got = append(got, arrival{binary.BigEndian.Uint32(buf), at})
				mu.Unlock()
			}
		}
	}()
	received := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	to := netip.AddrPortFrom(b.Addr, port)
	send := func(seq uint32) {
		if _, err := client.WriteToUDPAddrPort(binary.BigEndian.AppendUint32(nil, seq), to); err != nil {
			t.Fatal(err)
		}
	}

	// The link carries the echo before the fault.
	const before = 1 << 30
	send(before)
	testwait.WaitFor(t, time.Second, "the echo before the fault", func() bool { return received() == 1 })

	f := LinkFault{Min: 50 * time.Millisecond, Max: 80 * time.Millisecond, Loss: 0.1, Duplicate: 0.2,
		Protocol: "udp", Ports: []int{port}, Seed: 1}
	if err := b.Degrade(ctx, f, []netip.Addr{a.Addr}); err != nil {
		t.Fatal(err)
	}
	const count = 200
	sent := make([]time.Time, count)
	for i := range count {
		sent[i] = time.Now()
		send(uint32(i))
	}
	testwait.WaitFor(t, 2*time.Second, "the delayer's verdicts on every datagram", func() bool {
		s := b.link.stats()
		return s.Delayed+s.Dropped == count
	})
	delivered := b.link.stats().Delayed
	testwait.WaitFor(t, time.Second, "b's echo of every delivered datagram", func() bool { return echoed.Load() == 1+delivered })
	stats, err := b.LinkStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	testwait.WaitFor(t, time.Second, "every echo and its clones", func() bool { return int64(received()) == 1+delivered+stats.Duplicated })

	mu.Lock()
	echoes := append([]arrival(nil), got[1:]...)
	mu.Unlock()
	copies := map[uint32]int{}
	var reordered, latest int64 = 0, -1
	for _, e := range echoes {
		if e.seq >= count {
			t.Fatalf("echo of a datagram never sent: %d", e.seq)
		}
		if rtt := e.at.Sub(sent[e.seq]); rtt < f.Min {
			t.Errorf("datagram %d came back after %s, less than the minimum delay %s", e.seq, rtt, f.Min)
		}
		copies[e.seq]++
		if copies[e.seq] > 1 {
			continue
		}
		if int64(e.seq) < latest {
			reordered++
		} else {
			latest = int64(e.seq)
		}
	}
	duplicated := int64(len(echoes) - len(copies))
	t.Logf("%d datagrams: %s; on the wire: %d echoed, %d out of order, %d twice", count, stats, len(copies), reordered, duplicated)
	if !stats.Proven() {
		t.Errorf("the fault's counts do not prove it: %s", stats)
	}
	if reordered == 0 {
		t.Error("no echo came back out of order")
	}
	if duplicated != stats.Duplicated || duplicated == 0 {
		t.Errorf("%d echoes came back twice, the TEE rules counted %d clones", duplicated, stats.Duplicated)
	}
	if lost := int64(count - len(copies)); lost != stats.Dropped {
		t.Errorf("%d datagrams never came back, the delayer dropped %d", lost, stats.Dropped)
	}

	// A dead delayer lets packets through: the rule's --queue-bypass.
	b.link.stop()
	send(before + 1)
	testwait.WaitFor(t, time.Second, "an echo past the dead delayer", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got[len(got)-1].seq == before+1
	})
	if _, err := b.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"filter", "mangle"} {
		rules, err := b.Exec(ctx, "iptables", "-w", "-t", table, "-S")
		if err != nil {
			t.Fatal(err)
		}
		for _, leftover := range []string{linkChain, dupChain, "NFQUEUE", "TEE"} {
			if strings.Contains(rules, leftover) {
				t.Errorf("%s left in %s's %s table:\n%s", leftover, b.Name, table, rules)
			}
		}
	}

	// A run that ends with a fault on stops its delayer with the network.
	if err := b.Degrade(ctx, f, []netip.Addr{a.Addr}); err != nil {
		t.Fatal(err)
	}
	d := b.link
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !d.stopped() {
		t.Error("closing the network left the delayer running")
	}
}
