package sequence_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/sequence/sequencetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestMemStore runs the conformance suite on the reference store: the
// allocator's own tests.
func TestMemStore(t *testing.T) {
	sequencetest.Run(t, func(t *testing.T) sequencetest.Store {
		m := sequencetest.NewMemStore()
		return sequencetest.Store{New: func(testing.TB, string) sequence.SegmentStore { return m }}
	})
}

// TestStepHalvesWhenSegmentsLastLong: once a segment lasts more than
// twice the target, the next step halves (Leaf's rule), not below the
// min step; the doubling side is the suite's StepDoublesUpToTheLimit.
func TestStepHalvesWhenSegmentsLastLong(t *testing.T) {
	t.Parallel()
	store := sequencetest.NewMemStore()
	if _, err := store.Declare(context.Background(), "slow", 0); err != nil {
		t.Fatal(err)
	}
	cfg := sequencetest.Config()
	cfg.Target = time.Second
	a := sequencetest.NewAllocator(t, store, cfg)
	stats := func() sequence.Stats { return a.Stats()[0] }
	next := func() {
		t.Helper()
		if _, err := a.Next(context.Background(), "slow"); err != nil {
			t.Fatal(err)
		}
	}
	for next(); stats().Step < cfg.MaxStep; next() {
	}
	idle := time.Now()
	testenv.WaitFor(t, 5*time.Second, "two targets passed", func() bool { return time.Since(idle) > 2*cfg.Target })
	for taken := stats().Segments; stats().Segments == taken; next() {
	}
	if got := stats().Step; got != cfg.MaxStep/2 {
		t.Fatalf("step %d after a segment lasting more than twice the target, want %d", got, cfg.MaxStep/2)
	}
}
