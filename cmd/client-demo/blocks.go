package main

import (
	"context"
	"fmt"
	"io"

	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// runBlocks takes IDs from the block stream with o.clients block sources,
// each on its own connection, o.batch IDs per take, for o.duration or
// o.requests takes in all, and reports like the load mode.
func runBlocks(ctx context.Context, o options, stdout, stderr io.Writer) int {
	sources := make([]*uidclient.BlockSource, o.clients)
	for i := range sources {
		conn, err := connect(ctx, o.url)
		if err != nil {
			fmt.Fprintln(stderr, "client-demo:", err)
			return 1
		}
		defer conn.Close()
		src, err := uidclient.NewBlockSource(conn.Conn, uidclient.BlockSourceConfig{Stream: o.stream, Consumer: o.consumer})
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

	bufs := make([][]uint64, len(sources))
	for i := range bufs {
		bufs[i] = make([]uint64, o.batch)
	}
	workers, elapsed := drive(ctx, o, func(ctx context.Context, i int, w *worker) (int, error) {
		n, err := sources[i].NextN(ctx, bufs[i])
		w.ids = append(w.ids, bufs[i][:n]...) // taken IDs are valid even with an error
		return n, err
	}, stderr)
	code := report(o, workers, elapsed, stdout)
	if received(workers) == 0 {
		fmt.Fprintf(stderr, "client-demo: no block from stream %s: blocks are published by dispensers started with DISPENSER_BLOCKS_ENABLED=true (and DISPENSER_BLOCKS_STREAM=%s)\n", o.stream, o.stream)
	}
	for i, src := range sources {
		st := src.Stats()
		fmt.Fprintf(stdout, "source %-4d blocks used %d, redeliveries terminated %d, acks failed %d, malformed %d\n",
			i, st.BlocksUsed, st.Redelivered, st.AckFailed, st.Malformed)
	}
	return code
}

// received is how many IDs the workers got in all.
func received(workers []*worker) int {
	n := 0
	for _, w := range workers {
		n += len(w.ids)
	}
	return n
}
