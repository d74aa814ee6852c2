package sequence_test

import (
	"testing"

	"go.uber.org/goleak"

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
