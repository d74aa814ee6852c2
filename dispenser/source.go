package dispenser

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// generatorSource is the one place the instance's generator is replaced:
// when a worker claim is lost for good, the dispenser builds a generator
// on a new claim and Replace swaps it in. The service and the block
// publisher take their IDs from it (it implements natsio.IDSource and
// natsio.BlockIDSource) and never see the swap.
//
// A take that the swap catches, because its generator lost the claim or
// was closed, waits for the replacement and takes all of dst from it: the
// request is answered with IDs, not a 503. What the old generator gave it
// is dropped (never issued again), so a reply or block holds one
// generator's increasing run. The waits of all takes a loss catches end
// together, a take wait after the loss was first met (and at the
// caller's context): when no replacement comes by then (no worker ID can
// be claimed) they fail with the old generator's error, the documented
// 503 "worker claim lost", and later takes fail at once rather than each
// waiting in turn on an endpoint's goroutine. After Close takes fail at
// once, so that a shutdown is not held up.
type generatorSource struct {
	takeWait time.Duration

	mu       sync.Mutex
	cur      *uidcore.CachedGenerator
	replaced chan struct{} // closed, and made anew, by each Replace
	closed   chan struct{} // closed by Close
	lostAt   time.Time     // when a take first met the current generator's loss (zero: none met)
}

func newGeneratorSource(gen *uidcore.CachedGenerator, takeWait time.Duration) *generatorSource {
	return &generatorSource{takeWait: takeWait, cur: gen, replaced: make(chan struct{}), closed: make(chan struct{})}
}

// current is the generator takes go to now, and the channel closed when
// it is replaced.
func (s *generatorSource) current() (*uidcore.CachedGenerator, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.replaced
}

// Generator is the current generator.
func (s *generatorSource) Generator() *uidcore.CachedGenerator {
	g, _ := s.current()
	return g
}

// Replace makes gen the generator takes go to, wakes the takes waiting
// for it, and returns the one it replaces, for the caller to close.
func (s *generatorSource) Replace(gen *uidcore.CachedGenerator) (old *uidcore.CachedGenerator) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, s.cur = s.cur, gen
	s.lostAt = time.Time{}
	close(s.replaced)
	s.replaced = make(chan struct{})
	return old
}

// Close closes the current generator; takes no longer wait for a
// replacement.
func (s *generatorSource) Close() error {
	s.mu.Lock()
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	gen := s.cur
	s.mu.Unlock()
	return gen.Close()
}

func (s *generatorSource) NextN(ctx context.Context, dst []uint64) (int, error) {
	return s.take(ctx, dst, true)
}

// TryNextN takes without waiting. A take the swap catches before the
// replacement is there takes nothing and returns no error, as when the
// ring is short: the caller then waits in NextN, which waits for the
// replacement.
func (s *generatorSource) TryNextN(dst []uint64) (int, error) {
	return s.take(context.Background(), dst, false)
}

// ReserveRuns reserves n IDs as runs from the current generator
// (uidcore.CachedGenerator.ReserveRuns); a reservation the swap catches
// starts over on the replacement, as a take does.
func (s *generatorSource) ReserveRuns(ctx context.Context, dst []uidcore.Run, n uint64, wait bool) ([]uidcore.Run, uint64, error) {
	runs := dst
	got, err := s.do(ctx, wait, func(gen *uidcore.CachedGenerator) (int, error) {
		var k uint64
		var err error
		runs, k, err = gen.ReserveRuns(ctx, dst, n, wait)
		return int(k), err
	})
	if got == 0 {
		runs = dst // what a lost generator gave is dropped
	}
	return runs, uint64(got), err
}

// take fills dst from the current generator; when the swap catches it
// (see generatorSource), it waits for the replacement and fills dst
// there.
func (s *generatorSource) take(ctx context.Context, dst []uint64, wait bool) (int, error) {
	return s.do(ctx, wait, func(gen *uidcore.CachedGenerator) (int, error) {
		if wait {
			return gen.NextN(ctx, dst)
		}
		return gen.TryNextN(dst)
	})
}

// do runs a take on the current generator, and again on its
// replacement when the swap catches it; what the lost one gave is
// dropped (do returns 0 for it).
func (s *generatorSource) do(ctx context.Context, wait bool, takeFrom func(*uidcore.CachedGenerator) (int, error)) (int, error) {
	var deadline <-chan time.Time
	for {
		gen, replaced := s.current()
		n, err := takeFrom(gen)
		if err == nil || !(errors.Is(err, uidcore.ErrClaimLost) || errors.Is(err, uidcore.ErrClosed)) {
			return n, err
		}
		// Caught by the swap: what gen gave is dropped.
		select {
		case <-replaced: // replaced already: take from the new one
			continue
		case <-s.closed:
			return 0, err
		default:
		}
		if !wait {
			return 0, nil
		}
		if deadline == nil {
			t := time.NewTimer(time.Until(s.lossDeadline(gen)))
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-replaced:
		case <-s.closed:
			return 0, err
		case <-deadline:
			return 0, err
		case <-ctx.Done():
			return 0, err
		}
	}
}

// lossDeadline is when the takes that gen's loss caught stop waiting for
// its replacement: a take wait after the first of them met it.
func (s *generatorSource) lossDeadline(gen *uidcore.CachedGenerator) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != gen {
		return time.Now() // replaced meanwhile: the replaced channel is closed
	}
	if s.lostAt.IsZero() {
		s.lostAt = time.Now()
	}
	return s.lostAt.Add(s.takeWait)
}

func (s *generatorSource) Layout() uidcore.Layout { return s.Generator().Layout() }
func (s *generatorSource) WorkerID() uint64       { return s.Generator().WorkerID() }
func (s *generatorSource) State() uidcore.State   { return s.Generator().State() }
