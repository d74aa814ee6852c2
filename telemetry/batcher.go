package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// batcherConfig is how spans are batched for the exporter: the batch span
// processor's settings, with the specification's defaults and variables.
type batcherConfig struct {
	// MaxQueueSize is how many ended spans wait for export at most;
	// spans ended while it is full are dropped (and counted).
	MaxQueueSize int
	// BatchSize is the most spans an export carries, and how many
	// waiting spans start one before the schedule delay is up.
	BatchSize int
	// ScheduleDelay is the longest a span waits for export.
	ScheduleDelay time.Duration
	// ExportTimeout bounds an export.
	ExportTimeout time.Duration
}

// defaultBatcherConfig is the specification's defaults of the batch span
// processor (OTEL_BSP_*) but the queue's: 8,192 spans, not 2,048. With
// every request recorded a dispenser ends 20,000-25,000 spans a second
// on two cores; 2,048 are 0.1 s of them, and on a loaded machine the
// export goroutine or the collector waits longer than that for a core:
// as deployed, with the load average at 12-18 on 2 cores, a queue of
// 2,048 dropped 0.1-0.9 % of the spans, the SDK's processor too. 8,192
// hold a third of a second, about 6 MB of ended spans when full.
func defaultBatcherConfig() batcherConfig {
	return batcherConfig{MaxQueueSize: 8192, BatchSize: 512, ScheduleDelay: 5 * time.Second, ExportTimeout: 30 * time.Second}
}

// batcherConfigFromEnv is defaultBatcherConfig with the OTEL_BSP_*
// variables set, in milliseconds for the durations. A value that is not a
// positive integer stops start-up with the variable named, as the
// sampler's do (the SDK would ignore it).
func batcherConfigFromEnv() (batcherConfig, error) {
	c := defaultBatcherConfig()
	for _, v := range []struct {
		name string
		set  func(int)
	}{
		{"OTEL_BSP_MAX_QUEUE_SIZE", func(n int) { c.MaxQueueSize = n }},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", func(n int) { c.BatchSize = n }},
		{"OTEL_BSP_SCHEDULE_DELAY", func(n int) { c.ScheduleDelay = time.Duration(n) * time.Millisecond }},
		{"OTEL_BSP_EXPORT_TIMEOUT", func(n int) { c.ExportTimeout = time.Duration(n) * time.Millisecond }},
	} {
		s := os.Getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("telemetry: %s: %q is not a positive integer", v.name, s)
		}
		v.set(n)
	}
	// As the SDK does: a batch is never larger than the queue.
	c.BatchSize = min(c.BatchSize, c.MaxQueueSize)
	return c, nil
}

// spanBatcher is the span processor in front of the exporter, in place of
// the SDK's batch span processor, with the same settings. The SDK's sends
// each ended span over a channel to its goroutine, which wakes for every
// span; with every request recorded, that was a goroutine switch and 0.5
// µs of CPU a request as deployed. Here an ended span is appended to a
// slice under a mutex, and the export goroutine is woken when a batch is
// full or the schedule delay is up.
type spanBatcher struct {
	exporter sdktrace.SpanExporter
	cfg      batcherConfig

	mu      sync.Mutex
	queue   []sdktrace.ReadOnlySpan
	dropped int
	stopped bool

	batchReady chan struct{} // 1-buffered: the queue holds a full batch
	stop       chan struct{} // closed by Shutdown
	loopDone   chan struct{}
	exporting  sync.Mutex // one export at a time, with its batch
	batch      []sdktrace.ReadOnlySpan
	shutdown   sync.Once
	stopErr    error
}

var _ sdktrace.SpanProcessor = (*spanBatcher)(nil)

func newSpanBatcher(exporter sdktrace.SpanExporter, cfg batcherConfig) *spanBatcher {
	b := &spanBatcher{
		exporter:   exporter,
		cfg:        cfg,
		queue:      make([]sdktrace.ReadOnlySpan, 0, cfg.MaxQueueSize),
		batch:      make([]sdktrace.ReadOnlySpan, 0, cfg.BatchSize),
		batchReady: make(chan struct{}, 1),
		stop:       make(chan struct{}),
		loopDone:   make(chan struct{}),
	}
	go b.loop()
	return b
}

// OnStart does nothing: spans are batched when they end.
func (b *spanBatcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span for export, or drops it when the queue is
// full.
func (b *spanBatcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	if len(b.queue) >= b.cfg.MaxQueueSize {
		b.dropped++
		b.mu.Unlock()
		return
	}
	b.queue = append(b.queue, s)
	full := len(b.queue) == b.cfg.BatchSize
	b.mu.Unlock()
	if full {
		select {
		case b.batchReady <- struct{}{}:
		default: // woken already
		}
	}
}

// loop exports full batches as they fill and whatever waits when the
// schedule delay is up.
func (b *spanBatcher) loop() {
	defer close(b.loopDone)
	timer := time.NewTimer(b.cfg.ScheduleDelay)
	defer timer.Stop()
	for {
		all := false
		select {
		case <-b.stop:
			return
		case <-b.batchReady:
		case <-timer.C:
			all = true
		}
		for b.exportNext(context.Background(), all) {
		}
		if all {
			timer.Reset(b.cfg.ScheduleDelay)
		}
	}
}

// exportNext exports the next batch: a full one, or with all what waits
// even if fewer. It reports whether it exported anything; an export's
// error goes to OpenTelemetry's error handler.
func (b *spanBatcher) exportNext(ctx context.Context, all bool) bool {
	exported, err := b.export(ctx, all)
	if err != nil {
		otel.Handle(err)
	}
	return exported
}

func (b *spanBatcher) export(ctx context.Context, all bool) (bool, error) {
	b.exporting.Lock()
	defer b.exporting.Unlock()
	b.mu.Lock()
	n := min(len(b.queue), b.cfg.BatchSize)
	if n == 0 || (!all && n < b.cfg.BatchSize) {
		b.mu.Unlock()
		return false, nil
	}
	b.batch = append(b.batch[:0], b.queue[:n]...)
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	b.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, b.cfg.ExportTimeout)
	defer cancel()
	err := b.exporter.ExportSpans(ctx, b.batch)
	clear(b.batch) // the spans are the exporter's no longer
	return true, err
}

// ForceFlush exports every span that waits, and returns the first error.
func (b *spanBatcher) ForceFlush(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		exported, err := b.export(ctx, true)
		if err != nil || !exported {
			return err
		}
	}
}

// Shutdown stops batching, exports what waits and shuts the exporter
// down. Spans ended since are dropped. Later calls return the first one's
// result.
func (b *spanBatcher) Shutdown(ctx context.Context) error {
	b.shutdown.Do(func() {
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
		close(b.stop)
		<-b.loopDone
		err := b.ForceFlush(ctx)
		if d := b.Dropped(); d > 0 {
			// A warning, as the SDK's processor makes it: the spans are
			// gone, the shutdown itself went well.
			otel.Handle(fmt.Errorf("telemetry: %d spans dropped, the export queue full (OTEL_BSP_MAX_QUEUE_SIZE %d)", d, b.cfg.MaxQueueSize))
		}
		b.stopErr = errors.Join(err, b.exporter.Shutdown(ctx))
	})
	return b.stopErr
}

// Dropped is how many spans were dropped because the queue was full.
func (b *spanBatcher) Dropped() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}
