package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
	"github.com/uid-dispenser/uid-dispenser/telemetry/telemetrytest"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"

	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
)

// waitSpans waits until n padding spans have ended.
func waitSpans(t *testing.T, p *providers, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	var spans []sdktrace.ReadOnlySpan
	testwait.WaitFor(t, 5*time.Second, fmt.Sprintf("%d padding spans ended", n), func() bool {
		spans = p.Ended(PaddingSpanName)
		return len(spans) >= n
	})
	return spans
}

func findEvent(s sdktrace.ReadOnlySpan, name string) (sdktrace.Event, bool) {
	for _, e := range s.Events() {
		if e.Name == name {
			return e, true
		}
	}
	return sdktrace.Event{}, false
}

// reportsKept passes every call on to its Observer and keeps the reports
// of the finished rounds, so a test can compare a span with the report
// the generator gave.
type reportsKept struct {
	uidcore.Observer
	mu      sync.Mutex
	reports []uidcore.PaddingReport
}

func (r *reportsKept) PaddingFinished(ctx context.Context, rep uidcore.PaddingReport) {
	r.Observer.PaddingFinished(ctx, rep)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, rep)
}

// report is the kept report of the round whose first ID is at second.
func (r *reportsKept) report(second int64) (uidcore.PaddingReport, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rep := range r.reports {
		if rep.FirstSecond == second {
			return rep, true
		}
	}
	return uidcore.PaddingReport{}, false
}

// TestPaddingAndRejectionsAreTraced drives a tiny ring (64 IDs per second,
// 64 slots, at most 1 s ahead, a clock that stands still) through a
// start-up round, a threshold round, a round stopped by the ahead bound (a
// rejected put), a rejected take and the round after the clock moved on,
// and checks the spans, events and metrics each leaves.
func TestPaddingAndRejectionsAreTraced(t *testing.T) {
	p := newProviders(t)
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC) // a whole second: the ahead-bound back-off lasts 1 s
	clk := uidcoretest.NewClock(start)
	T := start.Unix()
	layout := tinyLayout()
	obs, err := NewObserver(ObserverConfig{Layout: layout, WorkerID: 7, Clock: clk, TracerProvider: p.Tracer, MeterProvider: p.Meter})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	kept := &reportsKept{Observer: obs}
	gen, err := uidcore.NewCached(uidcore.CachedOptions{
		Layout: layout, Claim: uidcore.StaticClaim{ID: 7}, Clock: clk,
		RingSeconds: 1, MaxAhead: time.Second, Observer: kept,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Close()
	obs.Watch(gen)
	if gen.Size() != 64 {
		t.Fatalf("ring size %d, want 64", gen.Size())
	}
	ctx := context.Background()

	// Round 1, at start-up: second T, 64 IDs.
	startup := waitSpans(t, p, 1)[0]
	checkRound(t, startup, uidcore.TriggerStartup, "full", 64, T, T)

	// Round 2: taking the whole ring triggers padding of second T+1.
	issued := make(map[uint64]bool)
	take := func() {
		t.Helper()
		ids := make([]uint64, 64)
		if n, err := gen.NextN(ctx, ids); n != 64 || err != nil {
			t.Fatalf("NextN = %d, %v; want 64 IDs", n, err)
		}
		for _, id := range ids {
			if issued[id] {
				t.Fatalf("duplicate ID %d", id)
			}
			issued[id] = true
		}
	}
	take()
	checkRound(t, waitSpans(t, p, 2)[1], uidcore.TriggerThreshold, "full", 64, T+1, T+1)

	// Round 3: second T+2 would be 2 s ahead of the clock: put rejected.
	take()
	stopped := waitSpans(t, p, 3)[2]
	checkRound(t, stopped, uidcore.TriggerThreshold, string(uidcore.RejectAheadBound), 0, 0, 0)
	ev, ok := findEvent(stopped, PutRejectedEventName)
	if !ok {
		t.Fatalf("padding span stopped by the ahead bound has no %s event; events %v", PutRejectedEventName, stopped.Events())
	}
	if got := telemetrytest.Attr(ev.Attributes, ReasonKey).AsString(); got != string(uidcore.RejectAheadBound) {
		t.Errorf("put rejection reason %q, want %q", got, uidcore.RejectAheadBound)
	}
	if got := telemetrytest.Attr(ev.Attributes, SecondKey).AsInt64(); got != T+2 {
		t.Errorf("put rejection second %d, want %d", got, T+2)
	}

	// The ring is empty: a take inside a request span is rejected, and the
	// rejection is an event on that span.
	reqCtx, req := p.Tracer.Tracer("test").Start(ctx, "request")
	_, err = gen.Next(reqCtx)
	req.End()
	if !errors.Is(err, uidcore.ErrBufferEmpty) {
		t.Fatalf("Next on an empty ring: %v, want ErrBufferEmpty", err)
	}
	reqSpan := p.Ended("request")[0]
	ev, ok = findEvent(reqSpan, TakeRejectedEventName)
	if !ok {
		t.Fatalf("request span has no %s event; events %v", TakeRejectedEventName, reqSpan.Events())
	}
	if got := telemetrytest.Attr(ev.Attributes, ReasonKey).AsString(); got != "empty" {
		t.Errorf("take rejection reason %q, want empty", got)
	}
	if got := telemetrytest.Attr(ev.Attributes, WantedKey).AsInt64(); got != 1 {
		t.Errorf("take rejection wanted %d, want 1", got)
	}

	// Once the clock moved on, the rejected take's request for padding
	// (kept through the back-off) or the look at the new second fills the
	// empty ring at the new second. A round that ran before the clock
	// moved was stopped by the ahead bound again, and is skipped.
	clk.Add(10 * time.Second)
	var rep uidcore.PaddingReport
	testwait.WaitFor(t, 10*time.Second, "the round at the new second", func() bool {
		var ok bool
		rep, ok = kept.report(T + 10)
		return ok
	})
	if rep.Added != 64 || rep.Trigger != uidcore.TriggerThreshold {
		t.Fatalf("round report %+v, want 64 IDs at second %d on the threshold", rep, T+10)
	}
	var moved sdktrace.ReadOnlySpan
	for _, s := range waitSpans(t, p, 4)[3:] {
		if telemetrytest.Attr(s.Attributes(), FirstSecondKey).AsInt64() == T+10 {
			moved = s
		}
	}
	if moved == nil {
		t.Fatal("no padding span for the round at the new second")
	}
	checkRound(t, moved, uidcore.TriggerThreshold, "full", 64, T+10, T+10)
	if got := telemetrytest.Attr(moved.Attributes(), DurationKey).AsFloat64(); got != rep.Duration.Seconds() {
		t.Errorf("duration attribute %v, want the report's %v", got, rep.Duration.Seconds())
	}
	if got := telemetrytest.Attr(moved.Attributes(), SecondsAheadKey).AsInt64(); got != rep.SecondsAhead || got != 0 {
		t.Errorf("seconds ahead %d, want %d (the report's) = 0", got, rep.SecondsAhead)
	}
	if got := telemetrytest.Attr(moved.Attributes(), WorkerIDKey).AsInt64(); got != 7 {
		t.Errorf("worker ID attribute %d, want 7", got)
	}

	// The same story in the metrics.
	rm := p.Collect(t)
	for _, c := range []struct {
		name  string
		match []attribute.KeyValue
		min   float64
		max   float64
	}{
		{"uid.padding.rounds", []attribute.KeyValue{TriggerKey.String("startup")}, 1, 1},
		{"uid.padding.rounds", []attribute.KeyValue{StopKey.String(string(uidcore.RejectAheadBound))}, 1, math.Inf(1)},
		{"uid.padding.duration", nil, 4, math.Inf(1)},
		{"uid.padding.ids", nil, 192, 192},
		{"uid.put.rejections", []attribute.KeyValue{ReasonKey.String(string(uidcore.RejectAheadBound))}, 1, math.Inf(1)},
		{"uid.take.rejections", []attribute.KeyValue{ReasonKey.String("empty")}, 1, 1},
		{"uid.generator.issued", []attribute.KeyValue{WorkerIDKey.Int(7)}, 128, 128},
		{"uid.ring.available", nil, 64, 64},
		{"uid.ring.fill", nil, 1, 1},
		{"uid.clock.ahead", nil, 0, 0},
		{"uid.runway.warning", nil, 0, 0},
	} {
		got, found := telemetrytest.MetricSum(rm, c.name, c.match...)
		if !found || got < c.min || got > c.max {
			t.Errorf("%s%v = %v (found %v), want %v..%v", c.name, c.match, got, found, c.min, c.max)
		}
	}
	runway, _ := telemetrytest.MetricSum(rm, "uid.runway.remaining")
	if want := float64(layout.LastSecond() + 1 - clk.Now().Unix()); runway != want {
		t.Errorf("uid.runway.remaining = %v, want %v", runway, want)
	}
	if _, found := telemetrytest.MetricSum(rm, "uid.lease.remaining"); found {
		t.Error("uid.lease.remaining reported without a LeaseLeft func")
	}
}

func checkRound(t *testing.T, s sdktrace.ReadOnlySpan, trigger uidcore.PaddingTrigger, stop string, added int, first, last int64) {
	t.Helper()
	a := s.Attributes()
	got := fmt.Sprintf("trigger=%s stop=%s added=%d first=%d last=%d",
		telemetrytest.Attr(a, TriggerKey).AsString(), telemetrytest.Attr(a, StopKey).AsString(), telemetrytest.Attr(a, AddedKey).AsInt64(),
		telemetrytest.Attr(a, FirstSecondKey).AsInt64(), telemetrytest.Attr(a, LastSecondKey).AsInt64())
	want := fmt.Sprintf("trigger=%s stop=%s added=%d first=%d last=%d", trigger, stop, added, first, last)
	if got != want {
		t.Errorf("padding span: %s\nwant:         %s", got, want)
	}
	if telemetrytest.Attr(a, DurationKey).Type() != attribute.FLOAT64 || telemetrytest.Attr(a, SecondsAheadKey).Type() != attribute.INT64 {
		t.Errorf("padding span lacks duration or seconds-ahead attributes: %v", a)
	}
}

// newObservedGenerator starts a generator on tinyLayout for claim, observed
// by an observer on p's providers; both close when the test ends, the
// generator first.
func newObservedGenerator(t *testing.T, p *providers, claim uidcore.Claim) *uidcore.CachedGenerator {
	t.Helper()
	obs, err := NewObserver(ObserverConfig{Layout: tinyLayout(), TracerProvider: p.Tracer, MeterProvider: p.Meter})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obs.Close() })
	gen, err := uidcore.NewCached(uidcore.CachedOptions{Layout: tinyLayout(), Claim: claim, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gen.Close() })
	return gen
}

// TestTakeRejectedWhenClaimLost: a take after the claim is lost is an event
// with reason claim_lost on the request span, and counted so.
func TestTakeRejectedWhenClaimLost(t *testing.T) {
	p := newProviders(t)
	claim := &losableClaim{}
	gen := newObservedGenerator(t, p, claim)
	ctx, span := p.Tracer.Tracer("test").Start(context.Background(), "request")
	if _, err := gen.Next(ctx); err != nil {
		t.Fatalf("Next with a valid claim: %v", err)
	}
	claim.lost.Store(true)
	_, err := gen.Next(ctx)
	span.End()
	if !errors.Is(err, uidcore.ErrClaimLost) {
		t.Fatalf("Next after the claim was lost: %v, want ErrClaimLost", err)
	}
	ev, ok := findEvent(p.Ended("request")[0], TakeRejectedEventName)
	if !ok || telemetrytest.Attr(ev.Attributes, ReasonKey).AsString() != "claim_lost" {
		t.Fatalf("request span events %v, want %s with reason claim_lost", p.Ended("request")[0].Events(), TakeRejectedEventName)
	}
	if got, _ := telemetrytest.MetricSum(p.Collect(t), "uid.take.rejections", ReasonKey.String("claim_lost")); got != 1 {
		t.Errorf("uid.take.rejections{claim_lost} = %v, want 1", got)
	}
}

// TestPaddingSpanMarksEmptyRingError: a round that leaves the ring empty
// because the claim is lost ends with an error status.
func TestPaddingSpanMarksEmptyRingError(t *testing.T) {
	p := newProviders(t)
	claim := &losableClaim{}
	claim.lost.Store(true)
	newObservedGenerator(t, p, claim)
	s := waitSpans(t, p, 1)[0]
	if s.Status().Code != codes.Error || !strings.Contains(s.Status().Description, string(uidcore.RejectNotReserved)) {
		t.Errorf("status %+v, want an error naming %s", s.Status(), uidcore.RejectNotReserved)
	}
	ev, ok := findEvent(s, PutRejectedEventName)
	if !ok || !strings.Contains(telemetrytest.Attr(ev.Attributes, "error.message").AsString(), "claim lost") {
		t.Errorf("events %v, want a put rejection naming the lost claim", s.Events())
	}
}

// TestRunwayWarning: under the threshold the observer logs a warning (at
// most once a day) and raises the gauge; above it, or with the warning
// off, neither.
func TestRunwayWarning(t *testing.T) {
	now := time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC)
	// 25 bits of seconds is 388 days; from an epoch 200 days ago, 188 are left.
	short := uidcore.Layout{TimeBits: 25, WorkerBits: 22, SeqBits: 16, Epoch: now.Add(-200 * 24 * time.Hour)}
	cases := []struct {
		name      string
		layout    uidcore.Layout
		threshold time.Duration
		warn      bool
	}{
		{"short runway, default threshold", short, 0, true},
		{"short runway, 100 days threshold", short, 100 * 24 * time.Hour, false},
		{"short runway, warning off", short, -1, false},
		{"default layout", uidcore.DefaultLayout(), 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newProviders(t)
			logs := &testenv.LogBuffer{}
			logger := logs.Logger(slog.LevelInfo)
			clk := uidcoretest.NewClock(now)
			obs, err := NewObserver(ObserverConfig{Layout: c.layout, Clock: clk, RunwayWarning: c.threshold,
				TracerProvider: p.Tracer, MeterProvider: p.Meter, Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			defer obs.Close()
			rm := p.Collect(t)
			gauge, _ := telemetrytest.MetricSum(rm, "uid.runway.warning")
			runway, _ := telemetrytest.MetricSum(rm, "uid.runway.remaining")
			if want := c.layout.Runway(now).Seconds(); runway != want {
				t.Errorf("uid.runway.remaining = %v, want %v", runway, want)
			}
			warnings := strings.Count(logs.String(), "runway is running out")
			if !c.warn {
				if gauge != 0 || warnings != 0 {
					t.Errorf("gauge %v, %d warnings; want neither\n%s", gauge, warnings, logs)
				}
				return
			}
			if gauge != 1 || warnings != 1 {
				t.Fatalf("gauge %v, %d warnings; want 1 and 1\n%s", gauge, warnings, logs)
			}
			if !strings.Contains(logs.String(), "runway_end="+c.layout.RunwayEnd().Format(time.RFC3339)) {
				t.Errorf("warning does not say when the runway ends:\n%s", logs)
			}
			p.Collect(t)
			if n := strings.Count(logs.String(), "runway is running out"); n != 1 {
				t.Errorf("%d warnings after a second collection within a day, want 1", n)
			}
			clk.Add(25 * time.Hour)
			p.Collect(t)
			if n := strings.Count(logs.String(), "runway is running out"); n != 2 {
				t.Errorf("%d warnings a day later, want 2", n)
			}
		})
	}
}

// TestLeaseGaugeAndClose: the lease gauge reports the caller's func, and
// Close stops the gauges.
func TestLeaseGaugeAndClose(t *testing.T) {
	p := newProviders(t)
	left, ok := 42*time.Second, true
	obs, err := NewObserver(ObserverConfig{Layout: tinyLayout(), WorkerID: 3, TracerProvider: p.Tracer, MeterProvider: p.Meter,
		LeaseLeft: func() (time.Duration, bool) { return left, ok }})
	if err != nil {
		t.Fatal(err)
	}
	gen, err := uidcore.NewCached(uidcore.CachedOptions{Layout: tinyLayout(), Claim: uidcore.StaticClaim{ID: 3}, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Close()
	obs.Watch(gen)
	if got, _ := telemetrytest.MetricSum(p.Collect(t), "uid.lease.remaining", WorkerIDKey.Int(3)); got != 42 {
		t.Errorf("uid.lease.remaining = %v, want 42", got)
	}
	ok = false
	if _, found := telemetrytest.MetricSum(p.Collect(t), "uid.lease.remaining"); found {
		t.Error("uid.lease.remaining reported while LeaseLeft says there is no lease")
	}
	if err := obs.Close(); err != nil {
		t.Fatal(err)
	}
	rm := p.Collect(t)
	for _, name := range []string{"uid.ring.available", "uid.runway.remaining"} {
		if _, found := telemetrytest.MetricSum(rm, name); found {
			t.Errorf("%s still reported after Close", name)
		}
	}
}

func TestTakeRejectReason(t *testing.T) {
	for want, err := range map[string]error{
		"claim_lost":     fmt.Errorf("%w: %w", uidcore.ErrBufferEmpty, uidcore.ErrClaimLost),
		"closed":         uidcore.ErrClosed,
		"time_exhausted": fmt.Errorf("%w: %w", uidcore.ErrBufferEmpty, uidcore.ErrTimeExhausted),
		"not_reserved":   fmt.Errorf("%w: %w", uidcore.ErrBufferEmpty, uidcore.ErrNotReserved),
		"canceled":       context.DeadlineExceeded,
		"empty":          uidcore.ErrBufferEmpty,
		"other":          errors.New("something else"),
	} {
		if got := TakeRejectReason(err); got != want {
			t.Errorf("TakeRejectReason(%v) = %q, want %q", err, got, want)
		}
	}
}

// TestObserverFollowsANewGenerator: one observer serves the generator of a
// new claim too; spans and gauges carry the new worker ID.
func TestObserverFollowsANewGenerator(t *testing.T) {
	p := newProviders(t)
	obs, err := NewObserver(ObserverConfig{Layout: tinyLayout(), WorkerID: 1, TracerProvider: p.Tracer, MeterProvider: p.Meter})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	first, err := uidcore.NewCached(uidcore.CachedOptions{Layout: tinyLayout(), Claim: uidcore.StaticClaim{ID: 1}, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	obs.Watch(first)
	obs.SetWorkerID(2)
	second, err := uidcore.NewCached(uidcore.CachedOptions{Layout: tinyLayout(), Claim: uidcore.StaticClaim{ID: 2}, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	obs.Watch(second)
	first.Close()
	spans := waitSpans(t, p, 2)
	if w0, w1 := telemetrytest.Attr(spans[0].Attributes(), WorkerIDKey).AsInt64(), telemetrytest.Attr(spans[1].Attributes(), WorkerIDKey).AsInt64(); w0 != 1 || w1 != 2 {
		t.Errorf("start-up padding spans carry workers %d and %d, want 1 and 2", w0, w1)
	}
	rm := p.Collect(t)
	if _, found := telemetrytest.MetricSum(rm, "uid.ring.available", WorkerIDKey.Int(2)); !found {
		t.Error("gauges do not carry the new worker ID")
	}
	if _, found := telemetrytest.MetricSum(rm, "uid.ring.available", WorkerIDKey.Int(1)); found {
		t.Error("gauges still report the old worker ID")
	}
}

// Lane changes are logged with their events (lane.claimed, lane.returned,
// the soak's contract); a lane given back whose release did not reach
// the store says so at warn, so that an operator does not look for the
// release in the store.
func TestLaneChangesAreLogged(t *testing.T) {
	p := newProviders(t)
	logs := &testenv.LogBuffer{}
	obs, err := NewObserver(ObserverConfig{Layout: tinyLayout(), TracerProvider: p.Tracer, MeterProvider: p.Meter,
		Logger: logs.Logger(slog.LevelInfo)})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	ctx := context.Background()
	obs.LaneChanged(ctx, uidcore.LaneEvent{WorkerID: 5, Added: true, Held: 2})
	obs.LaneChanged(ctx, uidcore.LaneEvent{WorkerID: 5, Held: 1})
	obs.LaneChanged(ctx, uidcore.LaneEvent{WorkerID: 6, Held: 1, ReleaseErr: errors.New("store unreachable")})
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d log lines, want 3:\n%s", len(lines), logs)
	}
	for i, want := range []string{
		`level=INFO msg="claimed another lane: demand exceeded what the lanes held sustain" event=` + event.LaneClaimed + ` worker_id=5`,
		`level=INFO msg="gave back an idle lane" event=` + event.LaneReturned + ` worker_id=5`,
		`level=WARN msg="gave back an idle lane" event=` + event.LaneReturned + ` worker_id=6`,
	} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %s\nwant it to contain %s", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[2], `release_err="store unreachable"`) {
		t.Errorf("the failed release does not give its cause: %s", lines[2])
	}
}
