// Command spread asks a live dispenser for one ID at a time at a fixed
// rate, as a low-traffic service does, and reports how evenly the IDs'
// low bits fall: the largest share of any residue of id % 16 and id % 64
// over its fair share (issue 35 §5; the target is at most 1.5). It also
// checks that no ID came twice.
//
//	NATS_URL=... go run ./spread -rate 20 -n 640
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

func main() {
	rate := flag.Float64("rate", 1, "requests a second")
	n := flag.Int("n", 128, "IDs to collect")
	flag.Parse()
	if *rate <= 0 || *n <= 0 {
		fmt.Fprintln(os.Stderr, "spread: -rate and -n must be positive")
		os.Exit(2)
	}
	if err := run(*rate, *n); err != nil {
		fmt.Fprintln(os.Stderr, "spread:", err)
		os.Exit(1)
	}
}

func run(rate float64, n int) error {
	nc, err := nats.Connect(os.Getenv("NATS_URL"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer nc.Close()
	client := uidclient.New(nc, uidclient.Config{})
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()

	ids := make([]uint64, 0, n)
	for len(ids) < n {
		<-tick.C
		id, err := client.Next(context.Background())
		if err != nil {
			return fmt.Errorf("after %d IDs: %w", len(ids), err)
		}
		ids = append(ids, id)
	}
	seen := make(map[uint64]bool, n)
	for _, id := range ids {
		if seen[id] {
			return fmt.Errorf("ID %d came twice", id)
		}
		seen[id] = true
	}
	for _, mod := range []uint64{16, 64} {
		counts := make([]int, mod)
		for _, id := range ids {
			counts[id%mod]++
		}
		most, least := 0, n
		for _, c := range counts {
			most, least = max(most, c), min(least, c)
		}
		fair := float64(n) / float64(mod)
		fmt.Printf("%g/s, %d IDs, id %% %d: largest residue %d (%.2f × its share), smallest %d\n",
			rate, n, mod, most, float64(most)/fair, least)
	}
	return nil
}
