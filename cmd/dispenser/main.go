// Command dispenser runs one uid-dispenser instance: unique 64-bit IDs over
// NATS request-reply (uid.next, uid.batch, uid.parse). It is configured
// through DISPENSER_* environment variables (dispenser -h lists them);
// with none set it uses the NATS server on 127.0.0.1:4222, or starts an
// embedded one there, and claims its worker ID in a JetStream KV bucket.
//
// SIGINT or SIGTERM stops it gracefully (exit 0); a configuration error
// or an unexpected argument exits 2, any other failure 1. -version prints
// the version (also the micro service's and service.version), the commit
// and the Go version.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/uid-dispenser/uid-dispenser/dispenser"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

func main() {
	os.Exit(run())
}

func run() int {
	flags := flag.NewFlagSet("dispenser", flag.ContinueOnError)
	flags.SetOutput(os.Stdout)
	version := flags.Bool("version", false, "print the version, commit and Go version, and exit")
	newGeneration := flags.Bool("new-generation", false, "record the configured layout, worker mode and subject prefix as the next generation of the fleet in the worker-ID store (every instance stopped), and exit")
	resetFleet := flags.Bool("reset-fleet", false, "remove the worker-ID store's fleet record written by a start that should never have written it (no lease live or ever reserved, not a generation from -new-generation), so that the next start records its configuration, and exit")
	raise := flags.String("raise-sequence", "", "`NAME=N`: raise the named sequence's counter in the worker-ID store so that its next number is at least N (never lowers it), and exit: after a store loss nothing detected, or to move a sequence over from Leaf, tinyid or an AUTO_INCREMENT column")
	flags.Usage = func() {
		fmt.Fprintln(flags.Output(), "usage: dispenser [-version | -new-generation | -reset-fleet | -raise-sequence NAME=N]\n\nHands out unique 64-bit IDs over NATS.")
		fmt.Fprintln(flags.Output())
		flags.PrintDefaults()
		fmt.Fprintln(flags.Output())
		if err := dispenser.Usage(flags.Output()); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	if err := flags.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if flags.NArg() > 0 {
		// Arguments are not configuration: a command line that seems to
		// say something must not start an instance that ignores it.
		fmt.Fprintf(os.Stderr, "dispenser: unexpected argument %q; it takes no arguments (configuration is DISPENSER_* variables, see dispenser -h)\n", flags.Arg(0))
		fmt.Fprintln(os.Stderr, "usage: dispenser [-h] [-version | -new-generation | -reset-fleet | -raise-sequence NAME=N]")
		return 2
	}
	if *version {
		fmt.Print(dispenser.Build())
		return 0
	}
	cfg, err := dispenser.LoadConfig()
	unknown := dispenser.UnknownEnvironment()
	if err != nil {
		// A misspelt variable may be why the configuration is wrong.
		for _, u := range unknown {
			fmt.Fprintln(os.Stderr, "dispenser: warning:", u)
		}
		fmt.Fprintln(os.Stderr, "dispenser: configuration:", err)
		return 2
	}
	log := dispenser.NewLogger(cfg)
	dispenser.WarnUnknown(log, unknown)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *raise != "" {
		name, to, perr := dispenser.ParseRaise(*raise)
		if perr != nil {
			fmt.Fprintln(os.Stderr, perr)
			return 2
		}
		var before, after uint64
		if before, after, err = dispenser.RaiseSequence(ctx, cfg, log, name, to); err == nil {
			fmt.Printf("sequence %s: counter %d, now %d: the next number is at least %d\n", name, before, after, after)
		}
	} else if *resetFleet {
		var f workerid.Fleet
		var found bool
		if f, found, err = dispenser.ResetFleet(ctx, cfg, log); err == nil && found {
			fmt.Printf("removed the fleet record: generation %d, layout %s, worker mode %s, subject prefix %s; the next start records its configuration\n", f.Generation, f.Layout, f.WorkerMode, f.SubjectPrefix)
		} else if err == nil {
			fmt.Println("the worker-ID store holds no fleet record: nothing to remove")
		}
	} else if *newGeneration {
		var f workerid.Fleet
		if f, err = dispenser.NewGeneration(ctx, cfg, log); err == nil {
			fmt.Printf("generation %d: layout %s, worker mode %s, subject prefix %s, IDs after %s\n", f.Generation, f.Layout, f.WorkerMode, f.SubjectPrefix, time.Unix(f.StartsAfter, 0).UTC().Format(time.RFC3339))
		}
	} else {
		err = dispenser.Run(ctx, cfg, dispenser.WithLogger(log))
	}
	var ce *dispenser.ConfigError
	switch {
	case errors.As(err, &ce):
		// The store's fleet record disagrees with the configuration.
		fmt.Fprintln(os.Stderr, "dispenser: configuration:", err)
		return 2
	case err != nil:
		log.Error("dispenser failed", "err", err)
		return 1
	}
	return 0
}
