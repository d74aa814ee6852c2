package sequence

import (
	"context"
	"fmt"
	"time"

	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
)

// Epoch is where a store stands as far as losses go: N grows whenever
// the store may have forgotten writes it acknowledged without any request
// of this instance failing (a JetStream cluster whose KV stream elected a
// leader while the clients stayed connected, its last sequence found
// below one it acknowledged, a connection re-established).
type Epoch struct {
	N uint64
	// Age is how long the store has been in this epoch, as the store
	// tells (the stream leader's time since its election); AgeKnown is
	// false when it does not tell.
	Age      time.Duration
	AgeKnown bool
}

// LossWatcher is a SegmentStore that can tell a loss no request saw (D7,
// docs/verification.md, segments.pml under SILENT_LOSS). The allocator
// reads the epoch when it starts, after each take and at each check: a
// segment taken while the epoch changed may be one the store forgot
// another instance holds, so none of it is handed out, and the allocator
// settles (the survivors' checks raise the counters meanwhile) before it
// takes again.
type LossWatcher interface {
	Epoch(ctx context.Context) (Epoch, error)
}

// baseline is the epoch the allocator settled on (ok: read at all).
type baseline struct {
	n  uint64
	ok bool
}

// startEpoch reads the baseline before the start's settle period begins,
// and holds the first take for the quarantine when the epoch is younger
// than it: a loss just before this start, which the survivors may not
// have repaired yet. An unread baseline is read again by Declare (the
// dispenser's start retries it while the store is unavailable); left
// unread, it makes the first take's epoch check fail, and the allocator
// settles then.
func (a *Allocator) startEpoch() {
	if a.watcher == nil {
		return
	}
	if err := a.readBaseline(a.ctx); err != nil {
		a.cfg.Logger.Warn("reading the sequence store's epoch failed: read again when the sequences are declared", "store", a.cfg.StoreName, "err", err)
	}
}

// readBaseline reads the baseline unless it is read already. One read
// after NewAllocator starts the settle period over, as if the allocator
// started then: nothing was handed out from the store before it.
func (a *Allocator) readBaseline(ctx context.Context) error {
	if a.watcher == nil {
		return nil
	}
	if a.epochSnapshot().ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.FetchTimeout)
	defer cancel()
	e, err := a.watcher.Epoch(ctx)
	if err != nil {
		return err
	}
	a.epochMu.Lock()
	defer a.epochMu.Unlock()
	if a.base.ok {
		return nil // a check settled on one meanwhile
	}
	a.hold(max(a.cfg.Settle, 0))
	a.base = baseline{n: e.N, ok: true}
	if q := a.quarantine(); e.AgeKnown && e.Age < q {
		a.hold(q - e.Age)
	}
	return nil
}

func (a *Allocator) readEpoch(ctx context.Context) (Epoch, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.FetchTimeout)
	defer cancel()
	return a.watcher.Epoch(ctx)
}

// epochSnapshot is the baseline a take starts from; read it before the
// settle wait: a change found meanwhile holds takes first, then moves
// the baseline (settleOn), so a snapshot of the new baseline always sees
// the hold.
func (a *Allocator) epochSnapshot() baseline {
	a.epochMu.Lock()
	defer a.epochMu.Unlock()
	return a.base
}

// confirmEpoch reads the epoch after a take that started from snap: the
// segment may be handed out only when the epoch is the same and no other
// take or check found a change since. Otherwise the allocator settles and
// the caller takes again above seg.
func (a *Allocator) confirmEpoch(name string, snap baseline, seg Segment) (bool, error) {
	e, err := a.readEpoch(a.ctx)
	if err != nil {
		a.noteOutage(err)
		return false, fmt.Errorf("read the store's epoch after taking %s (none of it is handed out): %w", seg, err)
	}
	a.epochMu.Lock()
	defer a.epochMu.Unlock()
	if snap.ok && a.base == snap && e.N == snap.n {
		return true, nil
	}
	a.settleOn(e)
	a.cfg.Logger.Warn("a sequence segment was taken while the store's epoch changed (it may have forgotten another instance's segment): none of it is handed out; taking again after the settle period",
		event.AttrName, name, event.AttrFirst, seg.From, event.AttrLast, seg.To-1, "store", a.cfg.StoreName)
	return false, nil
}

// checkEpoch is the check loop's epoch read (and Probe's).
func (a *Allocator) checkEpoch(ctx context.Context) error {
	e, err := a.readEpoch(ctx)
	if err != nil {
		a.noteOutage(err)
		return fmt.Errorf("read the epoch of %s: %w", a.cfg.StoreName, err)
	}
	a.epochMu.Lock()
	defer a.epochMu.Unlock()
	if !a.base.ok || a.base.n != e.N {
		a.settleOn(e)
	}
	return nil
}

// settleOn moves the baseline to e after holding takes for the
// quarantine (in that order: see epochSnapshot), unless it is there
// already. a.epochMu is held.
func (a *Allocator) settleOn(e Epoch) {
	if a.base.ok && a.base.n == e.N {
		return
	}
	a.hold(a.quarantine())
	a.epochChanges.Add(1)
	a.cfg.Logger.Warn("the sequence store may have forgotten acknowledged writes (its epoch changed): no segment is taken for the settle period, while the survivors' checks raise the counters",
		"store", a.cfg.StoreName, "epoch", e.N, "settle", a.quarantine())
	a.base = baseline{n: e.N, ok: true}
}

// EpochChanges is how many times this allocator found the store's epoch
// changed (and settled).
func (a *Allocator) EpochChanges() uint64 { return a.epochChanges.Load() }
