package uidclient

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/retry"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
)

// PrefetchConfig configures a Prefetcher. Zero values take defaults.
type PrefetchConfig struct {
	// BatchSize is the smallest count one refill asks for, and the
	// first refill's (default 8192). It must not exceed the service's
	// largest batch.
	BatchSize int
	// MaxBatchSize is the largest count one refill asks for (default
	// DefaultPrefetchMaxBatch): refills grow from BatchSize up to it
	// as the take rate needs. A service whose largest batch is smaller
	// answers a 400; the prefetcher then halves it, down to BatchSize,
	// without failing a take.
	MaxBatchSize int
	// LowWater is the largest reserve the background fetcher keeps
	// ahead (default DefaultPrefetchLowWater): when fewer IDs than the
	// current target remain, it asks for the difference (at least
	// BatchSize). The target adapts to the take rate (the IDs taken
	// during four refills' time, as CosId's safe distance), between
	// min(BatchSize, LowWater) and LowWater, so the reserve never
	// exceeds LowWater+BatchSize.
	LowWater int
	// FetchTimeout bounds one refill, retries included (default 5s).
	FetchTimeout time.Duration
}

const (
	// DefaultPrefetchMaxBatch is a second of one worker ID under the
	// default layout (2^22 IDs): what a default instance answers as
	// ranges in one batch.
	DefaultPrefetchMaxBatch = 1 << 22
	// DefaultPrefetchLowWater caps the reserve at four of the largest
	// refills: the ranges cost 48 bytes each whatever their size, and
	// the target stays at what the measured rate needs.
	DefaultPrefetchLowWater = 4 * DefaultPrefetchMaxBatch
)

// ErrPrefetcherClosed is returned by Next after Close.
var ErrPrefetcherClosed = errors.New("uidclient: prefetcher closed")

// Prefetcher keeps a local reserve of IDs, fetched as ranges by one
// background goroutine, and hands them out in-process. It is safe for
// concurrent use. A take is one atomic add on the current range; moving
// to the next range is a compare-and-swap (rangeChain): no lock on the
// take path. The fetcher refills before the reserve runs dry, keeping
// a reserve sized to the take rate and the refill's latency, so takes
// wait only when the service cannot keep up.
//
// IDs come out in increasing order within a batch, not across batches
// (successive batches may come from different instances). A prefetched ID
// carries the second in which its dispenser issued it, which may be a
// while before Next returns it at low load.
type Prefetcher struct {
	chain  rangeChain
	client *Client
	cfg    PrefetchConfig
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewPrefetcher starts the background fetcher, which fills the reserve
// at once. Close it to stop the fetcher.
func NewPrefetcher(c *Client, cfg PrefetchConfig) *Prefetcher {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 8192
	}
	if cfg.MaxBatchSize <= 0 {
		cfg.MaxBatchSize = DefaultPrefetchMaxBatch
	}
	cfg.MaxBatchSize = max(cfg.MaxBatchSize, cfg.BatchSize)
	if cfg.LowWater <= 0 {
		cfg.LowWater = DefaultPrefetchLowWater
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Prefetcher{client: c, cfg: cfg, ctx: ctx, cancel: cancel}
	p.chain.init(make(chan struct{}, 1))
	p.wg.Add(1)
	go p.fetchLoop()
	return p
}

// Next returns an ID from the reserve, waiting (within ctx) for a refill
// when the reserve is empty. A refill that failed with a 400 (such as a
// BatchSize above the service's largest batch) is returned at once;
// other refill errors are retried in the background and reported with the
// context's error when ctx ends first.
func (p *Prefetcher) Next(ctx context.Context) (uint64, error) {
	if id, ok := p.chain.take(); ok {
		return id, nil
	}
	id, err := p.chain.next(ctx)
	switch {
	case err == nil:
		return id, nil
	case errors.Is(err, errChainClosed):
		return 0, ErrPrefetcherClosed
	case errors.Is(err, ErrBadRequest):
		return 0, err
	}
	return 0, fmt.Errorf("uidclient: prefetcher empty: %w", err)
}

// Available is the number of IDs in the reserve.
func (p *Prefetcher) Available() int {
	return int(p.chain.available())
}

// Close stops the background fetcher and waits for it. IDs left in the
// reserve are dropped (never reissued); Next returns ErrPrefetcherClosed.
func (p *Prefetcher) Close() error {
	if !p.chain.close() {
		return nil
	}
	p.cancel()
	p.wg.Wait()
	return nil
}

func (p *Prefetcher) fetchLoop() {
	defer p.wg.Done()
	var pauses retry.Backoff
	floor := uint64(min(p.cfg.BatchSize, p.cfg.LowWater))
	d := safeDistance{floor: floor, max: uint64(p.cfg.LowWater), target: floor}
	smallest, largest := uint64(p.cfg.BatchSize), uint64(p.cfg.MaxBatchSize)
	for {
		avail := p.chain.available()
		if avail >= d.target {
			select {
			case <-p.ctx.Done():
				return
			case <-p.chain.wake:
			}
			continue
		}
		n := min(max(d.target-avail, smallest), largest)
		start := time.Now()
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.FetchTimeout)
		runs, err := p.client.BatchRuns(ctx, int(n))
		cancel()
		if p.ctx.Err() != nil {
			return
		}
		bad := errors.Is(err, ErrBadRequest)
		if bad && n > smallest {
			// Above the service's largest batch: ask less from now on.
			largest = max(n/2, smallest)
			continue
		}
		if err == nil {
			d.observe(p.chain.available(), time.Since(start))
			d.added(protocol.CountOf(runs))
		}
		if !p.chain.push(runs, d.target, err, bad) {
			return // closed
		}
		if err == nil {
			pauses.Reset()
			continue
		}
		if retry.Sleep(p.ctx, pauses.Next()) != nil {
			return
		}
	}
}

// reserveLatencies is how many refill latencies' worth of takes the
// reserve holds: one covers the refill in flight, the rest the wake-up
// of the fetcher and a slower refill than the last ones.
const reserveLatencies = 4

// safeDistance is the reserve the fetcher keeps ahead, as CosId's safe
// distance: the IDs taken during reserveLatencies refills at the
// measured take rate, between floor and max. Rate and latency are
// decaying peaks (a new high at once, halving each peakHalfLife after),
// so a burst or a slow refill raises the reserve at the next refill and
// a lull shrinks it only gradually. It starts at floor (no rate measured
// yet).
type safeDistance struct {
	floor, max, target uint64
	installed          uint64 // IDs ever added to the reserve
	lastTaken          uint64
	lastAt             time.Time
	rate               float64 // IDs/s
	latency            float64 // seconds
}

// peakHalfLife is how fast a peak of the rate or the latency is
// forgotten: a machine that stalls the fetcher now and then keeps the
// reserve for the stalls for a few seconds.
const peakHalfLife = time.Second

func (d *safeDistance) added(n uint64) { d.installed += n }

// observe takes the reserve left after a refill that took latency.
func (d *safeDistance) observe(available uint64, latency time.Duration) {
	now := time.Now()
	taken := d.installed - min(available, d.installed)
	if !d.lastAt.IsZero() {
		if elapsed := now.Sub(d.lastAt); elapsed > 0 {
			decay := math.Exp2(-elapsed.Seconds() / peakHalfLife.Seconds())
			d.rate = max(float64(taken-d.lastTaken)/elapsed.Seconds(), d.rate*decay)
			d.latency = max(latency.Seconds(), d.latency*decay)
		}
	} else {
		d.latency = latency.Seconds()
	}
	want := uint64(d.rate * reserveLatencies * d.latency)
	d.target = min(max(want, d.floor), d.max)
	d.lastTaken, d.lastAt = taken, now
}
