package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
)

// TestSoakShort runs the soak for a minute, as CI does: every kind of
// fault at least once, and no violation. The soak and the dispenser are
// built without the race detector (a 3-node JetStream cluster and five
// dispensers under -race would not fit two cores in a minute); the soak's
// checks are tested under -race in internal/soak. The soak builds
// nats-server once into the user's cache directory; later runs reuse it.
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak runs for a minute")
	}
	dsn := testenv.MySQL(t) // a fresh database; skips without MySQL unless UID_REQUIRE_MYSQL=1
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin, ".", "../dispenser")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	summaryPath := filepath.Join(t.TempDir(), "summary.json")
	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "soak"), "-duration", "60s", "-dispenser", filepath.Join(bin, "dispenser"),
		"-mysql", dsn, "-json", summaryPath)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("soak output:\n%s", out.String())
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		t.Fatal("the soak found violations (see its output)")
	}
	if err != nil {
		t.Fatalf("the soak did not run: %v", err)
	}

	data, err := os.ReadFile(summaryPath)
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		IDsChecked      uint64            `json:"ids_checked"`
		IDs             map[string]uint64 `json:"ids"`
		FleetIDs        map[string]uint64 `json:"ids_by_fleet"`
		Duplicates      int               `json:"duplicates"`
		Faults          map[string]int    `json:"faults"`
		ZombieTakeovers int               `json:"zombie_takeovers"`
		Violations      []string          `json:"violations"`
	}
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatalf("summary: %v", err)
	}
	if sum.Duplicates != 0 || len(sum.Violations) != 0 {
		t.Fatalf("duplicates %d, violations %q", sum.Duplicates, sum.Violations)
	}
	// A minute at the default load hands out about two million IDs; a
	// tenth of that still shows that every way of getting IDs worked.
	if sum.IDsChecked < 200_000 {
		t.Errorf("only %d IDs checked", sum.IDsChecked)
	}
	for _, kind := range []string{"next", "batch", "prefetch", "blocks"} {
		if sum.IDs[kind] == 0 {
			t.Errorf("no IDs by %s", kind)
		}
	}
	for _, fleet := range []string{"uid", "uidkv"} { // MySQL and JetStream KV worker IDs
		if sum.FleetIDs[fleet] == 0 {
			t.Errorf("no IDs from fleet %s", fleet)
		}
	}
	for _, kind := range []string{"kill9", "sigterm", "nats-kill-kv-leader", "mysql-cut-short", "nats-pause", "partition-short",
		"nats-kill-blocks-leader", "mysql-cut-long", "partition-long", "zombie"} {
		if sum.Faults[kind] == 0 {
			t.Errorf("no %s fault injected", kind)
		}
	}
	if sum.ZombieTakeovers == 0 {
		t.Error("no dispenser took a paused dispenser's worker ID over")
	}
}
