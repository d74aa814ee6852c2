package netns

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
)

// requireNetns skips a test on a machine without namespaces, unless
// UID_REQUIRE_NETNS=1 (CI) makes that a failure.
func requireNetns(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("UID_REQUIRE_NETNS") == "1" {
			t.Fatalf("UID_REQUIRE_NETNS=1 but: %v", err)
		}
		t.Skip(err)
	}
}

// A host reaches the harness over the bridge, has no route beyond the
// run's /24, and a cut drops its packets (counted) until it is healed;
// closing the network leaves no namespace or interface of the run.
func TestHostsCutHealClose(t *testing.T) {
	requireNetns(t)
	ctx := context.Background()
	n, err := New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			n.Close(ctx)
		}
	}()
	h, err := n.AddHost(ctx, "c0")
	if err != nil {
		t.Fatal(err)
	}
	routes, err := run(ctx, "ip", "-n", h.NS, "-4", "route", "show")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(routes, "default") || strings.Count(strings.TrimSpace(routes), "\n") != 0 {
		t.Fatalf("host %s has routes beyond the bridge's /24:\n%s", h.NS, routes)
	}

	ln, err := net.Listen("tcp", net.JoinHostPort(n.Gateway().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("pong")) })}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/"
	probe := func() (string, error) { return h.Exec(ctx, "curl", "-s", "-m", "1", url) }

	if out, err := probe(); err != nil || out != "pong" {
		t.Fatalf("before the cut: %q, %v", out, err)
	}
	if err := h.Block(ctx, []netip.Addr{n.Gateway()}, false, true); err != nil {
		t.Fatal(err)
	}
	if out, err := probe(); err == nil {
		t.Fatalf("through the cut: %q", out)
	}
	dropped, err := h.Dropped(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if dropped == 0 {
		t.Fatal("the cut counted no dropped packet")
	}
	if err := h.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := probe(); err != nil || out != "pong" {
		t.Fatalf("after the heal: %q, %v", out, err)
	}

	if h.NetemAvailable(ctx) {
		if err := h.Netem(ctx, "loss", "100%"); err != nil {
			t.Fatal(err)
		}
		if _, err := probe(); err == nil {
			t.Fatal("through 100 % netem loss")
		}
		st, err := h.NetemStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Dropped == 0 || !strings.Contains(st.Line, "loss 100%") {
			t.Fatalf("netem stats: %+v", st)
		}
		if err := h.ClearNetem(ctx); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Log("no netem qdisc in this kernel: its check skipped")
	}

	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	closed = true
	nsList, _ := run(ctx, "ip", "netns", "list")
	links, _ := run(ctx, "ip", "-o", "link", "show")
	if strings.Contains(nsList, n.tag) || strings.Contains(links, n.tag) {
		t.Fatalf("left behind:\n%s\n%s", nsList, links)
	}
}

// A run killed before its clean-up leaves a namespace and an interface
// named after its process ID: the next run's sweep removes them, and
// leaves a live run's alone.
func TestSweepRemovesDeadRunsOnly(t *testing.T) {
	requireNetns(t)
	ctx := context.Background()
	dead := Prefix + "4194999x0" // above the largest process ID Linux hands out
	live := fmt.Sprintf("%s%dx1", Prefix, os.Getpid())
	for _, ns := range []string{dead, live} {
		if _, err := run(ctx, "ip", "netns", "add", ns); err != nil {
			t.Fatal(err)
		}
		defer removeNamespace(ctx, ns)
	}
	if _, err := run(ctx, "ip", "link", "add", dead, "type", "bridge"); err != nil {
		t.Fatal(err)
	}
	defer removeLink(ctx, dead)
	if err := Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	nsList, _ := run(ctx, "ip", "netns", "list")
	links, _ := run(ctx, "ip", "-o", "link", "show")
	if strings.Contains(nsList, dead) || strings.Contains(links, dead+":") {
		t.Errorf("the dead run's %s survived the sweep:\n%s\n%s", dead, nsList, links)
	}
	if !strings.Contains(nsList, live) {
		t.Errorf("the sweep removed the live run's %s", live)
	}
}
