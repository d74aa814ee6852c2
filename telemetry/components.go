package telemetry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/uid-dispenser/uid-dispenser/telemetry/uidattr"
)

// SequenceKey labels the sequence metrics with the sequence's name.
const SequenceKey = uidattr.Sequence

// RecordKey labels uid.store.regressions with the kind of record the
// store forgot writes of.
const RecordKey = attribute.Key("record")

// The records of uid.store.regressions.
const (
	RecordLease    = "lease"
	RecordSequence = "sequence"
	// RecordStream: the KV bucket's stream, its last sequence found below
	// one it had acknowledged (whichever records the lost writes were).
	RecordStream = "stream"
)

// BlockStats is what a block publisher reports for its metrics (the
// dispenser copies natsio.BlockPublisherStats into it: telemetry does not
// depend on natsio).
type BlockStats struct {
	Depth     uint64 // blocks in the stream at the publisher's last check
	Published uint64 // blocks stored
	Refused   uint64 // blocks the full stream refused (the normal stop signal)
	Pressure  uint64 // blocks refused because JetStream had no room
	Failed    uint64 // blocks given up after errors
	// IDsPublished and IDsDiscarded are the IDs of the blocks stored, and
	// of the blocks given up (failed, or refused and held too long).
	IDsPublished, IDsDiscarded uint64
}

// SequenceStats is one named sequence's state for its metrics (the
// dispenser copies sequence.Stats into it).
type SequenceStats struct {
	Name     string
	Left     uint64        // numbers left in the current segment
	Held     uint64        // numbers left in every segment held
	Segments uint64        // segments taken from the store
	Waits    uint64        // requests that waited for a segment from the store
	WaitTime time.Duration // how long those requests waited, in all
}

// ComponentsConfig says what ObserveComponents reads; a nil source exports
// nothing of its kind (an instance without blocks or sequences).
type ComponentsConfig struct {
	Blocks    func() BlockStats
	Sequences func() []SequenceStats
	// SequencesServing says whether the sequences' next and batch are in
	// the queue group (false while their store is out of reach):
	// uid_sequences_serving.
	SequencesServing func() bool
	// StoreRegressions counts, by record (RecordLease, RecordSequence),
	// the times a store was found to have forgotten writes it had
	// acknowledged: uid_store_regressions_total{record}.
	StoreRegressions func() map[string]uint64
	// StoreEpochChanges counts the times the store may have forgotten
	// acknowledged writes without a request failing (a new KV stream
	// leader, a reconnect): uid_store_epoch_changes_total.
	StoreEpochChanges func() uint64
	// MeterProvider defaults to the global one.
	MeterProvider metric.MeterProvider
}

// ObserveComponents registers the gauges and counters of the block
// publisher and the named sequences over cfg's sources, read at each
// collection. Unregister the returned registration when the sources go.
func ObserveComponents(cfg ComponentsConfig) (metric.Registration, error) {
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = otel.GetMeterProvider()
	}
	m := cfg.MeterProvider.Meter(instrumentationName)
	var errs []error
	gauge := func(name, unit, description string) metric.Int64ObservableGauge {
		g, err := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(description))
		errs = append(errs, err)
		return g
	}
	counter := func(name, unit, description string) metric.Int64ObservableCounter {
		c, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(description))
		errs = append(errs, err)
		return c
	}
	var observables []metric.Observable
	var callbacks []func(metric.Observer)
	if cfg.Blocks != nil {
		depth := gauge("uid.blocks.depth", "{block}", "Blocks in the stream at the publisher's last check (it tops the stream up to its target depth).")
		published := counter("uid.blocks.published", "{block}", "Blocks stored in the stream.")
		refused := counter("uid.blocks.refused", "{block}", "Publishes the full stream refused: the normal signal that the stream is at its depth; the block is held and published again once there is room.")
		pressure := counter("uid.blocks.pressure", "{block}", "Blocks refused because JetStream had no room (the stream's MaxBytes, the server's store, the account's limits); the publisher backs off.")
		failed := counter("uid.blocks.failed", "{block}", "Blocks given up after errors.")
		idsPublished := counter("uid.blocks.ids.published", "{id}", "IDs in the blocks stored in the stream.")
		idsDiscarded := counter("uid.blocks.ids.discarded", "{id}", "IDs taken for blocks and never stored: blocks given up after errors, or refused and held past 2 s.")
		observables = append(observables, depth, published, refused, pressure, failed, idsPublished, idsDiscarded)
		callbacks = append(callbacks, func(obs metric.Observer) {
			s := cfg.Blocks()
			obs.ObserveInt64(depth, int64(s.Depth))
			obs.ObserveInt64(published, int64(s.Published))
			obs.ObserveInt64(refused, int64(s.Refused))
			obs.ObserveInt64(pressure, int64(s.Pressure))
			obs.ObserveInt64(failed, int64(s.Failed))
			obs.ObserveInt64(idsPublished, int64(s.IDsPublished))
			obs.ObserveInt64(idsDiscarded, int64(s.IDsDiscarded))
		})
	}
	if cfg.Sequences != nil {
		left := gauge("uid.sequence.left", "{number}", "Numbers left in the sequence's current segment.")
		held := gauge("uid.sequence.held", "{number}", "Numbers left in every segment of the sequence held (the current one and one taken ahead).")
		segments := counter("uid.sequence.segments", "{segment}", "Segments of the sequence taken from the store (its writes).")
		waits := counter("uid.sequence.waits", "{request}", "Requests of the sequence that found too few numbers at hand and waited for a segment from the store.")
		waitTime, err := m.Float64ObservableCounter("uid.sequence.wait.time", metric.WithUnit("s"),
			metric.WithDescription("Time the requests of the sequence spent waiting for a segment from the store, in all (over uid.sequence.waits: the mean wait)."))
		errs = append(errs, err)
		observables = append(observables, left, held, segments, waits, waitTime)
		callbacks = append(callbacks, func(obs metric.Observer) {
			for _, s := range cfg.Sequences() {
				attrs := metric.WithAttributeSet(attribute.NewSet(SequenceKey.String(s.Name)))
				obs.ObserveInt64(left, int64(s.Left), attrs)
				obs.ObserveInt64(held, int64(s.Held), attrs)
				obs.ObserveInt64(segments, int64(s.Segments), attrs)
				obs.ObserveInt64(waits, int64(s.Waits), attrs)
				obs.ObserveFloat64(waitTime, s.WaitTime.Seconds(), attrs)
			}
		})
	}
	if cfg.SequencesServing != nil {
		serving := gauge("uid.sequences.serving", "{state}", "1 while the instance's sequence endpoints (next, batch) are in the queue group, 0 while they are out because the sequence store is out of reach (event sequence.not_serving); /readyz stays ready, IDs are served.")
		observables = append(observables, serving)
		callbacks = append(callbacks, func(obs metric.Observer) {
			var v int64
			if cfg.SequencesServing() {
				v = 1
			}
			obs.ObserveInt64(serving, v)
		})
	}
	if cfg.StoreRegressions != nil {
		regressions := counter("uid.store.regressions", "{regression}", "Times a store was found to have forgotten writes it had acknowledged (a power loss under lazy fsync, a lossy failover), by record: lease (the owner stopped issuing under the worker ID and claimed another) or sequence (the counter was raised back past the numbers handed out). Any is an incident: see the runbook.")
		observables = append(observables, regressions)
		callbacks = append(callbacks, func(obs metric.Observer) {
			for record, n := range cfg.StoreRegressions() {
				obs.ObserveInt64(regressions, int64(n), metric.WithAttributeSet(attribute.NewSet(RecordKey.String(record))))
			}
		})
	}
	if cfg.StoreEpochChanges != nil {
		changes := counter("uid.store.epoch_changes", "{change}", "Times the store may have forgotten acknowledged writes without a request failing (its KV stream elected a leader, its last sequence went back, the connection was re-established): the sequences settled and the leases renewed at once. Expected at rolling restarts; with uid_store_regressions_total it marks a loss.")
		observables = append(observables, changes)
		callbacks = append(callbacks, func(obs metric.Observer) { obs.ObserveInt64(changes, int64(cfg.StoreEpochChanges())) })
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("telemetry: component instruments: %w", err)
	}
	if len(observables) == 0 {
		return noRegistration{}, nil
	}
	reg, err := m.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		for _, cb := range callbacks {
			cb(obs)
		}
		return nil
	}, observables...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: component metrics: %w", err)
	}
	return reg, nil
}

// ObserveComponents is [ObserveComponents] with this set-up's meter
// provider as the default.
func (t *Telemetry) ObserveComponents(cfg ComponentsConfig) (metric.Registration, error) {
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = t.meterProvider
	}
	return ObserveComponents(cfg)
}

// noRegistration is the registration of nothing.
type noRegistration struct{ metric.Registration }

func (noRegistration) Unregister() error { return nil }
