package uidcore

import (
	"context"
	"time"
)

// PaddingTrigger says why a padding round ran.
type PaddingTrigger string

// The padding triggers.
const (
	TriggerStartup   PaddingTrigger = "startup"
	TriggerThreshold PaddingTrigger = "threshold"
	TriggerSchedule  PaddingTrigger = "schedule"
	// TriggerFreshness: IDs in the ring lag the wall clock by more than
	// MaxLag; the round discards them and refills.
	TriggerFreshness PaddingTrigger = "freshness"
	// TriggerReserve: a bulk take reserved runs of IDs (ReserveRuns); the
	// round hands them over instead of writing them to the ring
	// (PaddingReport.Reserved).
	TriggerReserve PaddingTrigger = "reserve"
	// triggerForced: a test of the package asked for the round (padNow).
	triggerForced PaddingTrigger = "forced"
)

// PaddingReport describes a finished padding round.
type PaddingReport struct {
	Trigger      PaddingTrigger
	Added        int           // IDs put into the ring
	Reserved     int           // IDs handed to a bulk take as runs, from the ring and the lanes (TriggerReserve)
	FirstSecond  int64         // unix second of the first ID added (0 when none)
	LastSecond   int64         // unix second of the last ID added (0 when none)
	SecondsAhead int64         // how far the newest ID in the ring runs ahead of the wall clock at the end
	Duration     time.Duration // wall time the round took
	Available    uint64        // IDs in the ring at the end
	Discarded    int           // stale IDs dropped before the round filled (MaxLag)
	Lanes        int           // lanes (worker IDs) held at the end
}

// PutRejection is a put the ring refused.
type PutRejection struct {
	Reason PutRejectReason
	Second int64 // the logical second padding wanted to fill
	Err    error // the cause, for reasons that have one
}

// PutRejectReason says why padding stopped before the ring was full.
type PutRejectReason string

// The put rejection reasons.
const (
	// RejectAheadBound: the logical second reached MaxAhead beyond the wall clock.
	RejectAheadBound PutRejectReason = "ahead_of_clock_bound"
	// RejectNotReserved: the claim has not reserved the second yet, or is lost.
	RejectNotReserved PutRejectReason = "claim"
	// RejectExhausted: the time field is full.
	RejectExhausted PutRejectReason = "time_exhausted"
	// RejectSlotBusy: the next slot was taken but its taker has not read it yet.
	RejectSlotBusy PutRejectReason = "slot_busy"
)

// TakeRejection is a take the ring refused.
type TakeRejection struct {
	Wanted int   // IDs asked for and not given
	Err    error // what the taker gets by default
}

// Observer sees what a CachedGenerator does, so telemetry can record
// padding rounds and rejections without this package depending on it. The
// methods are called synchronously and must be quick.
type Observer interface {
	// PaddingStarted returns the context that PutRejected and
	// PaddingFinished of the same round receive (a span, say).
	PaddingStarted(ctx context.Context, trigger PaddingTrigger) context.Context
	PutRejected(ctx context.Context, r PutRejection)
	PaddingFinished(ctx context.Context, r PaddingReport)
	// TakeRejected receives the context of the Next/NextN call that met it.
	TakeRejected(ctx context.Context, r TakeRejection)
}

// NopObserver ignores everything; embed it to implement only some methods.
type NopObserver struct{}

// PaddingStarted implements Observer.
func (NopObserver) PaddingStarted(ctx context.Context, _ PaddingTrigger) context.Context { return ctx }

// PutRejected implements Observer.
func (NopObserver) PutRejected(context.Context, PutRejection) {}

// PaddingFinished implements Observer.
func (NopObserver) PaddingFinished(context.Context, PaddingReport) {}

// TakeRejected implements Observer.
func (NopObserver) TakeRejected(context.Context, TakeRejection) {}

// PutRejectPolicy decides what happens to a rejected put beyond counting
// it. The default drops it: padding stops and resumes at the next trigger.
type PutRejectPolicy func(ctx context.Context, r PutRejection)

// TakeRejectPolicy decides what a rejected take returns to its caller.
// The default returns r.Err (ErrBufferEmpty or the cause behind it).
type TakeRejectPolicy func(ctx context.Context, r TakeRejection) error
