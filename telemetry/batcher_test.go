package telemetry

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/telemetry/telemetrytest"
)

// batchRecorder is an exporter that keeps the names of the spans of each
// export; an export waits while gate holds a value.
type batchRecorder struct {
	mu       sync.Mutex
	batches  [][]string
	shutdown bool
	gate     chan struct{} // nil: exports do not wait
}

func (r *batchRecorder) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, names)
	return nil
}

func (r *batchRecorder) Shutdown(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shutdown = true
	return nil
}

// exported is every span exported so far, in order, and the batches' sizes.
func (r *batchRecorder) exported() (names []string, sizes []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.batches {
		names = append(names, b...)
		sizes = append(sizes, len(b))
	}
	return names, sizes
}

// endSpans ends n spans named span-<from>... through tp.
func endSpans(tp *sdktrace.TracerProvider, from, n int) {
	tracer := tp.Tracer("test")
	for i := from; i < from+n; i++ {
		_, s := tracer.Start(context.Background(), "span-"+strconv.Itoa(i))
		s.End()
	}
}

func spanNames(from, n int) []string {
	var names []string
	for i := from; i < from+n; i++ {
		names = append(names, "span-"+strconv.Itoa(i))
	}
	return names
}

// TestSpanBatcherExportsFullBatchesThenTheRest: full batches go out as
// they fill, without waiting for the schedule delay (an hour here); the
// rest waits for a flush; every span is exported once, in order.
func TestSpanBatcherExportsFullBatchesThenTheRest(t *testing.T) {
	exp := &batchRecorder{}
	b := newSpanBatcher(exp, batcherConfig{MaxQueueSize: 64, BatchSize: 4, ScheduleDelay: time.Hour, ExportTimeout: time.Minute})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	endSpans(tp, 0, 10)
	testwait.WaitFor(t, time.Second, "two full batches exported", func() bool {
		names, _ := exp.exported()
		return len(names) == 8
	})
	names, sizes := exp.exported()
	if !slices.Equal(sizes, []int{4, 4}) || !slices.Equal(names, spanNames(0, 8)) {
		t.Fatalf("before the flush: batches of %v, spans %v; want two of 4, span-0..span-7", sizes, names)
	}
	if err := b.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if names, sizes = exp.exported(); !slices.Equal(sizes, []int{4, 4, 2}) || !slices.Equal(names, spanNames(0, 10)) {
		t.Fatalf("after the flush: batches of %v, spans %v; want 4, 4, 2 and span-0..span-9", sizes, names)
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !exp.shutdown {
		t.Error("the exporter was not shut down")
	}
}

// TestSpanBatcherExportsAfterTheScheduleDelay: a batch that never fills
// is exported when the schedule delay is up, and again for later spans.
func TestSpanBatcherExportsAfterTheScheduleDelay(t *testing.T) {
	exp := &batchRecorder{}
	b := newSpanBatcher(exp, batcherConfig{MaxQueueSize: 64, BatchSize: 32, ScheduleDelay: 10 * time.Millisecond, ExportTimeout: time.Minute})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	endSpans(tp, 0, 3)
	testwait.WaitFor(t, time.Second, "3 spans exported without a flush", func() bool {
		names, _ := exp.exported()
		return len(names) == 3
	})
	endSpans(tp, 3, 2)
	testwait.WaitFor(t, time.Second, "2 more spans exported without a flush", func() bool {
		names, _ := exp.exported()
		return len(names) == 5
	})
	if names, _ := exp.exported(); !slices.Equal(names, spanNames(0, 5)) {
		t.Errorf("exported %v, want span-0..span-4", names)
	}
}

// TestSpanBatcherDropsWhenTheQueueIsFull: while the exporter is stuck,
// the queue takes MaxQueueSize spans and drops the rest; Shutdown
// exports what was queued, and spans ended after it are dropped.
func TestSpanBatcherDropsWhenTheQueueIsFull(t *testing.T) {
	exp := &batchRecorder{gate: make(chan struct{})}
	b := newSpanBatcher(exp, batcherConfig{MaxQueueSize: 8, BatchSize: 4, ScheduleDelay: time.Hour, ExportTimeout: time.Minute})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	endSpans(tp, 0, 4) // a full batch: the export starts and waits at the gate
	testwait.WaitFor(t, time.Second, "the first batch taken for export", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == 0
	})
	endSpans(tp, 4, 12) // 8 queued, 4 dropped
	if got := b.Dropped(); got != 4 {
		t.Fatalf("%d spans dropped, want 4", got)
	}
	close(exp.gate)
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	endSpans(tp, 100, 1)
	if names, _ := exp.exported(); !slices.Equal(names, spanNames(0, 12)) {
		t.Errorf("exported %v, want span-0..span-11 (the 4 past the queue dropped, nothing after Shutdown)", names)
	}
}

// TestSpanBatcherSkipsSpansNotSampled: spans recorded but not sampled
// are not exported, as with the SDK's processor.
func TestSpanBatcherSkipsSpansNotSampled(t *testing.T) {
	exp := &batchRecorder{}
	b := newSpanBatcher(exp, batcherConfig{MaxQueueSize: 8, BatchSize: 4, ScheduleDelay: time.Hour, ExportTimeout: time.Minute})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b), sdktrace.WithSampler(recordOnly{}))
	endSpans(tp, 0, 3)
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if names, _ := exp.exported(); len(names) != 0 {
		t.Errorf("exported %v, want nothing", names)
	}
}

type recordOnly struct{}

func (recordOnly) ShouldSample(sdktrace.SamplingParameters) sdktrace.SamplingResult {
	return sdktrace.SamplingResult{Decision: sdktrace.RecordOnly}
}
func (recordOnly) Description() string { return "RecordOnly" }

// TestSpanBatcherExportTimeout: an export that does not end is cut at the
// export timeout, and the error reaches the flush.
func TestSpanBatcherExportTimeout(t *testing.T) {
	exp := &batchRecorder{gate: make(chan struct{})}
	b := newSpanBatcher(exp, batcherConfig{MaxQueueSize: 8, BatchSize: 4, ScheduleDelay: time.Hour, ExportTimeout: time.Millisecond})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	endSpans(tp, 0, 1)
	if err := b.ForceFlush(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("flush through a stuck exporter: %v, want the export timeout", err)
	}
	close(exp.gate)
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestBatcherConfigFromEnv(t *testing.T) {
	telemetrytest.ClearEnv(t)
	got, err := batcherConfigFromEnv()
	if err != nil || got != defaultBatcherConfig() {
		t.Fatalf("unset: %+v, %v; want the defaults %+v", got, err, defaultBatcherConfig())
	}
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "200")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "250")
	t.Setenv("OTEL_BSP_EXPORT_TIMEOUT", "1000")
	want := batcherConfig{MaxQueueSize: 100, BatchSize: 100, ScheduleDelay: 250 * time.Millisecond, ExportTimeout: time.Second}
	if got, err := batcherConfigFromEnv(); err != nil || got != want {
		t.Errorf("set: %+v, %v; want %+v (the batch no larger than the queue)", got, err, want)
	}
	for _, bad := range []string{"0", "-5", "5s", "many"} {
		t.Setenv("OTEL_BSP_SCHEDULE_DELAY", bad)
		if _, err := batcherConfigFromEnv(); err == nil {
			t.Errorf("OTEL_BSP_SCHEDULE_DELAY=%q accepted", bad)
		}
	}
}
