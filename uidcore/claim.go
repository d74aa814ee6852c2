package uidcore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
)

// Claim is an instance's right to issue IDs under one worker ID. Assigners
// outside this package hand claims out (MySQL, JetStream KV); the
// generators consult the claim before they issue an ID for a second.
type Claim interface {
	// WorkerID is the worker ID this claim owns.
	WorkerID() uint64
	// After is the last unix second an earlier holder of the worker ID may
	// have issued IDs for (0 when there was none). The generators issue
	// only strictly later seconds, so a recycled worker ID never repeats
	// an earlier holder's IDs.
	After() int64
	// Until is the last unix second this claim may issue IDs for. It
	// returns an error (wrapping ErrClaimLost) once the claim is no longer
	// valid: the generators then stop issuing IDs. It is called on the hot
	// path and must be cheap (atomic loads).
	Until() (int64, error)
	// Release gives the worker ID back (a no-op for claims that cannot be
	// reused). The generator built on the claim must be closed first.
	Release(ctx context.Context) error
}

// Reserver is implemented by claims whose Until grows on demand (leased
// claims reserving seconds ahead). A generator that reaches Until calls
// Reserve with the second it wants so the claim extends its reservation
// promptly instead of at its next heartbeat.
type Reserver interface {
	Reserve(second int64)
}

// Retirer is implemented by claims that can give back the part of their
// reservation that was never used. A generator that stops for good calls
// Retire with the last second it may have issued IDs for, so that the next
// holder of the worker ID can start right after it instead of after the
// whole reservation (which would push a chain of quick restarts ever
// further ahead of the clock).
type Retirer interface {
	Retire(lastSecond int64)
}

// Warming is implemented by claims that cannot issue right after they
// are claimed: a lease on a store that may forget acknowledged writes
// issues only once its first reservation is durable, a loss window after
// the claim. Ready is closed once Until covers a second after After; a
// claim lost before that never closes it (watch its Done channel too).
type Warming interface {
	Ready() <-chan struct{}
}

// Ready is c's Ready channel, or a closed one for a claim that issues at
// once.
func Ready(c Claim) <-chan struct{} {
	if w, ok := c.(Warming); ok {
		return w.Ready()
	}
	return readyNow
}

var readyNow = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Assigner hands out claims. Implementations live outside uidcore.
type Assigner interface {
	Claim(ctx context.Context, layout Layout) (Claim, error)
}

// ErrClaimLost means the instance no longer holds a valid worker claim
// (lease expired, taken over, or released): it must not issue IDs.
var ErrClaimLost = errors.New("uidcore: worker claim lost")

// ErrNotReserved means the second an ID needs is beyond what the claim has
// reserved so far; it clears when the reservation is extended.
var ErrNotReserved = errors.New("uidcore: second not reserved by the worker claim")

// checkBasics fills in the default layout and clock and checks what both
// generators need: a valid layout and a claim whose worker ID fits it.
func checkBasics(layout *Layout, claim Claim, clock *Clock) error {
	if *layout == (Layout{}) {
		*layout = DefaultLayout()
	}
	if err := layout.Validate(); err != nil {
		return err
	}
	if claim == nil {
		return errors.New("uidcore: a Claim is required")
	}
	if w := claim.WorkerID(); w > layout.MaxWorkerID() {
		return fmt.Errorf("%w: worker %d > %d (layout %s)", ErrWorkerRange, w, layout.MaxWorkerID(), layout)
	}
	if *clock == nil {
		*clock = SystemClock{}
	}
	return nil
}

// StaticClaim is a claim on a fixed worker ID that never expires: for a
// worker ID configured by hand, for disposable worker IDs that are never
// reused, and for tests.
type StaticClaim struct {
	ID uint64
	// AfterSecond is returned by After.
	AfterSecond int64
}

// WorkerID implements Claim.
func (c StaticClaim) WorkerID() uint64 { return c.ID }

// After implements Claim.
func (c StaticClaim) After() int64 { return c.AfterSecond }

// Until implements Claim: a static claim allows every second.
func (c StaticClaim) Until() (int64, error) { return math.MaxInt64, nil }

// Release implements Claim; there is nothing to give back.
func (c StaticClaim) Release(context.Context) error { return nil }

// StaticAssigner hands out the worker IDs From..To (inclusive), each
// once, as StaticClaims that never expire: for an instance given a range
// of worker IDs by hand (its lanes), and for benchmarks and tests. A
// released worker ID is not handed out again. The zero value hands out
// worker ID 0 only.
type StaticAssigner struct {
	From, To uint64

	mu   sync.Mutex
	next uint64 // handed out so far
}

// Claim implements Assigner.
func (a *StaticAssigner) Claim(_ context.Context, layout Layout) (Claim, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := a.From + a.next
	if id > a.To || id > layout.MaxWorkerID() || id < a.From {
		return nil, fmt.Errorf("%w: the worker IDs %d..%d are all handed out", ErrWorkerRange, a.From, a.To)
	}
	a.next++
	return StaticClaim{ID: id}, nil
}
