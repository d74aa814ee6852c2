// Command faults is the fault harness (tools/internal/faults,
// docs/faults.md): a NATS cluster, dispensers and clients, each in a
// network namespace of its own, partitions, link faults, pauses, kills,
// power loss and clock steps on a schedule drawn from a seed, and a
// checker that reads only the clients' histories and the dispensers'
// logs. It needs root. It exits 1 when the check fails or a fault could
// not be proven to have happened.
//
//	faults -duration 3m -summary out.json
//
// `faults table out.json` prints a summary's figures as the tables of
// docs/faults.md; `faults recheck out.json DIR` checks the run's work
// directory again first. `faults client ...` is the client process the harness runs inside a
// client host; it is not meant to be run by hand.
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

	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults"
	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/client"
	"github.com/uid-dispenser/uid-dispenser/tools/internal/soak"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "client":
		err = runClient(ctx, os.Args[2:])
	case len(os.Args) > 2 && os.Args[1] == "table":
		err = printTable(os.Args[2], "")
	case len(os.Args) > 3 && os.Args[1] == "recheck":
		err = printTable(os.Args[2], os.Args[3])
	default:
		err = runHarness(ctx, os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
}

// printTable prints a summary file's figures as docs/faults.md's tables;
// with a work directory, after checking its histories and logs again.
func printTable(path, recheckDir string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var s faults.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if recheckDir != "" {
		if s.Check, err = faults.Recheck(recheckDir, &s); err != nil {
			return err
		}
		overlaps := append(s.Check.LeaseOverlaps, s.Check.SegmentOverlaps...)
		for _, o := range overlaps[:min(len(overlaps), 10)] {
			fmt.Printf("overlap: %s: %s and %s: (%d, %d]\n", o.Key, o.A, o.B, o.Lo, o.Hi)
		}
		s.LeaseOverlaps, s.SegmentOverlaps = len(s.Check.LeaseOverlaps), len(s.Check.SegmentOverlaps)
		s.LeaseClaims, s.Segments = s.Check.Claims, s.Check.Segments
		s.IDs.Duplicated, s.Numbers.Duplicated = s.Check.IDs.Duplicated, s.Check.Numbers.Duplicated
	}
	if s.Check == nil {
		return fmt.Errorf("%s: no check in the summary", path)
	}
	fmt.Print(s.Markdown())
	return nil
}

func runClient(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("faults client", flag.ExitOnError)
	var cfg client.Config
	var seqs, prefixes string
	fs.StringVar(&prefixes, "prefixes", "uid", "the fleets' subject prefixes, comma-separated")
	fs.StringVar(&cfg.Name, "name", "c0", "the process's name in the history")
	fs.StringVar(&cfg.URLs, "nats", "", "NATS URLs, comma-separated")
	fs.StringVar(&cfg.History, "history", "history.jsonl", "history file to write")
	fs.IntVar(&cfg.Workers, "workers", 4, "concurrent callers")
	fs.StringVar(&seqs, "sequences", "orders", "sequence names, comma-separated")
	fs.IntVar(&cfg.MaxCount, "max-count", 20, "each call asks for 1..max-count values")
	fs.DurationVar(&cfg.Pause, "pause", 10*time.Millisecond, "pause between a worker's calls")
	fs.DurationVar(&cfg.Timeout, "timeout", 2*time.Second, "a call unanswered this long is unknown")
	retry := fs.Bool("retry", true, "retry no responders and 503s within the timeout")
	fs.IntVar(&cfg.MoveAfter, "move-after", 0, "move off a server after this many attempts in a row of one fleet ended in no responders, as the product's clients do (0: their default, 2; negative: never)")
	_ = fs.Parse(args)
	cfg.NoRetry = !*retry
	if seqs != "" {
		cfg.Sequences = strings.Split(seqs, ",")
	}
	cfg.Prefixes = strings.Split(prefixes, ",")
	return client.Run(ctx, cfg)
}

func runHarness(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("faults", flag.ExitOnError)
	var cfg faults.Config
	var kinds, summary, natsBin string
	fs.DurationVar(&cfg.Duration, "duration", time.Minute, "how long faults are injected")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed of the schedule (0: from the time)")
	fs.StringVar(&cfg.Dir, "dir", "", "work directory, kept (default: a new temporary one)")
	fs.IntVar(&cfg.Nodes, "nodes", 3, "nats-server nodes")
	fs.IntVar(&cfg.Dispensers, "dispensers", 3, "dispenser processes")
	fs.IntVar(&cfg.Clients, "clients", 2, "client processes")
	fs.IntVar(&cfg.Workers, "workers", 4, "callers per client process")
	fs.StringVar(&kinds, "kinds", "", "fault kinds to inject, comma-separated (default: "+strings.Join(faults.AllKinds, ", ")+", "+faults.KindMySQL+" with -mysql)")
	fs.BoolVar(&cfg.MySQL, "mysql", true, "add a fleet of 2 dispensers on MySQL (a mariadbd primary and an async replica in hosts of their own) and the mysql-failover fault")
	fs.BoolVar(&cfg.SyncAlways, "sync-always", false, "run the nodes with sync_interval: always")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", 6*time.Second, "the dispensers' lease TTL (pauses last longer)")
	fs.Float64Var(&cfg.AloneShare, "alone", 0.5, "the share of faults (0 to 1) after a quiet gap longer than the recovery period, so that the checker measures each kind alone too")
	fs.DurationVar(&cfg.PingInterval, "dispenser-ping", faults.DefaultPingInterval, "the dispensers' NATS ping interval (DISPENSER_NATS_PING_INTERVAL): one on a server cut off from its cluster leaves it after 2 to 3 of them")
	fs.DurationVar(&cfg.HoldMax, "hold-max", 15*time.Second, "longest a fault is held (from a third of it)")
	fs.StringVar(&cfg.Dispenser, "dispenser", "", "a dispenser binary built with -tags faultclock (default: built now)")
	fs.StringVar(&summary, "summary", "", "write the JSON summary to this file")
	clientRetry := fs.Bool("client-retry", true, "the clients retry no responders, 503s, timed-out requests (1 s each) and requests lost with the connection within a call's 2 s timeout, as the product's clients do")
	clientMove := fs.Bool("client-move", true, "the clients move off a server cut off from its cluster (2 attempts of a fleet in a row with no responders), as the product's clients do")
	fs.StringVar(&natsBin, "nats-server", "", "nats-server binary (default: ~/go/bin/nats-server, else built from go.mod's version)")
	_ = fs.Parse(args)
	cfg.NoClientRetry = !*clientRetry
	cfg.NoClientMove = !*clientMove
	if kinds != "" {
		cfg.Kinds = strings.Split(kinds, ",")
	}
	cfg.Log = os.Stderr
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "faults-")
		if err != nil {
			return err
		}
		cfg.Dir = dir
	}
	var err error
	if cfg.Self, err = os.Executable(); err != nil {
		return err
	}
	if cfg.NATSServer, err = natsServer(ctx, natsBin); err != nil {
		return err
	}
	if cfg.Dispenser == "" {
		cfg.Dispenser = filepath.Join(cfg.Dir, "dispenser-faultclock")
		if err := soak.BuildDispenser(ctx, cfg.Dispenser, "faultclock"); err != nil {
			return err
		}
	}
	s, err := faults.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if summary != "" {
		if err := faults.WriteSummary(summary, s); err != nil {
			return err
		}
	}
	fmt.Println(s.Markdown())
	brief := *s
	brief.Proofs, brief.Check = nil, nil
	b, _ := json.MarshalIndent(brief, "", "  ")
	fmt.Println(string(b))
	if !s.Passed {
		return fmt.Errorf("the run failed (work directory %s)", cfg.Dir)
	}
	return nil
}

func natsServer(ctx context.Context, flagged string) (string, error) {
	if flagged != "" {
		return flagged, nil
	}
	if home, err := os.UserHomeDir(); err == nil {
		bin := filepath.Join(home, "go", "bin", "nats-server")
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	return soak.NATSServerBinary(ctx)
}
