package soak

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

func TestRegionsMapSplitsTheWorkerIDs(t *testing.T) {
	m, err := regionsMap(2)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.String(), "east=0-65535,west=65536-131071"; got != want {
		t.Errorf("two regions: %s, want %s (the layout's %d worker IDs halved)", got, want, layout.MaxWorkerID()+1)
	}
	if err := m.CheckLayout(layout); err != nil {
		t.Errorf("the map does not fit the soak's layout: %v", err)
	}
	for _, n := range []int{0, 1, len(regionNames) + 1} {
		if _, err := regionsMap(n); err == nil {
			t.Errorf("%d regions accepted", n)
		}
	}
}

// A node of a region's cluster gets a gateway that advertises its proxy
// and dials the other regions' proxies only.
func TestGatewayConfig(t *testing.T) {
	n := &clusterNode{name: "east-n1", index: 1, host: "127.0.0.1", port: 4222, clusterPort: 6222, httpPort: 8222, dir: t.TempDir()}
	opts := clusterOptions{name: "east", gateway: &gatewayOptions{
		listen:    []int{7001, 7002, 7003},
		advertise: []string{"127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003"},
		remotes:   map[string][]string{"west": {"nats://127.0.0.1:9101", "nats://127.0.0.1:9102"}},
	}}.withDefaults()
	conf := n.config(opts.name, nil, opts)
	for _, want := range []string{
		"gateway {", `name: "east"`, `listen: "127.0.0.1:7002"`, `advertise: "127.0.0.1:9002"`,
		`{name: "west", urls: ["nats://127.0.0.1:9101", "nats://127.0.0.1:9102"]}`,
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("config lacks %s:\n%s", want, conf)
		}
	}
	if strings.Contains(conf, "9001") || strings.Contains(conf, "7001") {
		t.Errorf("node 1's config names another node's gateway:\n%s", conf)
	}
	if plain := n.config("uid-soak", nil, clusterOptions{}.withDefaults()); strings.Contains(plain, "gateway") {
		t.Errorf("a cluster without gateway options has a gateway:\n%s", plain)
	}
}

func TestSetEnv(t *testing.T) {
	env := []string{"A=1", "DISPENSER_SEQUENCES=orders", "B=2"}
	env = setEnv(env, "DISPENSER_SEQUENCES", "")
	env = setEnv(env, "A", "3")
	env = setEnv(env, "C", "4")
	if want := []string{"B=2", "A=3", "C=4"}; !slices.Equal(env, want) {
		t.Errorf("env %q, want %q", env, want)
	}
}

// The figures read the serving region from the IDs' worker field: a
// call of an east client answered with a west worker ID was served by
// west, and counts as failed over inside a region-down window of east
// and as local-first broken outside every one.
func TestRegionFigures(t *testing.T) {
	m, err := regionsMap(2)
	if err != nil {
		t.Fatal(err)
	}
	const east, west = 1, 65536 + 1
	rec := newRecorder(time.Now())
	call := func(l *clientLog, at, took time.Duration, ids []uint64, fail bool) {
		var err error
		if fail {
			err = fmt.Errorf("natsio: uid.next: %w after 3 attempt(s)", context.DeadlineExceeded)
		}
		l.record(rec, rec.origin.Add(at), took, ids, err)
	}
	e := &clientLog{id: 0, kind: kindNext, fleet: "uid", region: "east"}
	call(e, 1*time.Second, 2*time.Millisecond, []uint64{id(t, testSecond, east, 0)}, false)
	call(e, 10*time.Second, 70*time.Millisecond, []uint64{id(t, testSecond, west, 0)}, false) // in east's region-down
	call(e, 11*time.Second, 3*time.Second, nil, true)                                         // failed in it
	call(e, 30*time.Second, 60*time.Millisecond, []uint64{id(t, testSecond, west, 1)}, false) // outside every window
	w := &clientLog{id: 1, kind: kindBatch, fleet: "uid", region: "west"}
	call(w, 2*time.Second, 4*time.Millisecond, []uint64{id(t, testSecond, west, 5), id(t, testSecond, west, 6)}, false)
	p := &clientLog{id: 2, kind: kindPrefetch, fleet: "uidkv", region: "west"}
	call(p, 3*time.Second, time.Millisecond, []uint64{id(t, testSecond, east, 9)}, false) // IDs count, the latency does not
	// A sequence client's numbers are no IDs: this one, in west's worker
	// range read as an ID, counts nowhere among them.
	sq := &clientLog{id: 3, kind: kindSeqNext, fleet: "uid", seq: "orders", region: "east"}
	sq.recordFrom(rec, rec.origin.Add(4*time.Second), 2*time.Millisecond, []uint64{id(t, testSecond, west, 2)}, "A", nil)
	faults := []faultRecord{{Kind: faultRegionDown, Target: "east", Start: 9 * time.Second, End: 20 * time.Second}}

	f := computeRegionFigures(m, 30*time.Millisecond, faults, []*clientLog{e, w, p, sq}, rec.kinds, map[string]string{"orders": "east"})
	eastF, westF := f.Regions[0], f.Regions[1]
	if eastF.Name != "east" || eastF.IDsReceived != 3 || eastF.IDsIssued != 2 || eastF.IDsElsewhere != 2 || eastF.Calls != 4 || eastF.CallsElsewhere != 2 {
		t.Errorf("east: %+v", eastF)
	}
	if westF.Name != "west" || westF.IDsReceived != 3 || westF.IDsIssued != 4 || westF.IDsElsewhere != 1 || westF.CallsElsewhere != 0 {
		t.Errorf("west: %+v", westF)
	}
	if f.Local.Calls != 2 || f.FailedOver.Calls != 2 || f.FailedOver.P50 != 70*time.Millisecond || f.Local.P99 != 4*time.Millisecond {
		t.Errorf("latency: local %+v, failed over %+v", f.Local, f.FailedOver)
	}
	if f.FailedOverQuiet != 1 {
		t.Errorf("failed over outside every region-down window: %d, want 1", f.FailedOverQuiet)
	}
	if f.DownRegion.Faults != 1 || f.DownRegion.Calls != 2 || f.DownRegion.Failed != 1 {
		t.Errorf("the downed region's calls: %+v", f.DownRegion)
	}
	if len(f.Sequences) != 1 || f.Sequences[0] != (RegionSeqFigure{Sequence: "uid.orders", Home: "east", From: "east", Calls: 1, Numbers: 1,
		Latency: Latency{Calls: 1, P50: 2 * time.Millisecond, P99: 2 * time.Millisecond}}) {
		t.Errorf("sequences %+v", f.Sequences)
	}
}

// seqCallAt records one call of a homed sequence's client at second at:
// numbers, a HomeUnreachableError (home set) or a deadline.
func seqCallAt(rec *recorder, l *clientLog, at int, nums []uint64, home string) {
	var err error
	switch {
	case home != "":
		err = &uidclient.HomeUnreachableError{Subject: "uid.seq." + l.seq + ".next", Sequence: l.seq, Home: home, Err: nats.ErrNoResponders}
	case nums == nil:
		err = fmt.Errorf("uidclient: uid.seq.%s.next: %w after 3 attempt(s)", l.seq, context.DeadlineExceeded)
	}
	l.recordFrom(rec, rec.origin.Add(time.Duration(at)*time.Second), time.Millisecond, nums, "A", err)
}

// A HomeUnreachableError is the documented unavailability only while
// the sequence's home region is down, or, for a caller of another
// region, while the gateways are cut: the same error of a local call
// during the cut, in another fault's window or outside every one is a
// failure, and so is any other error.
func TestHomedSequenceFigures(t *testing.T) {
	rec := newRecorder(time.Now())
	homes := map[string]string{"orders": "east", "invoices": "west"}
	s := time.Second
	faults := []faultRecord{
		{Kind: faultRegionDown, Target: "east", Start: 10 * s, End: 20 * s},
		{Kind: faultGatewayCut, Target: "gateways", Start: 30 * s, End: 40 * s},
		{Kind: faultNodeEach, Target: "east-n0+west-n0", Start: 50 * s, End: 60 * s},
	}
	eastOrders := &clientLog{id: 0, kind: kindSeqNext, fleet: "uid", seq: "orders", region: "east"}
	seqCallAt(rec, eastOrders, 1, []uint64{1}, "")
	seqCallAt(rec, eastOrders, 12, nil, "east") // home down: documented
	seqCallAt(rec, eastOrders, 35, []uint64{2}, "")
	seqCallAt(rec, eastOrders, 36, nil, "east") // local during the cut: not
	seqCallAt(rec, eastOrders, 55, nil, "")     // a deadline
	westOrders := &clientLog{id: 1, kind: kindSeqBatch, fleet: "uid", seq: "orders", region: "west"}
	seqCallAt(rec, westOrders, 2, []uint64{3, 4}, "")
	seqCallAt(rec, westOrders, 13, nil, "east") // home down: documented
	seqCallAt(rec, westOrders, 33, nil, "east") // cut off from its home: documented
	seqCallAt(rec, westOrders, 52, nil, "east") // in a node kill's window: not
	seqCallAt(rec, westOrders, 80, nil, "east") // outside every window: not
	// Started just before east's dispensers were killed, failed in it:
	// documented.
	westOrders.recordFrom(rec, rec.origin.Add(9*s), 2*s, nil, "", &uidclient.HomeUnreachableError{Sequence: "orders", Home: "east", Err: nats.ErrNoResponders})
	westInvoices := &clientLog{id: 2, kind: kindSeqNext, fleet: "uid", seq: "invoices", region: "west"}
	seqCallAt(rec, westInvoices, 14, nil, "west") // east is down, not its home: not
	id := &clientLog{id: 3, kind: kindNext, fleet: "uid", region: "west"}
	seqCallAt(rec, id, 15, nil, "") // an ID client's failure: no sequence window's

	logs := []*clientLog{eastOrders, westOrders, westInvoices, id}
	undocumented := examples{}
	figs := regionSeqFigures(faults, logs, rec.kinds, homes, &undocumented)
	if undocumented.n != 4 || !strings.Contains(strings.Join(undocumented.shown, "\n"), "client 1 (seq-batch, uid.orders from west, node 0) at 52s: 2s after the start of nats-kill-node-each") {
		t.Errorf("undocumented home unreachable: %d, %q", undocumented.n, undocumented.shown)
	}
	want := []RegionSeqFigure{
		{Sequence: "uid.invoices", Home: "west", From: "west", Calls: 1, HomeUnreachable: 1},
		{Sequence: "uid.orders", Home: "east", From: "east", Calls: 5, Numbers: 2, HomeUnreachable: 2, Documented: 1, OtherFailed: 1},
		{Sequence: "uid.orders", Home: "east", From: "west", Calls: 6, Numbers: 2, HomeUnreachable: 5, Documented: 3},
	}
	if len(figs) != len(want) {
		t.Fatalf("figures %+v", figs)
	}
	for i := range want {
		want[i].Latency = figs[i].Latency
		if figs[i] != want[i] {
			t.Errorf("figure %d: %+v, want %+v", i, figs[i], want[i])
		}
	}
	if figs[1].Latency.Calls != 2 || figs[0].Latency.Calls != 0 {
		t.Errorf("latency of the calls that got numbers: %+v, %+v", figs[1].Latency, figs[0].Latency)
	}

	seqLogs := logs[:3]
	w, v := faultWindowsExcusing(seqLogs, faults, func(string) bool { return true }, seqUnavailable(rec.kinds, homes))
	if len(v) != 0 {
		t.Errorf("violations %q on too few calls to judge", v)
	}
	for kind, want := range map[string][3]int{
		faultRegionDown: {3, 1, 2}, // calls, failed, documented unavailable
		faultGatewayCut: {3, 1, 1},
		faultNodeEach:   {2, 2, 0},
	} {
		if got := w[kind]; got == nil || [3]int{got.Calls, got.Failed, got.Unavailable} != want {
			t.Errorf("%s window %+v, want calls, failed, unavailable %v", kind, got, want)
		}
	}
}

// The documented unavailability is outside the 1 % target: 200 calls cut
// off from their home and 1 other failure among 101 calls pass, 2 among
// 102 do not.
func TestHomedSequenceWindowTarget(t *testing.T) {
	homes := map[string]string{"orders": "east"}
	cut := faultRecord{Kind: faultGatewayCut, Target: "gateways", Start: 0, End: 100 * time.Second}
	for other, wantViolation := range map[int]bool{1: false, 2: true} {
		rec := newRecorder(time.Now())
		l := &clientLog{kind: kindSeqNext, fleet: "uid", seq: "orders", region: "west"}
		at := 0
		for range 200 {
			seqCallAt(rec, l, at%100, nil, "east")
			at++
		}
		for i := range 100 + other {
			var nums []uint64
			if i >= other {
				nums = []uint64{uint64(i + 1)}
			}
			seqCallAt(rec, l, at%100, nums, "")
			at++
		}
		w, v := faultWindowsExcusing([]*clientLog{l}, []faultRecord{cut}, func(string) bool { return true }, seqUnavailable(rec.kinds, homes))
		if got := w[faultGatewayCut]; got.Unavailable != 200 || got.Failed != other {
			t.Errorf("%d other failures: window %+v", other, got)
		}
		if (len(v) == 1) != wantViolation || wantViolation && !strings.Contains(v[0], fmt.Sprintf("%d of %d calls failed", other, 100+other)) {
			t.Errorf("%d other failures among %d calls: violations %q, want one: %v", other, 100+other, v, wantViolation)
		}
	}
}

func TestHomedSequences(t *testing.T) {
	seqs := homedSequences([]string{"east", "west", "north"})
	if got, want := sequencesEnv(seqs), "orders@east=1,invoices@west=1000000,payments@north=2000001"; got != want {
		t.Errorf("DISPENSER_SEQUENCES=%s, want %s", got, want)
	}
	if got := sequencesEnv(sequences); got != "orders=1,invoices=1000000" {
		t.Errorf("the ordinary mode's DISPENSER_SEQUENCES=%s", got)
	}
	// The default 8 clients of a region: both kinds, both sequences,
	// both fleets.
	seen := map[string]bool{}
	for j := range 8 {
		kind, name, f := seqClient(j, seqs[:2])
		seen[fmt.Sprint(kind, name, f.name)] = true
	}
	if len(seen) != 8 {
		t.Errorf("8 sequence clients cover %d combinations: %v", len(seen), seen)
	}
}

func TestRegionsFaultKinds(t *testing.T) {
	cfg := Config{Regions: 2}
	if got := cycleFrom(cfg.kinds(), nil, true); !slices.Equal(got, regionFaultCycle) {
		t.Errorf("regions cycle %v", got)
	}
	if err := checkFaultKindsOf(cfg.kinds(), []string{faultGatewayCut, faultKillKVLeader}); err != nil {
		t.Error(err)
	}
	if err := checkFaultKindsOf(cfg.kinds(), []string{faultZombie}); err == nil {
		t.Error("the ordinary soak's zombie accepted in regions mode")
	}
	if err := checkFaultKinds([]string{faultRegionDown}); err == nil {
		t.Error("region-down accepted in the ordinary soak")
	}
}
