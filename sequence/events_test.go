package sequence_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/sequence/sequencetest"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
)

// debugLogged is a memory store where "orders" is declared and the
// suite's allocator configuration, logging at debug level into logs.
func debugLogged(t *testing.T, logs *testenv.LogBuffer) (*sequencetest.MemStore, sequence.Config) {
	t.Helper()
	store := sequencetest.NewMemStore()
	if _, err := store.Declare(context.Background(), "orders", 1); err != nil {
		t.Fatal(err)
	}
	cfg := sequencetest.Config()
	cfg.Logger = logs.JSONLogger(slog.LevelDebug)
	return store, cfg
}

// Each segment the allocator takes is logged at debug level as a
// sequence.segment event with the name and its first and last numbers,
// the fault harness's record of who was given which numbers: the
// segments logged cover every number handed out, without overlap.
func TestSegmentsInTheLog(t *testing.T) {
	var logs testenv.LogBuffer
	store, cfg := debugLogged(t, &logs)
	a := sequencetest.NewAllocator(t, store, cfg)
	handed := sequencetest.NextN(context.Background(), t, a, "orders", int(3*cfg.MaxStep))
	a.Abandon() // no fetch still running: the log is complete
	type span struct{ first, last uint64 }
	var spans []span
	for _, rec := range logs.Records(t) {
		if rec[event.Key] != event.SequenceSegment {
			continue
		}
		if rec[event.AttrName] != "orders" || rec["level"] != "DEBUG" {
			t.Fatalf("a segment logged as %v", rec)
		}
		spans = append(spans, span{uint64(rec[event.AttrFirst].(float64)), uint64(rec[event.AttrLast].(float64))})
	}
	if len(spans) < 2 {
		t.Fatalf("%d segments logged for %d numbers of steps up to %d", len(spans), len(handed), cfg.MaxStep)
	}
	for i, s := range spans {
		for _, o := range spans[i+1:] {
			if s.first <= o.last && o.first <= s.last {
				t.Fatalf("segments %v and %v overlap", s, o)
			}
		}
	}
	for _, n := range handed {
		in := false
		for _, s := range spans {
			in = in || (s.first <= n && n <= s.last)
		}
		if !in {
			t.Fatalf("number %d was handed out outside every segment logged %v", n, spans)
		}
	}
}

// A closing instance gives the unused rest of its segments back, and the
// next segment, another instance's, starts where that rest did: the two
// logged segments overlap. Each rest is logged as a sequence.given_back
// event with its first and last numbers, so that a reader of the logs
// (the fault harness's checker) tells numbers given back and taken again
// from numbers handed out twice: a CI fault run took them for a segment
// overlap.
func TestGivenBackInTheLog(t *testing.T) {
	ctx := context.Background()
	var logs testenv.LogBuffer
	store, cfg := debugLogged(t, &logs)
	a := sequencetest.NewAllocator(t, store, cfg)
	handed := sequencetest.NextN(ctx, t, a, "orders", 3)
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	type span struct{ first, last uint64 }
	var segs, back []span
	for _, rec := range logs.Records(t) {
		switch rec[event.Key] {
		case event.SequenceSegment:
			segs = append(segs, span{uint64(rec[event.AttrFirst].(float64)), uint64(rec[event.AttrLast].(float64))})
		case event.SequenceGivenBack:
			if rec[event.AttrName] != "orders" {
				t.Fatalf("a rest given back logged as %v", rec)
			}
			back = append(back, span{uint64(rec[event.AttrFirst].(float64)), uint64(rec[event.AttrLast].(float64))})
		}
	}
	if len(back) == 0 {
		t.Fatalf("no %s logged (segments %v, handed out %v)", event.SequenceGivenBack, segs, handed)
	}
	lowest := back[0].first
	for _, g := range back {
		lowest = min(lowest, g.first)
		tail := false
		for _, s := range segs {
			tail = tail || s.last == g.last && s.first <= g.first
		}
		if !tail {
			t.Errorf("given back %v is no logged segment's rest (segments %v)", g, segs)
		}
		for _, n := range handed {
			if g.first <= n && n <= g.last {
				t.Errorf("number %d was handed out and given back in %v", n, g)
			}
		}
	}
	b := sequencetest.NewAllocator(t, store, sequencetest.Config())
	n, err := b.Next(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if n != lowest {
		t.Errorf("the next instance's first number is %d, not the lowest given back, %d (given back %v)", n, lowest, back)
	}
}
