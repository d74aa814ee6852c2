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
	"github.com/uid-dispenser/uid-dispenser/tools/internal/soak"
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
	ownMySQL := mariadbInstalled()
	bin := buildSoak(t)
	reports := t.TempDir()
	summaryPath := filepath.Join(reports, "summary.json")
	chartPath, mdPath := filepath.Join(reports, "chart", "soak.svg"), filepath.Join(reports, "soak.md")
	if err := os.Mkdir(filepath.Dir(chartPath), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"-duration", "60s", "-dispenser", filepath.Join(bin, "dispenser"),
		"-json", summaryPath, "-chart", chartPath, "-summary-md", mdPath}
	if !ownMySQL {
		// The soak falls back to the machine's server: a fresh database on
		// it (skips without one unless UID_REQUIRE_MYSQL=1).
		args = append(args, "-mysql", testenv.MySQL(t))
	}
	data := runSoak(t, bin, summaryPath, args)
	var sum struct {
		IDsChecked      uint64            `json:"ids_checked"`
		IDs             map[string]uint64 `json:"ids"`
		FleetIDs        map[string]uint64 `json:"ids_by_fleet"`
		Duplicates      int               `json:"duplicates"`
		Faults          map[string]int    `json:"faults"`
		ZombieTakeovers int               `json:"zombie_takeovers"`
		Violations      []string          `json:"violations"`
		MySQL           string            `json:"mysql"`
		Sequences       map[string]struct {
			HandedOut uint64 `json:"handed_out"`
			Instances int    `json:"instances"`
		} `json:"sequences"`
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
	// Both fleets serve the sequences, each from its own store. Segments
	// of at most 2,000 numbers (DISPENSER_SEQUENCE_MAX_STEP) and two held
	// per instance: more numbers than that means they turned over.
	for _, name := range []string{"uid.orders", "uid.invoices", "uidkv.orders", "uidkv.invoices"} {
		if f := sum.Sequences[name]; f.HandedOut < 2*2000 || f.Instances < 2 {
			t.Errorf("sequence %s: %d numbers from %d instances; want segments turned over on several dispensers", name, f.HandedOut, f.Instances)
		}
	}
	faults := []string{"kill9", "sigterm", "nats-kill-kv-leader", "mysql-cut-short", "nats-pause", "partition-short",
		"nats-kill-blocks-leader", "blocks-recreate", "mysql-cut-long", "partition-long", "zombie"}
	switch {
	case sum.MySQL == "own mariadbd":
		faults = append(faults, "mysql-kill", "mysql-pause")
	case ownMySQL:
		t.Errorf("MySQL %q, with mariadbd installed: want the soak's own", sum.MySQL)
	default:
		t.Logf("MySQL %q (no mariadbd installed): no mysql-kill and mysql-pause faults", sum.MySQL)
	}
	for _, kind := range faults {
		if sum.Faults[kind] == 0 {
			t.Errorf("no %s fault injected", kind)
		}
	}
	chart, err := os.ReadFile(chartPath)
	if err != nil || !bytes.Contains(chart, []byte("<path")) || !bytes.Contains(chart, []byte(">kill9<")) {
		t.Errorf("chart %s (%v): want the IDs/s line and the faults marked", chartPath, err)
	}
	md, err := os.ReadFile(mdPath)
	if err != nil || !bytes.Contains(md, []byte("| result | PASS |")) || !bytes.Contains(md, []byte("](chart/soak.svg)")) {
		t.Errorf("summary %s (%v):\n%s", mdPath, err, md)
	}
	if sum.ZombieTakeovers == 0 {
		t.Error("no dispenser took a paused dispenser's worker ID over")
	}
}

// buildSoak builds the soak and the dispenser (without the race
// detector) into a temporary directory, which it returns.
func buildSoak(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := soak.BuildDispenser(t.Context(), filepath.Join(bin, "dispenser")); err != nil {
		t.Fatal(err)
	}
	return bin
}

// runSoak runs bin's soak with args, fails the test when it finds a
// violation or does not run, and returns the JSON summary it wrote to
// summaryPath (one of args).
func runSoak(t *testing.T, bin, summaryPath string, args []string) []byte {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "soak"), args...)
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
	return data
}

// mariadbInstalled tells whether the soak can start a mariadbd of its own
// (as internal/soak looks for it).
func mariadbInstalled() bool {
	found := func(names ...string) bool {
		for _, name := range names {
			if _, err := exec.LookPath(name); err == nil {
				return true
			}
		}
		return false
	}
	return found("mariadbd", "/usr/sbin/mariadbd", "mysqld", "/usr/sbin/mysqld") && found("mariadb-install-db", "mysql_install_db")
}
