package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/numfmt"
	"github.com/uid-dispenser/uid-dispenser/uidcore"

	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// runBlocks takes IDs from the block stream with o.clients block sources,
// each on its own connection, o.batch IDs per take, for o.duration or
// o.requests takes in all, and reports like the load mode, with the age
// of the IDs taken and, given the dispensers' /metrics (-metrics), the
// IDs they discarded.
func runBlocks(ctx context.Context, o options, stdout, stderr io.Writer) int {
	sources := make([]*uidclient.BlockSource, o.clients)
	for i := range sources {
		conn, err := connect(ctx, o.url)
		if err != nil {
			fmt.Fprintln(stderr, "client-demo:", err)
			return 1
		}
		defer conn.Close()
		src, err := uidclient.NewBlockSource(conn.Conn, uidclient.BlockSourceConfig{Stream: o.stream, Consumer: o.consumer, LossWindow: lossWindow(o.lossWindow)})
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

	before, scrapeErr := scrapeBlocks(ctx, o.metrics)
	layout := uidcore.DefaultLayout()
	keep := o.keep / o.clients
	workers, elapsed := drive(ctx, o, func(ctx context.Context, i int, w *worker) (int, error) {
		if w.buf == nil {
			w.buf = make([]uint64, o.batch)
		}
		n, err := sources[i].NextN(ctx, w.buf)
		w.keep(w.buf[:n], keep) // taken IDs are valid even with an error
		if n > 0 {
			if p, perr := layout.Parse(w.buf[0]); perr == nil {
				w.ages = append(w.ages, time.Since(p.Time))
			}
		}
		return n, err
	}, stderr)
	code := report(o, workers, elapsed, stdout, stderr)
	if o.metrics != "" {
		after, err := scrapeBlocks(ctx, o.metrics)
		if err = errors.Join(scrapeErr, err); err != nil {
			fmt.Fprintln(stdout, "discarded   unknown:", err)
		} else {
			published, discarded := after.published-before.published, after.discarded-before.discarded
			fmt.Fprintf(stdout, "discarded   %s of %s IDs the dispensers took for blocks during the run (%.3f%%; published %s)\n",
				numfmt.Thousands(int64(discarded)), numfmt.Thousands(int64(published+discarded)),
				100*discarded/max(published+discarded, 1), numfmt.Thousands(int64(published)))
		}
	}
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
		n += w.count
	}
	return n
}

// blockCounts are the dispensers' block counters, summed.
type blockCounts struct{ published, discarded float64 }

// scrapeBlocks reads uid_blocks_ids_published_total and
// uid_blocks_ids_discarded_total from each of the comma-separated
// /metrics URLs (Prometheus text) and sums them.
func scrapeBlocks(ctx context.Context, urls string) (blockCounts, error) {
	var c blockCounts
	if urls == "" {
		return c, nil
	}
	for _, u := range strings.Split(urls, ",") {
		if err := scrapeOne(ctx, strings.TrimSpace(u), &c); err != nil {
			return c, err
		}
	}
	return c, nil
}

func scrapeOne(ctx context.Context, url string, c *blockCounts) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	found := false
	for sc.Scan() {
		line := sc.Text()
		var into *float64
		switch {
		case strings.HasPrefix(line, "uid_blocks_ids_published_total"):
			into = &c.published
		case strings.HasPrefix(line, "uid_blocks_ids_discarded_total"):
			into = &c.discarded
		default:
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return fmt.Errorf("%s: %q: %w", url, line, err)
		}
		*into += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	if !found {
		return fmt.Errorf("%s: no uid_blocks_ids_* series (blocks not enabled there?)", url)
	}
	return nil
}

// lossWindow is -loss-window as BlockSourceConfig reads it: 0 (none) is
// negative there, where zero means the default.
func lossWindow(w time.Duration) time.Duration {
	if w <= 0 {
		return -1
	}
	return w
}
