package uidclient

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
)

// The take path alone, at its edges: a producer appends small runs
// (1..32 IDs, with gaps between them) only as the chain runs low, while
// takers mix single takes and NextN of several sizes, so takes race on
// every add, every move to the next run and every wait for the producer.
// Every ID pushed is taken exactly once.
func TestRangeChainTakesEveryIDOnce(t *testing.T) {
	var c rangeChain
	c.init(make(chan struct{}, 1))
	const takers, each = 8, 20_000
	total := uint64(takers * each)
	pushed := make(map[uint64]bool, total)
	done := make(chan struct{})
	go func() { // the producer
		defer close(done)
		next, left := uint64(1000), total
		rng := rand.New(rand.NewPCG(1, 2))
		for left > 0 {
			if c.available() >= 64 {
				<-c.wake
				continue
			}
			var runs []Run
			for range 1 + rng.IntN(3) {
				n := min(1+rng.Uint64N(32), left)
				if n == 0 {
					break
				}
				runs = append(runs, Run{First: next, Count: n})
				for id := next; id < next+n; id++ {
					pushed[id] = true
				}
				next += n + rng.Uint64N(3) // gaps: runs need not touch
				left -= n
			}
			c.push(runs, 16, nil, false)
		}
	}()
	results := make([][]uint64, takers)
	var wg sync.WaitGroup
	for g := range takers {
		wg.Go(func() {
			ids := make([]uint64, 0, each)
			buf := make([]uint64, 1+g%5)
			for len(ids) < each {
				if g%2 == 0 {
					if id, ok := c.take(); ok {
						ids = append(ids, id)
						continue
					}
					id, err := c.next(context.Background())
					if err != nil {
						t.Error(err)
						return
					}
					ids = append(ids, id)
					continue
				}
				n, err := c.nextN(context.Background(), buf[:min(len(buf), each-len(ids))])
				if err != nil {
					t.Error(err)
					return
				}
				ids = append(ids, buf[:n]...)
			}
			results[g] = ids
		})
	}
	wg.Wait()
	<-done
	var all []uint64
	for _, r := range results {
		all = append(all, r...)
	}
	if uint64(len(all)) != total {
		t.Fatalf("%d IDs taken, %d pushed", len(all), total)
	}
	for _, id := range all {
		if !pushed[id] {
			t.Fatalf("ID %d taken but never pushed", id)
		}
	}
	testenv.CheckDistinct(t, all)
	if c.available() != 0 {
		t.Fatalf("%d IDs left after all were taken", c.available())
	}
}

// Close wakes a taker waiting on an empty chain, and every take after it
// fails with errChainClosed, even with IDs left; a push after it is
// refused.
func TestRangeChainCloseWakesWaitingTakers(t *testing.T) {
	var c rangeChain
	c.init(make(chan struct{}, 1))
	waiting := make(chan error)
	go func() {
		_, err := c.next(context.Background())
		waiting <- err
	}()
	<-c.wake // the taker found the chain empty
	c.close()
	if err := <-waiting; !errors.Is(err, errChainClosed) {
		t.Fatalf("waiting take after close: %v", err)
	}
	if c.push([]Run{{First: 1, Count: 10}}, 0, nil, false) {
		t.Fatal("push after close accepted")
	}
	if _, ok := c.take(); ok {
		t.Fatal("take after close succeeded")
	}
	if _, err := c.next(context.Background()); !errors.Is(err, errChainClosed) {
		t.Fatalf("take after close: %v", err)
	}
	if c.close() {
		t.Fatal("second close reported closing")
	}
}
