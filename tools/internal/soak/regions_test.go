package soak

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
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
	faults := []faultRecord{{Kind: faultRegionDown, Target: "east", Start: 9 * time.Second, End: 20 * time.Second}}

	f := computeRegionFigures(m, 30*time.Millisecond, faults, []*clientLog{e, w, p})
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
