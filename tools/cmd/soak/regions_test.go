package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
)

// RegionsEnv runs TestSoakRegions when set to 1: a minute of the
// regions mode took 120 s with its builds on two loaded cores, beyond
// what `make test` has room for (`make soak-regions` is the way to run it otherwise).
const RegionsEnv = "UID_SOAK_REGIONS"

// TestSoakRegions runs the regions mode (-regions 2) for a minute: two
// 3-node clusters joined by gateways, every fault kind of the mode at
// least once (a region's dispensers killed, the gateways cut, a node of
// each cluster and a region's KV leader killed), no violation, IDs from
// both regions and calls served across the gateway while a region was
// down, and numbers of both homed sequences called from both regions.
func TestSoakRegions(t *testing.T) {
	if os.Getenv(RegionsEnv) != "1" {
		t.Skipf("the regions soak takes two minutes: %s=1 to run it", RegionsEnv)
	}
	bin := buildSoak(t)
	summaryPath := filepath.Join(t.TempDir(), "summary.json")
	args := []string{"-regions", "2", "-duration", "60s", "-dispenser", filepath.Join(bin, "dispenser"), "-json", summaryPath}
	if !mariadbInstalled() {
		args = append(args, "-mysql", testenv.MySQL(t))
	}
	var sum struct {
		Duplicates int               `json:"duplicates"`
		Violations []string          `json:"violations"`
		Faults     map[string]int    `json:"faults"`
		FleetIDs   map[string]uint64 `json:"ids_by_fleet"`
		Regions    struct {
			Regions []struct {
				Name           string `json:"name"`
				IDsIssued      uint64 `json:"ids_issued"`
				CallsElsewhere int    `json:"calls_served_by_another_region"`
			} `json:"regions"`
			FailedOver struct {
				Calls int `json:"calls"`
			} `json:"failed_over"`
			Sequences []struct {
				Sequence string `json:"sequence"`
				Home     string `json:"home"`
				From     string `json:"from"`
				Numbers  uint64 `json:"numbers"`
			} `json:"sequences"`
		} `json:"regions"`
		Sequences map[string]struct {
			Duplicates int `json:"duplicates"`
		} `json:"sequences"`
	}
	if err := json.Unmarshal(runSoak(t, bin, summaryPath, args), &sum); err != nil {
		t.Fatalf("summary: %v", err)
	}
	if sum.Duplicates != 0 || len(sum.Violations) != 0 {
		t.Fatalf("duplicates %d, violations %q", sum.Duplicates, sum.Violations)
	}
	for _, kind := range []string{"region-down", "gateway-cut", "nats-kill-node-each", "nats-kill-kv-leader"} {
		if sum.Faults[kind] == 0 {
			t.Errorf("no %s fault injected", kind)
		}
	}
	for _, fleet := range []string{"uid", "uidkv"} {
		if sum.FleetIDs[fleet] == 0 {
			t.Errorf("no IDs from fleet %s", fleet)
		}
	}
	if len(sum.Regions.Regions) != 2 {
		t.Fatalf("regions %+v, want east and west", sum.Regions.Regions)
	}
	// The minute's cycle takes east's dispensers down first: its clients
	// must have been served by west through the gateway.
	for _, r := range sum.Regions.Regions {
		if r.IDsIssued == 0 {
			t.Errorf("region %s issued no ID", r.Name)
		}
	}
	if east := sum.Regions.Regions[0]; east.CallsElsewhere == 0 || sum.Regions.FailedOver.Calls == 0 {
		t.Errorf("no call of east's clients served by another region while east was down: %+v", sum.Regions)
	}
	// Each fleet's orders@east and invoices@west, each called from both
	// regions (locally and through the gateway), with numbers to show.
	if len(sum.Regions.Sequences) != 8 {
		t.Errorf("sequence figures %+v, want 2 sequences × 2 fleets × 2 calling regions", sum.Regions.Sequences)
	}
	for _, f := range sum.Regions.Sequences {
		if f.Numbers == 0 {
			t.Errorf("%s@%s from %s: no numbers", f.Sequence, f.Home, f.From)
		}
	}
	for name, f := range sum.Sequences {
		if f.Duplicates != 0 {
			t.Errorf("sequence %s: %d duplicates", name, f.Duplicates)
		}
	}
}
