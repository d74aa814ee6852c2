package soak

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
)

// The -faults filter keeps the cycle's order, drops what it does not
// name and what needs the soak's own mariadbd when there is none, and
// rejects a kind the cycle does not have.
func TestFaultFilter(t *testing.T) {
	if got := cycleOf(nil, true); !slices.Equal(got, faultCycle) {
		t.Errorf("no filter: %v, want the whole cycle %v", got, faultCycle)
	}
	if got := cycleOf(nil, false); slices.Contains(got, faultMySQLKill) || slices.Contains(got, faultMySQLPause) || len(got) != len(faultCycle)-2 {
		t.Errorf("no filter, no own mariadbd: %v", got)
	}
	only := []string{faultMySQLPause, faultKillKVLeader}
	if got, want := cycleOf(only, true), []string{faultKillKVLeader, faultMySQLPause}; !slices.Equal(got, want) {
		t.Errorf("filter %v: %v, want %v (the cycle's order)", only, got, want)
	}
	if got := cycleOf(only, false); !slices.Equal(got, []string{faultKillKVLeader}) {
		t.Errorf("filter %v without own mariadbd: %v", only, got)
	}
	if err := checkFaultKinds(only); err != nil {
		t.Errorf("known kinds: %v", err)
	}
	if err := checkFaultKinds([]string{faultKillKVLeader, "nats-kill-leader"}); err == nil {
		t.Error("an unknown kind was accepted")
	}
}

// The audit names what a node lacks of another's subscriptions and what
// it holds that the other no longer has.
func TestCompareInterest(t *testing.T) {
	next := interestKey{"uidkv.next", "uidkv-dispenser"}
	inbox := interestKey{"_INBOX.abc.*", ""}
	nodes := []string{"a", "b"}
	local := map[string]map[interestKey]bool{"a": {next: true, inbox: true}, "b": {}}
	remote := map[[2]string]map[interestKey]bool{
		{"b", "a"}: {next: true, inbox: true},
		{"a", "b"}: {},
	}
	if got := compareInterest(nodes, local, remote); len(got) != 0 {
		t.Fatalf("consistent interest: %v", got)
	}
	remote[[2]string{"b", "a"}] = map[interestKey]bool{next: true}
	remote[[2]string{"a", "b"}] = map[interestKey]bool{next: true}
	want := []string{
		"a holds a stale subscription of b: uidkv.next uidkv-dispenser",
		"b lacks a's subscription _INBOX.abc.* ",
	}
	if got := compareInterest(nodes, local, remote); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	delete(remote, [2]string{"a", "b"})
	if got := compareInterest(nodes, local, remote); !slices.Contains(got, "a has no route from b") {
		t.Fatalf("missing route not reported: %v", got)
	}
}

// On the soak's real cluster, a queue subscription and a reply inbox of
// a client on one node reach the other two over their routes, and the
// audit, reading the nodes' monitoring, then finds nothing amiss.
func TestInterestAuditOnACluster(t *testing.T) {
	c := testCluster(t)
	nc, err := nats.Connect(c.URL(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.QueueSubscribe("uidkv.next", "uidkv-dispenser", func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	inbox, err := nc.SubscribeSync(nats.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	defer inbox.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	sc := newSlowCalls(&soak{cluster: c, origin: time.Now(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}, t.TempDir())
	ctx := context.Background()
	// agree waits until every node holds exactly the others' interest.
	agree := func(what string) {
		t.Helper()
		var last []string
		testwait.WaitFor(t, 10*time.Second, what, func() bool {
			found, ok := sc.interestMismatches(ctx)
			last = found
			return ok && len(found) == 0
		})
		if len(last) != 0 {
			t.Fatalf("mismatches (%s): %v", what, last)
		}
	}
	agree("the cluster's interest to agree")
	_, remote, ok := sc.gatherInterest(ctx)
	key := interestKey{"uidkv.next", "uidkv-dispenser"}
	if !ok || !remote[[2]string{"soak-n1", "soak-n0"}][key] || !remote[[2]string{"soak-n2", "soak-n0"}][key] {
		t.Fatalf("the other nodes do not show node 0's queue subscription over their routes: %v", remote)
	}
	// The audit compares what is there: drop the inbox on node 0 and the
	// others must let it go too (were it kept, it would be reported).
	if err := inbox.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	agree("the unsubscription to reach every node")
}

// The requests a dispenser took over a second to handle are its request
// histogram's count less its bucket at 1 s, over every series.
func TestSlowRequestsFromMetrics(t *testing.T) {
	text := `# TYPE uid_request_duration_seconds histogram
uid_request_duration_seconds_bucket{otel_scope_name="x",uid_endpoint="next",uid_outcome="ok",le="0.75"} 10
uid_request_duration_seconds_bucket{otel_scope_name="x",uid_endpoint="next",uid_outcome="ok",le="1"} 12
uid_request_duration_seconds_bucket{otel_scope_name="x",uid_endpoint="next",uid_outcome="ok",le="10"} 15
uid_request_duration_seconds_count{otel_scope_name="x",uid_endpoint="next",uid_outcome="ok"} 15
uid_request_duration_seconds_bucket{otel_scope_name="x",uid_endpoint="batch",uid_outcome="unavailable",le="1"} 4
uid_request_duration_seconds_count{otel_scope_name="x",uid_endpoint="batch",uid_outcome="unavailable"} 5
go_goroutines 41
`
	m := metricsFrom(strings.NewReader(text))
	if m.goroutines != 41 || m.slowRequests != 4 {
		t.Fatalf("got %+v, want 41 goroutines and 4 slow requests (3 next, 1 batch)", m)
	}
	if m := metricsFrom(strings.NewReader("go_goroutines 9\n")); m.slowRequests != -1 {
		t.Fatalf("no histogram: %+v, want -1 slow requests", m)
	}
}
