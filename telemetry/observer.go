package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
	"github.com/uid-dispenser/uid-dispenser/telemetry/uidattr"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// instrumentationName names this package's tracer and meter.
const instrumentationName = "github.com/uid-dispenser/uid-dispenser/telemetry"

// Attribute keys of padding spans, rejection events and generator metrics.
const (
	TriggerKey      = attribute.Key("uid.padding.trigger")
	StopKey         = attribute.Key("uid.padding.stop")
	ReasonKey       = uidattr.Reason
	WantedKey       = attribute.Key("uid.take.wanted")
	SecondKey       = attribute.Key("uid.put.second")
	AddedKey        = attribute.Key("uid.padding.ids_added")
	FirstSecondKey  = attribute.Key("uid.padding.first_second")
	LastSecondKey   = attribute.Key("uid.padding.last_second")
	SecondsAheadKey = attribute.Key("uid.padding.seconds_ahead")
	DurationKey     = attribute.Key("uid.padding.duration_seconds")
	AvailableKey    = attribute.Key("uid.ring.available")
	LanesKey        = attribute.Key("uid.lanes")
)

// Span and event names.
const (
	PaddingSpanName       = "uid.padding"
	PutRejectedEventName  = "uid.put.rejected"
	TakeRejectedEventName = "uid.take.rejected"
)

// stopFull is the padding-round stop label of a round that filled the ring.
const stopFull = "full"

// ObserverConfig configures an Observer.
type ObserverConfig struct {
	// Layout gives the runway (required: its zero value means the default
	// layout).
	Layout uidcore.Layout
	// WorkerID is put on padding spans and the gauges until Watch or
	// SetWorkerID changes it.
	WorkerID uint64
	// Clock tells the runway's "now"; nil: the system clock.
	Clock uidcore.Clock
	// LeaseLeft reports the time left on the worker-ID lease, ok false when
	// there is no lease to report (static worker IDs); nil: no lease gauge.
	LeaseLeft func() (left time.Duration, ok bool)
	// RunwayWarning: warn (a log line at most once a day, and the
	// uid.runway.warning gauge) while the runway is shorter. Zero: a year
	// ([DefaultRunwayWarning]); negative: never.
	RunwayWarning time.Duration

	// TracerProvider and MeterProvider default to the global ones.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Logger receives the runway warning; nil: slog.Default().
	Logger *slog.Logger
}

// Observer implements uidcore.Observer with OpenTelemetry: a span per
// padding round, rejection events and counters, and gauges over the
// generator given to Watch. One observer may serve the generators an
// instance builds one after another (a new one per worker claim): Watch
// the current one. Close it after the last generator.
type Observer struct {
	tracer        trace.Tracer
	layout        uidcore.Layout
	clock         uidcore.Clock
	logger        *slog.Logger
	leaseLeft     func() (time.Duration, bool)
	runwayWarning time.Duration
	workerID      atomic.Uint64

	paddingRounds   metric.Int64Counter
	paddingDuration metric.Float64Histogram
	paddingIDs      metric.Int64Counter
	putRejections   metric.Int64Counter
	takeRejections  metric.Int64Counter
	registration    metric.Registration

	source   atomic.Pointer[StateSource]
	warnedAt atomic.Int64 // unix nanoseconds of the last runway warning log
}

// StateSource is what Watch reads the gauges from: a *uidcore.CachedGenerator.
type StateSource interface {
	State() uidcore.State
}

var _ uidcore.Observer = (*Observer)(nil)

// NewObserver makes the instruments and registers the gauges' callback.
func NewObserver(opts ObserverConfig) (*Observer, error) {
	if opts.Layout == (uidcore.Layout{}) {
		opts.Layout = uidcore.DefaultLayout()
	}
	if err := opts.Layout.Validate(); err != nil {
		return nil, fmt.Errorf("telemetry: observer: %w", err)
	}
	if opts.Clock == nil {
		opts.Clock = uidcore.SystemClock{}
	}
	if opts.RunwayWarning == 0 {
		opts.RunwayWarning = DefaultRunwayWarning
	}
	if opts.TracerProvider == nil {
		opts.TracerProvider = otel.GetTracerProvider()
	}
	if opts.MeterProvider == nil {
		opts.MeterProvider = otel.GetMeterProvider()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	o := &Observer{
		tracer:        opts.TracerProvider.Tracer(instrumentationName),
		layout:        opts.Layout,
		clock:         opts.Clock,
		logger:        opts.Logger,
		leaseLeft:     opts.LeaseLeft,
		runwayWarning: opts.RunwayWarning,
	}
	o.workerID.Store(opts.WorkerID)
	if err := o.makeInstruments(opts.MeterProvider.Meter(instrumentationName)); err != nil {
		return nil, fmt.Errorf("telemetry: observer instruments: %w", err)
	}
	o.zeroCounters()
	o.checkRunway()
	return o, nil
}

func (o *Observer) makeInstruments(m metric.Meter) error {
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	o.paddingRounds, err = m.Int64Counter("uid.padding.rounds", metric.WithUnit("{round}"),
		metric.WithDescription("Padding rounds of the ring buffer, by trigger and by what stopped them."))
	check(err)
	o.paddingDuration, err = m.Float64Histogram("uid.padding.duration", metric.WithUnit("s"),
		metric.WithDescription("Wall time of padding rounds."),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1))
	check(err)
	o.paddingIDs, err = m.Int64Counter("uid.padding.ids", metric.WithUnit("{id}"),
		metric.WithDescription("IDs put into the ring buffer by padding."))
	check(err)
	o.putRejections, err = m.Int64Counter("uid.put.rejections", metric.WithUnit("{rejection}"),
		metric.WithDescription("Padding rounds stopped before the ring was full, by reason."))
	check(err)
	o.takeRejections, err = m.Int64Counter("uid.take.rejections", metric.WithUnit("{rejection}"),
		metric.WithDescription("Takes refused by the ring buffer, by reason."))
	check(err)

	issued, err := m.Int64ObservableCounter("uid.generator.issued", metric.WithUnit("{id}"),
		metric.WithDescription("IDs taken from the ring buffer."))
	check(err)
	available, err := m.Int64ObservableGauge("uid.ring.available", metric.WithUnit("{id}"),
		metric.WithDescription("IDs in the ring buffer ready to take."))
	check(err)
	fill, err := m.Float64ObservableGauge("uid.ring.fill", metric.WithUnit("1"),
		metric.WithDescription("Fraction of the ring buffer ready to take (0..1)."))
	check(err)
	ahead, err := m.Int64ObservableGauge("uid.clock.ahead", metric.WithUnit("s"),
		metric.WithDescription("Seconds the padding's logical second runs ahead of the wall clock (negative: behind, at low load)."))
	check(err)
	runway, err := m.Float64ObservableGauge("uid.runway.remaining", metric.WithUnit("s"),
		metric.WithDescription("Seconds until the layout's time field is exhausted."))
	check(err)
	warning, err := m.Int64ObservableGauge("uid.runway.warning",
		metric.WithDescription("1 while the runway is shorter than the warning threshold."))
	check(err)
	lanes, err := m.Int64ObservableGauge("uid.lanes", metric.WithUnit("{lane}"),
		metric.WithDescription("Worker IDs (lanes) the generator holds; each sustains 2^seq bits IDs per second."))
	check(err)
	lanesClaimed, err := m.Int64ObservableCounter("uid.lanes.claimed", metric.WithUnit("{lane}"),
		metric.WithDescription("Extra lanes claimed because demand exceeded what the lanes held sustain."))
	check(err)
	lanesReleased, err := m.Int64ObservableCounter("uid.lanes.released", metric.WithUnit("{lane}"),
		metric.WithDescription("Extra lanes given back after going unused."))
	check(err)
	sustained, err := m.Int64ObservableGauge("uid.capacity", metric.WithUnit("{id}/s"),
		metric.WithDescription("IDs per second the lanes held sustain at wall-clock pace."))
	check(err)
	observables := []metric.Observable{issued, available, fill, ahead, runway, warning, lanes, lanesClaimed, lanesReleased, sustained}
	var lease metric.Float64ObservableGauge
	if o.leaseLeft != nil {
		lease, err = m.Float64ObservableGauge("uid.lease.remaining", metric.WithUnit("s"),
			metric.WithDescription("Seconds left on the worker-ID lease."))
		check(err)
		observables = append(observables, lease)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	o.registration, err = m.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		src := o.source.Load()
		worker := o.worker()
		var s uidcore.State
		if src != nil {
			s = (*src).State()
			worker = WorkerIDKey.Int64(int64(s.WorkerID))
		}
		attrs := metric.WithAttributes(worker)
		left := o.runwayLeft()
		obs.ObserveFloat64(runway, o.runwaySeconds(), attrs)
		var warn int64
		if o.underThreshold(left) {
			warn = 1
			o.warnRunway(left)
		}
		obs.ObserveInt64(warning, warn, attrs)
		if o.leaseLeft != nil {
			if d, ok := o.leaseLeft(); ok {
				obs.ObserveFloat64(lease, d.Seconds(), attrs)
			}
		}
		if src == nil {
			return nil
		}
		// uid.generator.issued is per generator (per worker ID): a new
		// generator starts a new series from zero.
		obs.ObserveInt64(issued, int64(s.Cursor), attrs)
		obs.ObserveInt64(available, int64(s.Available), attrs)
		if s.Size > 0 {
			obs.ObserveFloat64(fill, float64(s.Available)/float64(s.Size), attrs)
		}
		obs.ObserveInt64(ahead, s.SecondsAhead, attrs)
		obs.ObserveInt64(lanes, int64(len(s.Lanes)), attrs)
		obs.ObserveInt64(lanesClaimed, int64(s.LanesClaimed), attrs)
		obs.ObserveInt64(lanesReleased, int64(s.LanesReleased), attrs)
		obs.ObserveInt64(sustained, int64(s.PerSecond), attrs)
		return nil
	}, observables...)
	return err
}

// LaneChanged implements uidcore.LaneObserver: lanes claimed and given
// back are logged (the metrics come from the generator's state).
func (o *Observer) LaneChanged(_ context.Context, e uidcore.LaneEvent) {
	switch {
	case e.Err != nil:
		o.logger.Warn("claiming another lane failed; demand above the lanes held borrows up to the ahead bound meanwhile", "lanes", e.Held, "err", e.Err)
	case e.Added:
		o.logger.Info("claimed another lane: demand exceeded what the lanes held sustain", event.Key, event.LaneClaimed, event.AttrWorker, e.WorkerID, "lanes", e.Held)
	case e.ReleaseErr != nil:
		// The same event, at warn: the lane issues nothing more, but its
		// lease stays in the store until it runs out (release_err says
		// when).
		o.logger.Warn("gave back an idle lane", event.Key, event.LaneReturned, event.AttrWorker, e.WorkerID, "lanes", e.Held, "release_err", e.ReleaseErr)
	default:
		o.logger.Info("gave back an idle lane", event.Key, event.LaneReturned, event.AttrWorker, e.WorkerID, "lanes", e.Held)
	}
}

// Watch makes the gauges read src (the generator this observer was given
// to) from now on, and takes its worker ID.
func (o *Observer) Watch(src StateSource) {
	o.workerID.Store(src.State().WorkerID)
	o.source.Store(&src)
}

// SetWorkerID sets the worker ID that padding spans and gauges carry. Call
// it before building a generator on a new claim, so that its start-up
// padding round is labelled right.
func (o *Observer) SetWorkerID(id uint64) { o.workerID.Store(id) }

func (o *Observer) worker() attribute.KeyValue {
	return WorkerIDKey.Int64(int64(o.workerID.Load()))
}

// Close unregisters the gauges; the counters keep their totals.
func (o *Observer) Close() error {
	o.source.Store(nil)
	return o.registration.Unregister()
}

// roundKey keys the padding round's state in the context PaddingStarted
// returns.
type roundKey struct{}

// round is the state of one padding round, owned by the padding goroutine.
type round struct {
	stop string
}

// PaddingStarted implements uidcore.Observer: it starts the round's span.
func (o *Observer) PaddingStarted(ctx context.Context, trigger uidcore.PaddingTrigger) context.Context {
	ctx, _ = o.tracer.Start(ctx, PaddingSpanName, trace.WithAttributes(TriggerKey.String(string(trigger)), o.worker()))
	return context.WithValue(ctx, roundKey{}, &round{stop: stopFull})
}

// PutRejected implements uidcore.Observer: an event on the padding span
// and a count by reason.
func (o *Observer) PutRejected(ctx context.Context, rej uidcore.PutRejection) {
	reason := ReasonKey.String(string(rej.Reason))
	attrs := []attribute.KeyValue{reason, SecondKey.Int64(rej.Second)}
	if rej.Err != nil {
		attrs = append(attrs, attribute.String("error.message", rej.Err.Error()))
	}
	trace.SpanFromContext(ctx).AddEvent(PutRejectedEventName, trace.WithAttributes(attrs...))
	if r, ok := ctx.Value(roundKey{}).(*round); ok {
		r.stop = string(rej.Reason)
	}
	o.putRejections.Add(ctx, 1, metric.WithAttributes(reason))
}

// PaddingFinished implements uidcore.Observer: it ends the round's span
// with the report and counts the round.
func (o *Observer) PaddingFinished(ctx context.Context, rep uidcore.PaddingReport) {
	trigger := TriggerKey.String(string(rep.Trigger))
	stop := stopFull
	if r, ok := ctx.Value(roundKey{}).(*round); ok {
		stop = r.stop
	}
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.SetAttributes(
			StopKey.String(stop),
			AddedKey.Int(rep.Added),
			FirstSecondKey.Int64(rep.FirstSecond),
			LastSecondKey.Int64(rep.LastSecond),
			SecondsAheadKey.Int64(rep.SecondsAhead),
			DurationKey.Float64(rep.Duration.Seconds()),
			AvailableKey.Int64(int64(rep.Available)),
			LanesKey.Int(rep.Lanes),
		)
		if stop == string(uidcore.RejectExhausted) || (stop == string(uidcore.RejectNotReserved) && rep.Available == 0) {
			// The ring is left empty for a reason padding cannot fix by
			// itself: make the round stand out.
			span.SetStatus(codes.Error, "padding stopped: "+stop)
		}
	}
	span.End()
	o.paddingRounds.Add(ctx, 1, metric.WithAttributes(trigger, StopKey.String(stop)))
	o.paddingDuration.Record(ctx, rep.Duration.Seconds(), metric.WithAttributes(trigger))
	o.paddingIDs.Add(ctx, int64(rep.Added))
	o.checkRunway()
}

// TakeRejected implements uidcore.Observer: an event on the span of the
// request that met the rejection and a count by reason.
func (o *Observer) TakeRejected(ctx context.Context, rej uidcore.TakeRejection) {
	reason := ReasonKey.String(TakeRejectReason(rej.Err))
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		attrs := []attribute.KeyValue{reason, WantedKey.Int(rej.Wanted)}
		if rej.Err != nil {
			attrs = append(attrs, attribute.String("error.message", rej.Err.Error()))
		}
		span.AddEvent(TakeRejectedEventName, trace.WithAttributes(attrs...))
	}
	o.takeRejections.Add(ctx, 1, metric.WithAttributes(reason))
}

// TakeRejectReason names the cause of a rejected take for metrics: the
// most specific uidcore sentinel err wraps.
func TakeRejectReason(err error) string {
	switch {
	case errors.Is(err, uidcore.ErrClaimLost):
		return takeClaimLost
	case errors.Is(err, uidcore.ErrClosed):
		return takeClosed
	case errors.Is(err, uidcore.ErrTimeExhausted):
		return takeTimeExhausted
	case errors.Is(err, uidcore.ErrNotReserved):
		return takeNotReserved
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return takeCanceled
	case errors.Is(err, uidcore.ErrBufferEmpty):
		return takeEmpty
	}
	return takeOther
}

// The reasons of TakeRejectReason.
const (
	takeClaimLost     = "claim_lost"
	takeClosed        = "closed"
	takeTimeExhausted = "time_exhausted"
	takeNotReserved   = "not_reserved"
	takeCanceled      = "canceled"
	takeEmpty         = "empty"
	takeOther         = "other"
)

// zeroCounters exports every rejection reason at 0 from the start, so
// that alerts and dashboards see the series before the first event.
func (o *Observer) zeroCounters() {
	ctx := context.Background()
	for _, r := range []uidcore.PutRejectReason{uidcore.RejectAheadBound, uidcore.RejectNotReserved, uidcore.RejectExhausted, uidcore.RejectSlotBusy} {
		o.putRejections.Add(ctx, 0, metric.WithAttributes(ReasonKey.String(string(r))))
	}
	for _, r := range []string{takeClaimLost, takeClosed, takeTimeExhausted, takeNotReserved, takeCanceled, takeEmpty, takeOther} {
		o.takeRejections.Add(ctx, 0, metric.WithAttributes(ReasonKey.String(r)))
	}
	o.paddingIDs.Add(ctx, 0)
}

// runwayLeft is the time until the layout's time field is exhausted,
// saturated at time.Duration's 292 years.
func (o *Observer) runwayLeft() time.Duration {
	return o.layout.Runway(o.clock.Now())
}

// runwaySeconds is runwayLeft in seconds, without the saturation.
func (o *Observer) runwaySeconds() float64 {
	now := o.clock.Now()
	return float64(o.layout.RunwayEnd().Unix()-now.Unix()) - float64(now.Nanosecond())/1e9
}

func (o *Observer) underThreshold(left time.Duration) bool {
	return o.runwayWarning > 0 && left < o.runwayWarning
}

// checkRunway logs the runway warning when due.
func (o *Observer) checkRunway() {
	if left := o.runwayLeft(); o.underThreshold(left) {
		o.warnRunway(left)
	}
}

// runwayWarnEvery spaces the runway warning log lines.
const runwayWarnEvery = 24 * time.Hour

// warnRunway logs the warning at most once per runwayWarnEvery.
func (o *Observer) warnRunway(left time.Duration) {
	now := o.clock.Now().UnixNano()
	last := o.warnedAt.Load()
	if last != 0 && now-last < int64(runwayWarnEvery) {
		return
	}
	if !o.warnedAt.CompareAndSwap(last, now) {
		return
	}
	o.logger.Warn("uid layout runway is running out: plan a new layout (more time bits or a later epoch) before it ends",
		"layout", o.layout.String(),
		"runway_end", o.layout.RunwayEnd().Format(time.RFC3339),
		"runway_left", left.Round(time.Second).String(),
		"threshold", o.runwayWarning.String())
}
