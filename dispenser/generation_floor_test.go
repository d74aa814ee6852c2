package dispenser

import (
	"context"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// TestGeneratorFloorAtStartsAfter: an instance of a new generation waits
// for StartsAfter on its clock; when that clock is then stepped back,
// its generator must still issue no ID at or below StartsAfter (issue 31
// §3: an old generation's IDs may reach that second), whatever its
// claim's After.
func TestGeneratorFloorAtStartsAfter(t *testing.T) {
	startsAfter := time.Now().Unix()
	d := &Dispenser{cfg: DefaultConfig(), log: testLogger(),
		joined: workerid.Fleet{Generation: 2, Layout: DefaultConfig().Layout().String(), StartsAfter: startsAfter}}
	clock := uidcoretest.NewClock(time.Unix(startsAfter+1, 0)) // the generation's first second: the wait is over
	clock.Add(-time.Minute)                                    // then the clock is stepped back
	opts := d.generatorOptions(uidcore.StaticClaim{ID: 3}, nil)
	opts.Lanes, opts.MaxLanes, opts.Clock = nil, 1, clock
	gen, err := uidcore.NewCached(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Close()
	layout := gen.Layout()
	ctx := context.Background()
	check := func(id uint64) {
		t.Helper()
		p, err := layout.Parse(id)
		if err != nil {
			t.Fatal(err)
		}
		if p.Time.Unix() <= startsAfter {
			t.Fatalf("ID %d carries second %d, at or below the generation's StartsAfter %d (the clock reads %d)", id, p.Time.Unix(), startsAfter, clock.Now().Unix())
		}
	}
	// Behind StartsAfter, the ring may hold nothing; whatever it gives is above it.
	for range 1000 {
		id, err := gen.Next(ctx)
		if err != nil {
			break
		}
		check(id)
	}
	// The clock catches up: IDs come again, above StartsAfter.
	clock.Set(time.Unix(startsAfter+1, 0))
	var id uint64
	testwait.WaitFor(t, time.Second, "an ID once the clock is past StartsAfter", func() bool {
		id, err = gen.Next(ctx)
		return err == nil
	})
	check(id)
}
