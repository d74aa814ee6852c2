package natsio

import (
	"context"
	"fmt"
	"sync"

	"github.com/uid-dispenser/uid-dispenser/sequence"
)

// maxSegmentWaits bounds the sequence requests waiting for a segment from
// the store; past it a request gets a 503 at once.
const maxSegmentWaits = 1024

// segmentWaits answers sequence requests whose name holds too few numbers,
// each on a goroutine of its own until a segment arrives or its deadline
// passes. micro runs an endpoint's handlers one at a time and one
// endpoint serves every name, so a request waiting on the endpoint's
// goroutine for one name's segment (a first request, a store outage)
// would hold up the names that have numbers at hand.
type segmentWaits struct {
	s      *Service
	slots  chan struct{}
	ctx    context.Context // cancelled by stop: waiting requests get their 503 at once
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // orders start against stop, so wg.Add never races wg.Wait
	done   bool
}

func newSegmentWaits(s *Service) *segmentWaits {
	ctx, cancel := context.WithCancel(context.Background())
	return &segmentWaits{s: s, slots: make(chan struct{}, maxSegmentWaits), ctx: ctx, cancel: cancel}
}

// start waits for w on a goroutine of its own; when it cannot, the error
// to answer w with: the service stops, or too many wait already.
func (q *segmentWaits) start(w waitingBatch) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done {
		return fmt.Errorf("%w: the service stops", sequence.ErrClosed)
	}
	select {
	case q.slots <- struct{}{}:
	default:
		return fmt.Errorf("%w: %d sequence requests already wait for a segment", sequence.ErrUnavailable, maxSegmentWaits)
	}
	q.wg.Go(func() {
		defer func() { <-q.slots }()
		ctx, cancel := context.WithDeadline(w.call.ctx, w.deadline)
		defer cancel()
		stopAfter := context.AfterFunc(q.ctx, cancel)
		defer stopAfter()
		r := w.wait(ctx, (*w.call.bp)[:0])
		q.s.finish(w.call, r)
		if r.err == nil && w.after != nil {
			w.after()
		}
	})
	return nil
}

// stop answers every waiting request (with what it holds by then, or a
// 503) and waits until they are answered.
func (q *segmentWaits) stop() {
	q.mu.Lock()
	q.done = true
	q.mu.Unlock()
	q.cancel()
	q.wg.Wait()
}
