package soak

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// load is how hard the clients work. The defaults give about 40,000 IDs
// per second in all: enough for faults to hit calls in flight, little
// enough that a 2-core machine keeps up and a 10-minute run's IDs fit in
// memory (8 bytes each).
type load struct {
	nextEvery     time.Duration // one Next per tick
	batchEvery    time.Duration // one Batch of 1..batchMax per tick
	batchMax      int
	prefetchEvery time.Duration // a burst of prefetchBurst Next per tick
	prefetchBurst int
	prefetchBatch int           // the prefetcher's batch size
	blocksEvery   time.Duration // one NextN of blocksTake per tick
	blocksTake    int
	seqNextEvery  time.Duration // one SeqNext per tick
	seqBatchEvery time.Duration // one SeqBatch of 1..seqBatchMax per tick
	seqBatchMax   int
	// The bulk clients' batch of bulkBatch per tick, from bulkFrom to
	// bulkTo after the run's origin.
	bulkEvery        time.Duration
	bulkFrom, bulkTo time.Duration
}

// bulkBatch is a bulk client's batch.
const bulkBatch = 4096

func defaultLoad(rate float64) load {
	every := func(d time.Duration) time.Duration { return time.Duration(float64(d) / rate) }
	return load{
		nextEvery:     every(10 * time.Millisecond),
		batchEvery:    every(100 * time.Millisecond),
		batchMax:      1000,
		prefetchEvery: every(10 * time.Millisecond),
		prefetchBurst: 20,
		prefetchBatch: 1000,
		blocksEvery:   every(20 * time.Millisecond),
		blocksTake:    60,
		seqNextEvery:  every(20 * time.Millisecond),
		seqBatchEvery: every(100 * time.Millisecond),
		seqBatchMax:   100,
	}
}

// namedSeq is a named sequence the dispensers declare: its name, first
// number and, in the regions mode, its home region.
type namedSeq struct {
	name  string
	first uint64
	home  string
}

// sequences are the named sequences the dispensers declare
// (DISPENSER_SEQUENCES) and the sequence clients ask for, in turn.
var sequences = []namedSeq{{"orders", 1, ""}, {"invoices", 1_000_000, ""}}

// seqClient is what sequence client j asks for of seqs: SeqNext and
// SeqBatch in turn, then the names, then the fleets (both declare the
// sequences, each in its own store, so the numbers are checked per
// fleet). 2 × len(seqs) × 2 clients (the default 8 for two sequences)
// cover every combination.
func seqClient(j int, seqs []namedSeq) (kind callKind, name string, f *fleet) {
	kind = kindSeqNext
	if j%2 == 1 {
		kind = kindSeqBatch
	}
	name = seqs[(j/2)%len(seqs)].name
	f = fleets[(j/(2*len(seqs)))%len(fleets)]
	return kind, name, f
}

// sequencesEnv is DISPENSER_SEQUENCES declaring seqs (name[@home]=first).
func sequencesEnv(seqs []namedSeq) string {
	var parts []string
	for _, s := range seqs {
		name := s.name
		if s.home != "" {
			name += "@" + s.home
		}
		parts = append(parts, fmt.Sprintf("%s=%d", name, s.first))
	}
	return strings.Join(parts, ",")
}

// soakClient is one client: its own connection to one node and one way
// of getting IDs.
type soakClient struct {
	log     *clientLog
	conn    *natsconn.Conn
	client  *uidclient.Client
	pre     *uidclient.Prefetcher
	blocks  *uidclient.BlockSource
	rng     *rand.Rand
	buf     []uint64
	bulk    bool // a batch client of the high-rate phase
	bulkIDs int  // IDs it received
	// watch, when set, is told of the client's slow and failed calls.
	watch *slowCalls
}

// startClients connects n clients, kinds and nodes taken in turn, a
// quarter of them on the KV fleet (clientFleet), bulk batch clients, and
// seq sequence clients (seqClient). Each is given every node's URL, its
// own node first, so that it fails over when that node dies.
func startClients(ctx context.Context, n, bulk, seq int, c *cluster, logger *slog.Logger, ld load) ([]*soakClient, error) {
	var clients []*soakClient
	for i := range n + bulk + seq {
		kind := callKind(i % int(numKinds))
		f := clientFleet(i, n)
		seqName := ""
		switch {
		case i >= n+bulk:
			kind, seqName, f = seqClient(i-n-bulk, sequences)
		case i >= n:
			kind = kindBatch
		}
		node := i % len(c.nodes)
		sc, err := newClient(ctx, clientLog{id: i, node: node, kind: kind, fleet: f.name, seq: seqName}, c.URLs(node), logger, ld)
		if err != nil {
			closeClients(clients)
			return nil, err
		}
		sc.bulk = i >= n
		clients = append(clients, sc)
	}
	return clients, nil
}

// newClient connects a client with log's identity (its id, node, kind,
// fleet and sequence) to urls and makes its uidclient of that kind.
func newClient(ctx context.Context, log clientLog, urls string, logger *slog.Logger, ld load) (*soakClient, error) {
	f := fleetNamed(log.fleet)
	name := fmt.Sprintf("uid-soak client %d (%s on %s)", log.id, log.kind, f.name)
	if log.region != "" {
		name = fmt.Sprintf("uid-soak client %d (%s on %s in %s)", log.id, log.kind, f.name, log.region)
	}
	conn, err := natsconn.Connect(ctx, natsconn.Config{URL: urls, Name: name, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("soak: client %d: %w", log.id, err)
	}
	sc := &soakClient{
		log:  &log,
		conn: conn,
		rng:  rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(log.id))),
	}
	switch log.kind {
	case kindNext, kindBatch, kindSeqNext, kindSeqBatch:
		sc.client = uidclient.New(conn.Conn, uidclient.Config{SubjectPrefix: f.name})
	case kindPrefetch:
		sc.client = uidclient.New(conn.Conn, uidclient.Config{SubjectPrefix: f.name})
		sc.pre = uidclient.NewPrefetcher(sc.client, uidclient.PrefetchConfig{BatchSize: ld.prefetchBatch})
	case kindBlocks:
		sc.blocks, err = uidclient.NewBlockSource(conn.Conn, uidclient.BlockSourceConfig{Stream: f.blocksStream, Logger: logger,
			LossWindow: -1}) // the soak's dispensers run with W = 0
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("soak: client %d: %w", log.id, err)
		}
	}
	return sc, nil
}

// runClients runs every client until ctx is done and returns when all
// have stopped (each finishes the call it is in).
func runClients(ctx context.Context, clients []*soakClient, rec *recorder, deadline time.Duration, ld load) {
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { c.run(ctx, rec, deadline, ld) })
	}
	wg.Wait()
}

func (c *soakClient) run(ctx context.Context, rec *recorder, deadline time.Duration, ld load) {
	every := map[callKind]time.Duration{
		kindNext: ld.nextEvery, kindBatch: ld.batchEvery, kindPrefetch: ld.prefetchEvery, kindBlocks: ld.blocksEvery,
		kindSeqNext: ld.seqNextEvery, kindSeqBatch: ld.seqBatchEvery,
	}[c.log.kind]
	if c.bulk {
		every = ld.bulkEvery
		select { // idle until the high-rate phase
		case <-ctx.Done():
			return
		case <-time.After(time.Until(rec.origin.Add(ld.bulkFrom))):
		}
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if c.bulk && time.Since(rec.origin) > ld.bulkTo {
			return
		}
		// Not derived from ctx: the end of the run lets a call finish
		// rather than cancel it, so every recorded call is a real outcome.
		callCtx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		var slow *time.Timer
		server := ""
		var timedOut uint64
		if c.client != nil {
			timedOut = c.client.Stats().TimedOut
		}
		if c.watch != nil {
			server = c.conn.ConnectedServerName()
			// Request/reply calls only: a prefetcher's or block source's
			// call may wait long by design.
			if c.pre == nil && c.client != nil {
				slow = time.AfterFunc(slowAfter, func() { c.watch.slow(c, start, server) })
			}
		}
		ids, instance, err := c.call(callCtx, ld)
		elapsed := time.Since(start)
		cancel()
		if slow != nil {
			slow.Stop()
		}
		if c.client != nil {
			timedOut = c.client.Stats().TimedOut - timedOut
		}
		if (err != nil || timedOut > 0) && c.watch != nil {
			c.watch.done(c, start, elapsed, server, timedOut, err)
		}
		if c.bulk {
			c.bulkIDs += len(ids)
		}
		c.log.recordFrom(rec, start, elapsed, ids, instance, err)
	}
}

// call makes one call of the client's kind and returns the IDs (or
// numbers) it got, and for a sequence call the instance that answered.
func (c *soakClient) call(ctx context.Context, ld load) (ids []uint64, instance string, err error) {
	switch c.log.kind {
	case kindNext:
		id, err := c.client.Next(ctx)
		if err != nil {
			return nil, "", err
		}
		c.buf = append(c.buf[:0], id)
		return c.buf, "", nil
	case kindBatch:
		n := 1 + c.rng.IntN(ld.batchMax)
		if c.bulk {
			n = bulkBatch
		}
		c.buf, err = c.client.AppendBatch(ctx, c.buf[:0], n)
		return c.buf, "", err
	case kindPrefetch:
		c.buf = c.buf[:0]
		for range ld.prefetchBurst {
			id, err := c.pre.Next(ctx)
			if err != nil {
				return c.buf, "", err
			}
			c.buf = append(c.buf, id)
		}
		return c.buf, "", nil
	case kindSeqNext:
		n, instance, err := c.client.SeqNextFrom(ctx, c.log.seq)
		if err != nil {
			return nil, "", err
		}
		c.buf = append(c.buf[:0], n)
		return c.buf, instance, nil
	case kindSeqBatch:
		return c.client.SeqBatchFrom(ctx, c.log.seq, 1+c.rng.IntN(ld.seqBatchMax))
	default:
		if cap(c.buf) < ld.blocksTake {
			c.buf = make([]uint64, ld.blocksTake)
		}
		n, err := c.blocks.NextN(ctx, c.buf[:ld.blocksTake])
		return c.buf[:n], "", err
	}
}

// blockStats sums the block sources' counters.
func blockStats(clients []*soakClient) uidclient.BlockSourceStats {
	var sum uidclient.BlockSourceStats
	for _, c := range clients {
		if c.blocks == nil {
			continue
		}
		s := c.blocks.Stats()
		sum.BlocksUsed += s.BlocksUsed
		sum.Redelivered += s.Redelivered
		sum.AckFailed += s.AckFailed
		sum.Malformed += s.Malformed
		sum.ConsumerChanged += s.ConsumerChanged
		sum.IDsUsed += s.IDsUsed
	}
	return sum
}

func closeClients(clients []*soakClient) {
	for _, c := range clients {
		if c.pre != nil {
			c.pre.Close()
		}
		if c.blocks != nil {
			c.blocks.Close()
		}
		c.conn.Close()
	}
}
