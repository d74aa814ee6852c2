package uidclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/retry"
)

// PrefetchConfig configures a Prefetcher. Zero values take defaults.
type PrefetchConfig struct {
	// BatchSize is how many IDs one refill request asks for (default
	// 8192). It must not exceed the service's largest batch.
	BatchSize int
	// LowWater: when fewer IDs than this remain in the reserve, the
	// background fetcher asks for more batches until it holds at least
	// this many again (default BatchSize). The reserve never exceeds
	// LowWater+BatchSize.
	LowWater int
	// FetchTimeout bounds one refill, retries included (default 5s).
	FetchTimeout time.Duration
}

// ErrPrefetcherClosed is returned by Next after Close.
var ErrPrefetcherClosed = errors.New("uidclient: prefetcher closed")

// Prefetcher keeps a local reserve of IDs, fetched in batches by one
// background goroutine, and hands them out in-process. It is safe for
// concurrent use.
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

	mu      sync.Mutex
	cur     []uint64   // the batch being handed out
	ready   [][]uint64 // fetched batches waiting their turn
	count   int        // IDs in cur and ready
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
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return 0, ErrPrefetcherClosed
		}
		if len(p.cur) == 0 && len(p.ready) > 0 {
			p.cur, p.ready[0] = p.ready[0], nil
			p.ready = p.ready[1:]
		}
		if len(p.cur) > 0 {
			id := p.cur[0]
			p.cur = p.cur[1:]
			p.count--
			crossed := p.count == p.cfg.LowWater-1
			p.mu.Unlock()
			if crossed {
				p.signal()
			}
			return id, nil
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
	return p.count
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
	p.cur, p.ready, p.count = nil, nil, 0
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
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		}
		for p.below() {
			ctx, cancel := context.WithTimeout(p.ctx, p.cfg.FetchTimeout)
			ids, err := p.client.Batch(ctx, p.cfg.BatchSize)
			cancel()
			p.mu.Lock()
			if p.closed { // Close already woke the waiters
				p.mu.Unlock()
				return
			}
			if err == nil {
				p.ready = append(p.ready, ids)
				p.count += len(ids)
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

func (p *Prefetcher) below() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed && p.count < p.cfg.LowWater
}
