package uidclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/retry"
)

// PrefetchConfig configures a Prefetcher. Zero values take defaults.
type PrefetchConfig struct {
	// BatchSize is how many IDs one refill request asks for (default
	// 8192). It must not exceed the service's largest batch.
	BatchSize int
	// LowWater is the largest reserve the background fetcher keeps
	// ahead (default BatchSize): when fewer IDs than the current target
	// remain, it asks for more batches. The target adapts to the take
	// rate (the IDs taken during two refills' time, at least one ID) and
	// never exceeds LowWater, so the reserve never exceeds
	// LowWater+BatchSize.
	LowWater int
	// FetchTimeout bounds one refill, retries included (default 5s).
	FetchTimeout time.Duration
}

// ErrPrefetcherClosed is returned by Next after Close.
var ErrPrefetcherClosed = errors.New("uidclient: prefetcher closed")

// idRange is a run of prefetched IDs, handed out by one atomic add on
// next: the taker that gets index n < count owns first+n, so no two
// takers get the same ID; indexes past count are simply wasted adds.
type idRange struct {
	first, count uint64
	signalAt     uint64 // the take index that wakes the fetcher
	next         atomic.Uint64
}

func (r *idRange) remaining() uint64 {
	n := r.next.Load()
	if n >= r.count {
		return 0
	}
	return r.count - n
}

// exhausted is the current range when there is none: every take misses.
var exhausted = &idRange{}

// Prefetcher keeps a local reserve of IDs, fetched in batches by one
// background goroutine, and hands them out in-process. It is safe for
// concurrent use. A take from the current range is lock-free; only the
// switch to the next range takes a mutex.
//
// IDs come out in increasing order within a batch, not across batches
// (successive batches may come from different instances). A prefetched ID
// carries the second in which its dispenser issued it, which may be a
// while before Next returns it at low load.
type Prefetcher struct {
	client *Client
	cfg    PrefetchConfig
	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	cur atomic.Pointer[idRange] // the range being handed out

	mu      sync.Mutex
	ready   []*idRange // fetched ranges waiting their turn
	queued  uint64     // IDs in ready
	arrived chan struct{}
	lastErr error // of the last refill, nil after a successful one
	closed  bool
}

// NewPrefetcher starts the background fetcher, which fills the reserve
// at once. Close it to stop the fetcher.
func NewPrefetcher(c *Client, cfg PrefetchConfig) *Prefetcher {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 8192
	}
	if cfg.LowWater <= 0 {
		cfg.LowWater = cfg.BatchSize
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Prefetcher{
		client:  c,
		cfg:     cfg,
		wake:    make(chan struct{}, 1),
		ctx:     ctx,
		cancel:  cancel,
		arrived: make(chan struct{}),
	}
	p.cur.Store(exhausted)
	p.wg.Add(1)
	go p.fetchLoop()
	p.signal()
	return p
}

// Next returns an ID from the reserve, waiting (within ctx) for a refill
// when the reserve is empty. A refill that failed with a 400 (such as a
// BatchSize above the service's largest batch) is returned at once;
// other refill errors are retried in the background and reported with the
// context's error when ctx ends first.
func (p *Prefetcher) Next(ctx context.Context) (uint64, error) {
	r := p.cur.Load()
	if n := r.next.Add(1) - 1; n < r.count {
		if n == r.signalAt {
			p.signal()
		}
		return r.first + n, nil
	}
	return p.nextSlow(ctx, r)
}

// nextSlow moves to the next fetched range once r is exhausted, or waits
// for one.
func (p *Prefetcher) nextSlow(ctx context.Context, r *idRange) (uint64, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return 0, ErrPrefetcherClosed
		}
		if cur := p.cur.Load(); cur != r { // another taker switched
			p.mu.Unlock()
			if n := cur.next.Add(1) - 1; n < cur.count {
				return cur.first + n, nil
			}
			r = cur
			continue
		}
		if len(p.ready) > 0 {
			next := p.ready[0]
			p.ready[0] = nil
			p.ready = p.ready[1:]
			p.queued -= next.count
			p.cur.Store(next)
			p.mu.Unlock()
			p.signal() // a range is used up: the fetcher checks its target
			r = next
			if n := r.next.Add(1) - 1; n < r.count {
				return r.first + n, nil
			}
			continue
		}
		arrived, lastErr := p.arrived, p.lastErr
		p.mu.Unlock()
		if errors.Is(lastErr, ErrBadRequest) {
			return 0, lastErr
		}
		p.signal()
		select {
		case <-arrived:
		case <-ctx.Done():
			if lastErr != nil {
				return 0, fmt.Errorf("uidclient: prefetcher empty: %w; last refill: %w", ctx.Err(), lastErr)
			}
			return 0, fmt.Errorf("uidclient: prefetcher empty: %w", ctx.Err())
		}
	}
}

// Available is the number of IDs in the reserve.
func (p *Prefetcher) Available() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int(p.availableLocked())
}

func (p *Prefetcher) availableLocked() uint64 {
	return p.cur.Load().remaining() + p.queued
}

// Close stops the background fetcher and waits for it. IDs left in the
// reserve are dropped (never reissued); Next returns ErrPrefetcherClosed.
func (p *Prefetcher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.cur.Store(exhausted)
	p.ready, p.queued = nil, 0
	close(p.arrived)
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return nil
}

func (p *Prefetcher) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *Prefetcher) fetchLoop() {
	defer p.wg.Done()
	var pauses retry.Backoff
	var d safeDistance
	d.init(uint64(p.cfg.LowWater))
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		}
		for p.below(d.target) {
			start := time.Now()
			ctx, cancel := context.WithTimeout(p.ctx, p.cfg.FetchTimeout)
			runs, err := p.client.BatchRuns(ctx, p.cfg.BatchSize)
			cancel()
			p.mu.Lock()
			if p.closed { // Close already woke the waiters
				p.mu.Unlock()
				return
			}
			if err == nil {
				d.observe(p.availableLocked(), time.Since(start))
				for _, run := range runs {
					p.ready = append(p.ready, &idRange{first: run.First, count: run.Count, signalAt: run.Count / 2})
					p.queued += run.Count
					d.added(run.Count)
				}
			}
			p.lastErr = err
			close(p.arrived) // wake waiters: IDs arrived, or an error to see
			p.arrived = make(chan struct{})
			p.mu.Unlock()
			if err == nil {
				pauses.Reset()
				continue
			}
			if retry.Sleep(p.ctx, pauses.Next()) != nil {
				return
			}
		}
	}
}

func (p *Prefetcher) below(target uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed && p.availableLocked() < target
}

// safeDistance is the reserve the fetcher keeps ahead, as CosId's safe
// distance: the IDs taken during two refills' time at the measured take
// rate, between a quarter of LowWater and LowWater. It starts at LowWater (no rate
// measured yet).
type safeDistance struct {
	max, target uint64
	installed   uint64 // IDs ever added to the reserve
	lastTaken   uint64
	lastAt      time.Time
}

func (d *safeDistance) init(max uint64) {
	d.max, d.target = max, max
}

// floor keeps a quarter of LowWater at low rates, so a slow taker
// still rarely waits for a refill.
func (d *safeDistance) floor() uint64 { return max(d.max/4, 1) }

func (d *safeDistance) added(n uint64) { d.installed += n }

// observe takes the reserve left after a refill that took latency.
func (d *safeDistance) observe(available uint64, latency time.Duration) {
	now := time.Now()
	taken := d.installed - available
	if !d.lastAt.IsZero() {
		if elapsed := now.Sub(d.lastAt); elapsed > 0 {
			rate := float64(taken-d.lastTaken) / elapsed.Seconds()
			want := uint64(rate * 2 * latency.Seconds())
			d.target = min(max(want, d.floor()), d.max)
		}
	}
	d.lastTaken, d.lastAt = taken, now
}
