package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uid-dispenser/uid-dispenser/natsio"
)

// runBlocks takes IDs from the block stream with o.clients block sources,
// each on its own connection, o.batch IDs per take, for o.duration or
// o.requests takes in all, and reports like the load mode.
func runBlocks(ctx context.Context, o options, stdout, stderr io.Writer) int {
	sources := make([]*natsio.BlockSource, o.clients)
	for i := range sources {
		conn, err := connect(ctx, o.url)
		if err != nil {
			fmt.Fprintln(stderr, "client-demo:", err)
			return 1
		}
		defer conn.Close()
		src, err := natsio.NewBlockSource(conn.Conn, natsio.BlockSourceConfig{Stream: o.stream, Consumer: o.consumer})
		if err != nil {
			fmt.Fprintln(stderr, "client-demo:", err)
			return 1
		}
		defer src.Close()
		sources[i] = src
	}
	limit := fmt.Sprintf("for %s", o.duration)
	if o.requests > 0 {
		limit = fmt.Sprintf("for %d takes", o.requests)
	}
	fmt.Fprintf(stdout, "blocks: sources %d, stream %s, consumer %s, %d IDs per take %s\n", o.clients, o.stream, o.consumer, o.batch, limit)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.requests == 0 {
		runCtx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	var taken, received atomic.Int64 // takes started, IDs received
	workers := make([]*worker, o.clients)
	var wg sync.WaitGroup
	start := time.Now()
	for i, src := range sources {
		w := &worker{}
		workers[i] = w
		buf := make([]uint64, o.batch)
		wg.Go(func() {
			for runCtx.Err() == nil {
				if o.requests > 0 && taken.Add(1) > int64(o.requests) {
					return
				}
				c, cancel := context.WithTimeout(runCtx, o.timeout)
				t0 := time.Now()
				n, err := src.NextN(c, buf)
				cancel()
				w.ids = append(w.ids, buf[:n]...) // taken IDs are valid even with an error
				received.Add(int64(n))
				if err != nil {
					if runCtx.Err() != nil {
						return // the run ended during the take: not a failure
					}
					w.errors++
					w.lastErr = err
					continue
				}
				w.latencies = append(w.latencies, time.Since(t0))
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	progress(o, start, &received, done, stderr)
	code := report(o, workers, time.Since(start), stdout)
	for i, src := range sources {
		st := src.Stats()
		fmt.Fprintf(stdout, "source %-4d blocks used %d, redeliveries terminated %d, acks failed %d, malformed %d\n",
			i, st.BlocksUsed, st.Redelivered, st.AckFailed, st.Malformed)
	}
	return code
}
