package telemetry

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/telemetry/telemetrytest"
)

// TestComponentMetrics: the block and sequence instruments report what
// their sources say at each collection, per sequence name, and nothing
// once unregistered; a nil source exports nothing of its kind.
func TestComponentMetrics(t *testing.T) {
	p := newProviders(t)
	var depth atomic.Uint64
	depth.Store(5)
	var serving atomic.Bool
	serving.Store(true)
	reg, err := ObserveComponents(ComponentsConfig{
		MeterProvider: p.Meter,
		Blocks: func() BlockStats {
			return BlockStats{Depth: depth.Load(), Published: 70, Refused: 3, Pressure: 2, Failed: 1, IDsPublished: 70 * 4096, IDsDiscarded: 4096}
		},
		Sequences: func() []SequenceStats {
			return []SequenceStats{
				{Name: "orders", Left: 900, Held: 1900, Segments: 2, Waits: 1},
				{Name: "invoices", Left: 10, Held: 10, Segments: 1, Waits: 4, WaitTime: 150 * time.Millisecond},
			}
		},
		SequencesServing: serving.Load,
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, want float64, match ...string) {
		t.Helper()
		rm := p.Collect(t)
		var got float64
		var found bool
		if len(match) == 0 {
			got, found = telemetrytest.MetricSum(rm, name)
		} else {
			got, found = telemetrytest.MetricSum(rm, name, SequenceKey.String(match[0]))
		}
		if !found || got != want {
			t.Errorf("%s %v = %v (found %v), want %v", name, match, got, found, want)
		}
	}
	check("uid.blocks.depth", 5)
	depth.Store(0)
	check("uid.blocks.depth", 0)
	check("uid.blocks.published", 70)
	check("uid.blocks.refused", 3)
	check("uid.blocks.pressure", 2)
	check("uid.blocks.failed", 1)
	check("uid.blocks.ids.published", 70*4096)
	check("uid.blocks.ids.discarded", 4096)
	check("uid.sequence.left", 900, "orders")
	check("uid.sequence.left", 10, "invoices")
	check("uid.sequence.held", 1900, "orders")
	check("uid.sequence.segments", 3)
	check("uid.sequence.waits", 4, "invoices")
	check("uid.sequence.wait.time", 0.15, "invoices")
	check("uid.sequence.wait.time", 0, "orders")
	check("uid.sequences.serving", 1)
	serving.Store(false)
	check("uid.sequences.serving", 0)
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	if _, found := telemetrytest.MetricSum(p.Collect(t), "uid.sequence.left"); found {
		t.Error("uid.sequence.left still reported after Unregister")
	}

	// An instance without blocks or sequences: nothing of either.
	q := newProviders(t)
	reg, err = ObserveComponents(ComponentsConfig{MeterProvider: q.Meter})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	rm := q.Collect(t)
	for _, name := range []string{"uid.blocks.depth", "uid.sequence.left", "uid.sequences.serving"} {
		if _, found := telemetrytest.MetricSum(rm, name); found {
			t.Errorf("%s reported without a source", name)
		}
	}
}

// TestStoreRegressionMetric: uid.store.regressions reports each record's
// count from its source at each collection.
func TestStoreRegressionMetric(t *testing.T) {
	p := newProviders(t)
	var leases atomic.Uint64
	reg, err := ObserveComponents(ComponentsConfig{
		MeterProvider: p.Meter,
		StoreRegressions: func() map[string]uint64 {
			return map[string]uint64{RecordLease: leases.Load(), RecordSequence: 2}
		},
		StoreEpochChanges: func() uint64 { return 4 },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	check := func(record string, want float64) {
		t.Helper()
		got, found := telemetrytest.MetricSum(p.Collect(t), "uid.store.regressions", RecordKey.String(record))
		if !found || got != want {
			t.Errorf("uid.store.regressions{record=%s} = %v (found %v), want %v", record, got, found, want)
		}
	}
	check(RecordLease, 0)
	leases.Add(3)
	check(RecordLease, 3)
	check(RecordSequence, 2)
	if got, found := telemetrytest.MetricSum(p.Collect(t), "uid.store.epoch_changes"); !found || got != 4 {
		t.Errorf("uid.store.epoch_changes = %v (found %v), want 4", got, found)
	}
}
