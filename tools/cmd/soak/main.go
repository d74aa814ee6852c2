// Command soak runs uid-dispenser's fault-injection soak (package
// tools/internal/soak): a 3-node cluster of nats-server processes, a mariadbd
// of its own behind a cuttable proxy, two fleets of dispenser processes
// (three leasing worker IDs on MySQL, two on a JetStream KV bucket), ID
// and named-sequence clients, with dispensers killed, stopped, paused
// and cut off, NATS nodes (stream leaders) killed and paused, and
// mariadbd killed and paused on a schedule; at the end every ID and
// sequence number received is checked for duplicates and order, every
// call for its deadline, every process for leaks.
//
//	make soak-short                           # from the repository root
//	make soak SOAK_DURATION=10m SOAK_FLAGS=
//	cd tools && go run ./cmd/soak -duration 60m -chart ../docs/soak-long.svg -summary-md ../docs/soak-long.md
//
// It exits 0 when the run found no violation, 1 when it found one, 2 when
// it could not run (no MySQL, bad flags). Without -dispenser it builds
// cmd/dispenser first, and without -nats-server it builds the product
// go.mod's nats-server once into the user's cache directory, both in the
// product's module (run it inside the tools module or the product's).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/soak"
)

func main() {
	os.Exit(run())
}

func run() int {
	def := soak.DefaultConfig()
	if d, err := time.ParseDuration(os.Getenv("SOAK_DURATION")); err == nil {
		def.Duration = d
	}
	if dsn := os.Getenv("UID_TEST_MYSQL_DSN"); dsn != "" {
		def.MySQLDSN = dsn
	}
	cfg := def
	flags := flag.NewFlagSet("soak", flag.ContinueOnError)
	flags.DurationVar(&cfg.Duration, "duration", def.Duration, "how long the clients run (env SOAK_DURATION); the first fault cycle always completes")
	flags.StringVar(&cfg.DispenserBin, "dispenser", "", "dispenser binary (default: go build ./cmd/dispenser into a temporary directory)")
	flags.StringVar(&cfg.NATSServerBin, "nats-server", "", "nats-server binary the nodes run (default: go.mod's version, built once into the user's cache directory)")
	flags.StringVar(&cfg.MySQLDSN, "mysql", def.MySQLDSN, "MySQL DSN (env UID_TEST_MYSQL_DSN) of the server used with -external-mysql or when no mariadbd is installed; without a database name a fresh one is created and dropped")
	flags.BoolVar(&cfg.ExternalMySQL, "external-mysql", false, "use the -mysql server instead of starting a mariadbd of the soak's own (no mysql-kill and mysql-pause faults)")
	flags.IntVar(&cfg.SeqClients, "seq-clients", def.SeqClients, "clients asking for named sequence numbers, both fleets (regions mode: in each region, for the sequences homed in every region; 0: none)")
	flags.StringVar(&cfg.WorkDir, "work-dir", "", "directory for logs and NATS stores (default: temporary, removed after a passing run)")
	flags.BoolVar(&cfg.Keep, "keep", false, "keep the work directory after a passing run")
	flags.Float64Var(&cfg.Rate, "rate", def.Rate, "load multiplier (1: about 40,000 IDs/s over 16 clients)")
	flags.IntVar(&cfg.BulkClients, "bulk-clients", def.BulkClients, "clients asking for batches of 4,096 in the high-rate phase (0: none)")
	flags.Float64Var(&cfg.BulkRate, "bulk-rate", def.BulkRate, "IDs/s each bulk client asks for in the high-rate phase")
	flags.DurationVar(&cfg.LeaseTTL, "lease-ttl", def.LeaseTTL, "the dispensers' DISPENSER_LEASE_TTL")
	flags.DurationVar(&cfg.NATSWriteDeadline, "nats-write-deadline", def.NATSWriteDeadline, "the NATS nodes' write_deadline (0: nats-server's default, 10s)")
	flags.IntVar(&cfg.Regions, "regions", 0, "run the regions mode with this many regions (2 to 4): a 3-node NATS cluster per region joined by gateways through cuttable proxies, both fleets in every region, the regions faults (docs/soak.md, Across regions); 0: the ordinary soak")
	flags.DurationVar(&cfg.GatewayDelay, "gateway-delay", 30*time.Millisecond, "regions mode: delay of every gateway link, each way (0: none)")
	flags.DurationVar(&cfg.RegionDown, "region-down", 10*time.Second, "regions mode: how long a region-down fault keeps a region's dispensers down")
	faults := flags.String("faults", "", "comma-separated fault kinds to inject, the others left out (default: every kind; e.g. nats-kill-kv-leader runs only KV leader kills, back to back)")
	summaryPath := flags.String("json", "", "also write the summary as JSON to this file")
	chartPath := flags.String("chart", "", "also write the chart (IDs/s and failed calls over time, faults marked; SVG) to this file, e.g. docs/soak-long.svg")
	mdPath := flags.String("summary-md", "", "also write the summary as a Markdown table to this file (linking the -chart), e.g. docs/soak-long.md")
	quiet := flags.Bool("q", false, "no progress lines")
	if err := flags.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if cfg.GatewayDelay == 0 {
		cfg.GatewayDelay = -1 // Config's zero means the default
	}
	if !*quiet {
		cfg.Progress = os.Stdout
	}
	for k := range strings.SplitSeq(*faults, ",") {
		if k = strings.TrimSpace(k); k != "" {
			cfg.Faults = append(cfg.Faults, k)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if cfg.DispenserBin == "" {
		dir, err := os.MkdirTemp("", "uid-soak-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			return 2
		}
		defer os.RemoveAll(dir)
		cfg.DispenserBin = filepath.Join(dir, "dispenser")
		if err := soak.BuildDispenser(ctx, cfg.DispenserBin); err != nil {
			fmt.Fprintln(os.Stderr, "soak: building the dispenser:", err)
			return 2
		}
	}

	if cfg.NATSServerBin == "" {
		bin, err := soak.NATSServerBinary(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		cfg.NATSServerBin = bin
	}

	sum, err := soak.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	sum.Print(os.Stdout)
	if *summaryPath != "" {
		data, err := json.MarshalIndent(sum, "", "  ")
		if err == nil {
			err = os.WriteFile(*summaryPath, data, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak: writing the summary:", err)
			return 2
		}
	}
	if err := sum.WriteReports(*chartPath, *mdPath); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 2
	}
	if sum.Failed() {
		return 1
	}
	return 0
}
