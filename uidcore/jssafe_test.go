package uidcore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
)

// exactAsDouble reports whether id survives conversion to a float64 (a
// JavaScript Number) and back.
func exactAsDouble(id uint64) bool { return uint64(float64(id)) == id && float64(id) <= MaxJSSafeID }

// The jssafe layout's largest IDs, at the very end of its runway, are
// still at most 2^53-1, and a 63-bit layout's are not.
func TestJSSafeLayoutBoundsEveryIDOfItsRunway(t *testing.T) {
	l := JSSafeLayout()
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	if l.Bits() != 53 || l.MaxID() != MaxJSSafeID || !l.JSSafe() {
		t.Fatalf("jssafe: %d bits, max ID %d, JS-safe %v", l.Bits(), l.MaxID(), l.JSSafe())
	}
	if DefaultLayout().JSSafe() || UidGeneratorLayout().JSSafe() {
		t.Error("a 63-bit layout reported JS-safe")
	}
	last, err := l.Compose(l.LastSecond(), l.MaxWorkerID(), l.MaxSequence())
	if err != nil || last != MaxJSSafeID || !exactAsDouble(last) {
		t.Fatalf("the runway's last ID %d, %v: want %d, exact as a double", last, err, uint64(MaxJSSafeID))
	}
	if _, err := l.Compose(l.LastSecond()+1, 0, 0); !errors.Is(err, ErrTimeExhausted) {
		t.Errorf("a second after the runway: %v, want ErrTimeExhausted", err)
	}
	if got := l.RunwayEnd(); got.Year() != 2094 {
		t.Errorf("runway end %v, want 2094 (68 years from 2026)", got)
	}
	if _, err := l.Parse(MaxJSSafeID + 1); err == nil {
		t.Error("Parse accepted an ID above the layout's largest")
	}
	// The first ID above 2^53 that a double cannot hold: the check itself
	// can fail.
	if exactAsDouble(1<<53 + 1) {
		t.Fatal("2^53+1 survived a float64")
	}
}

// IDs of a jssafe generator with lanes, taken concurrently in the last
// seconds of the runway (a test clock), are unique, increasing per taker
// and every one exact as a double; past the runway the generator fails
// rather than wrap.
func TestJSSafeCachedLanesAtTheRunwayEnd(t *testing.T) {
	l := JSSafeLayout()
	clock := newFakeClock(time.Unix(l.LastSecond()-1, 0))
	store := &laneStore{}
	g := newTestCached(t, CachedOptions{Layout: l, Clock: clock, RingSeconds: 2, Claim: StaticClaim{ID: 3},
		Lanes: store, MaxLanes: 8, TakeWait: 200 * time.Millisecond})
	const takers = 4
	per := make([][]uint64, takers)
	errs := make([]error, takers)
	var wg sync.WaitGroup
	for w := range takers {
		wg.Go(func() {
			dst := make([]uint64, 1+w*37)
			for {
				n, err := g.NextN(context.Background(), dst)
				per[w] = append(per[w], dst[:n]...)
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	var all []uint64
	lastSecond := 0
	for w, ids := range per {
		if !errors.Is(errs[w], ErrTimeExhausted) && !errors.Is(errs[w], ErrBufferEmpty) {
			t.Errorf("taker %d stopped with %v, want the runway's end", w, errs[w])
		}
		for i, id := range ids {
			if !exactAsDouble(id) {
				t.Fatalf("taker %d: ID %d does not survive a float64 (%.0f)", w, id, float64(id))
			}
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("taker %d: ID %d after %d", w, id, ids[i-1])
			}
			if p := uidcoretest.MustParse(t, l.Parse, id); p.Time.Unix() == l.LastSecond() {
				lastSecond++
			}
		}
		all = append(all, ids...)
	}
	assertUnique(t, all, len(all))
	if lastSecond == 0 {
		t.Fatalf("none of %d IDs is of the runway's last second", len(all))
	}
	if _, err := g.NextN(context.Background(), make([]uint64, 1)); !errors.Is(err, ErrTimeExhausted) && !errors.Is(err, ErrBufferEmpty) {
		t.Errorf("a take after the runway: %v", err)
	}
	t.Logf("%d IDs, %d of the last second, lanes %v", len(all), lastSecond, g.State().Lanes)
}
