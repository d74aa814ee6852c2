package dispenser

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/uid-dispenser/uid-dispenser/sequence"
)

// ParseRaise reads dispenser -raise-sequence's argument NAME=N.
func ParseRaise(s string) (name string, to uint64, err error) {
	name, value, ok := strings.Cut(s, "=")
	if !ok {
		return "", 0, fmt.Errorf("dispenser: -raise-sequence %q: want NAME=N", s)
	}
	if err := sequence.ValidName(name); err != nil {
		return "", 0, fmt.Errorf("dispenser: -raise-sequence: %w", err)
	}
	to, err = strconv.ParseUint(value, 10, 64)
	if err != nil || to > sequence.MaxValue {
		return "", 0, fmt.Errorf("dispenser: -raise-sequence %s: %q is not a number from 0 to %d", name, value, uint64(sequence.MaxValue))
	}
	return name, to, nil
}

// RaiseSequence raises the counter of the sequence name in the
// configured store to to, through the store's compare-and-set, so that
// its next number is at least to; a counter already there or beyond is
// left alone (never lowered). It is for a loss nothing detected (the
// store and every instance that saw the lost segments lost together) and
// for moving a sequence over from Leaf, tinyid or an AUTO_INCREMENT
// column. It returns the counter before and after.
func RaiseSequence(ctx context.Context, cfg Config, log *slog.Logger, name string, to uint64) (before, after uint64, err error) {
	if err := cfg.Validate(); err != nil {
		return 0, 0, err
	}
	d := &Dispenser{cfg: cfg, log: log}
	url, closeNATS, err := d.connectNATS(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer closeNATS()
	closeAssigner, err := d.openAssigner(ctx, url)
	if err != nil {
		return 0, 0, err
	}
	defer closeAssigner()
	keeper, ok := d.assigner.(sequence.Keeper)
	if !ok {
		return 0, 0, fmt.Errorf("dispenser: the worker-ID store (%T) keeps no sequences", d.assigner)
	}
	store, err := keeper.Sequences(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("dispenser: sequence store: %w", err)
	}
	seg, err := store.Take(ctx, name, 0, to)
	if err != nil {
		return 0, 0, fmt.Errorf("dispenser: raise sequence %q: %w", name, err)
	}
	if seg.Behind > 0 {
		log.Warn("sequence counter raised", "sequence", name, "from", to-seg.Behind, "to", to)
		return to - seg.Behind, seg.To, nil
	}
	log.Info("sequence counter already at or above the number asked for: left alone", "sequence", name, "counter", seg.To, "asked", to)
	return seg.To, seg.To, nil
}
