package natsio

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// maxWaitingBatches bounds the bulk requests waiting for capacity; past
// it a bulk request is answered 503 at once.
const maxWaitingBatches = 1024

// capacityError is the 503 of a request that found the instance at its
// capacity: it says what the instance sustains and when to come back.
type capacityError struct {
	perSecond  uint64
	lanes      int
	maxLanes   int
	retryAfter time.Duration
	err        error
}

func (e *capacityError) Error() string {
	return fmt.Sprintf("at capacity: this instance sustains %d IDs/s (%d of at most %d lanes); retry in %dms",
		e.perSecond, e.lanes, e.maxLanes, e.retryAfter.Milliseconds())
}

func (e *capacityError) Unwrap() error { return e.err }

// atCapacity wraps err (an empty ring) in a capacityError when the source
// is throttled, so that the caller learns the rate and when to retry.
func atCapacity(src IDSource, err error) error {
	if !errors.Is(err, uidcore.ErrBufferEmpty) {
		return err
	}
	st := src.State()
	if !st.Throttled {
		return err
	}
	now := time.Now()
	return &capacityError{perSecond: st.PerSecond, lanes: len(st.Lanes), maxLanes: st.MaxLanes,
		retryAfter: now.Truncate(time.Second).Add(time.Second).Sub(now), err: err}
}

// deferral is a handler's result when its reply must wait: a batch the
// ring cannot fill at once while the instance is at its capacity, or a
// sequence request whose name holds too few numbers. wait finishes the
// request (it never defers again) off the endpoint's goroutine.
type deferral struct {
	wait func(ctx context.Context, buf []byte) result
	// segment: a sequence request waiting for the store (segmentWaits),
	// not for the ring.
	segment bool
	// after, when set, runs once the request is answered (segment waits).
	after func()
}

// waitingBatch is a deferred call with what finishing it needs.
type waitingBatch struct {
	call     *call
	wait     func(ctx context.Context, buf []byte) result
	after    func()
	deadline time.Time
}

// capacityQueue serves deferred batches in arrival order, each waiting
// for IDs until its deadline, and logs throttling episodes: one line when
// bulk requests start having to wait, one when they stop.
type capacityQueue struct {
	s     *Service
	queue chan waitingBatch
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once

	mu sync.Mutex
	// last is the latest deferred batch of the current run of them (zero:
	// none); a run ends after two quiet seconds.
	last     time.Time
	deferred uint64 // batches deferred in the run, at capacity or not
	// throttledSince is when the run found the source throttled, the
	// start of the throttling episode (zero: none); waited and rejected
	// count the episode's deferred batches and 503s.
	throttledSince   time.Time
	waited, rejected uint64
}

func newCapacityQueue(s *Service) *capacityQueue {
	q := &capacityQueue{s: s, queue: make(chan waitingBatch, maxWaitingBatches), done: make(chan struct{})}
	q.wg.Add(1)
	go q.run()
	return q
}

// enqueue hands a deferred batch to the queue; false when it is full.
func (q *capacityQueue) enqueue(w waitingBatch) bool {
	select {
	case <-q.done:
		return false
	default:
	}
	q.note(true, false)
	select {
	case q.queue <- w:
		return true
	default:
		return false
	}
}

func (q *capacityQueue) run() {
	defer q.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-q.done:
			// Answer what is left rather than leave callers to time out.
			for {
				select {
				case w := <-q.queue:
					q.serve(w, true)
				default:
					return
				}
			}
		case w := <-q.queue:
			q.serve(w, false)
		case <-tick.C:
			q.endEpisodeIfQuiet()
		}
	}
}

func (q *capacityQueue) serve(w waitingBatch, stopping bool) {
	ctx, cancel := context.WithDeadline(w.call.ctx, w.deadline)
	if stopping {
		cancel()
	}
	r := w.wait(ctx, (*w.call.bp)[:0])
	cancel()
	if r.err != nil {
		q.note(false, true)
	}
	q.s.finish(w.call, r)
}

// note records a deferred batch (waited) or a failed one (rejected), and
// starts a throttling episode once the source is found throttled.
func (q *capacityQueue) note(waited, rejected bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	q.last = now
	if waited {
		q.deferred++
	}
	if q.throttledSince.IsZero() {
		st := q.s.src.State()
		if !st.Throttled {
			return
		}
		q.throttledSince = now
		q.s.log.Warn("at capacity: demand exceeds what this instance sustains; bulk requests wait for IDs",
			"sustained_ids_per_second", st.PerSecond, "lanes", len(st.Lanes), "max_lanes", st.MaxLanes)
		q.s.otel.throttleEpisode()
	}
	if waited {
		q.waited++
		q.s.otel.throttleWait()
	}
	if rejected {
		q.rejected++
	}
}

// endEpisodeIfQuiet ends the run (and its throttling episode) after two
// seconds without a deferred batch.
func (q *capacityQueue) endEpisodeIfQuiet() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.last.IsZero() || time.Since(q.last) < 2*time.Second {
		return
	}
	if !q.throttledSince.IsZero() {
		q.s.log.Warn("capacity recovered: bulk requests no longer wait",
			"duration", q.last.Sub(q.throttledSince).Round(time.Millisecond), "waited", q.waited, "rejected", q.rejected)
	}
	q.last, q.deferred = time.Time{}, 0
	q.throttledSince, q.waited, q.rejected = time.Time{}, 0, 0
}

// deferredInRun is how many batches the current run has deferred (tests).
func (q *capacityQueue) deferredInRun() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deferred
}

func (q *capacityQueue) stop() {
	q.once.Do(func() { close(q.done) })
	q.wg.Wait()
}
