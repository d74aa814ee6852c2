package workerid_test

import (
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// Whatever the two layouts, the smallest ID of the new generation (worker
// 0, sequence 0, in the first second after StartsAfter) is larger than
// the largest the old one could issue up to its last second (the largest
// worker and sequence), and one second earlier it would not be: the
// start is as early as it can safely be.
func TestNextGenerationStartsAboveEveryOldID(t *testing.T) {
	last := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).Unix()
	layouts := []string{"31/16/16@2026-01-01T00:00:00Z", "31/14/18@2026-01-01T00:00:00Z", "32/15/16@2026-01-01T00:00:00Z",
		"30/17/16@2026-01-01T00:00:00Z", "31/16/16@2025-01-01T00:00:00Z", "41/10/12@2026-11-01T00:00:00Z", "28/22/13@2016-05-20T00:00:00+08:00"}
	for _, from := range layouts {
		for _, to := range layouts {
			old, _ := uidcore.ParseLayout(from)
			nl, _ := uidcore.ParseLayout(to)
			cur := workerid.Fleet{Generation: 3, Layout: old.String(), WorkerMode: workerid.ModeLeased, SubjectPrefix: "uid"}
			next, err := workerid.NextGeneration(cur, workerid.Fleet{Layout: nl.String(), WorkerMode: workerid.ModeLeased, SubjectPrefix: "uid"}, min(last, old.LastSecond()-1))
			if err != nil {
				t.Fatalf("%s → %s: %v", from, to, err)
			}
			maxOld, err := old.Compose(min(last, old.LastSecond()-1), old.MaxWorkerID(), old.MaxSequence())
			if err != nil {
				t.Fatal(err)
			}
			minNew, err := nl.Compose(next.StartsAfter+1, 0, 0)
			if err != nil {
				t.Fatalf("%s → %s: StartsAfter %d outside the new layout: %v", from, to, next.StartsAfter, err)
			}
			if next.Generation != 4 || minNew <= maxOld {
				t.Fatalf("%s → %s: generation %d, new IDs from %d, old up to %d", from, to, next.Generation, minNew, maxOld)
			}
			if earlier, err := nl.Compose(next.StartsAfter, 0, 0); err == nil && earlier > maxOld {
				t.Errorf("%s → %s: the start second %d could be earlier", from, to, next.StartsAfter)
			}
		}
	}
	// An old generation that may have run to the end of its time field
	// holds IDs up to the largest: nothing can follow it.
	ug := uidcore.UidGeneratorLayout()
	cur := workerid.Fleet{Generation: 1, Layout: ug.String()}
	if _, err := workerid.NextGeneration(cur, workerid.Fleet{Layout: uidcore.DefaultLayout().String()}, ug.LastSecond()); err == nil {
		t.Fatal("a generation was accepted after one that used its whole time field")
	}
}
