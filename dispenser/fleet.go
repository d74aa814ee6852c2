package dispenser

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// fleet is the fleet record this instance's configuration makes.
func (c Config) fleet() workerid.Fleet {
	return workerid.Fleet{Generation: 1, Layout: c.Layout().String(), WorkerMode: c.WorkerMode, SubjectPrefix: c.SubjectPrefix, Regions: c.Regions.String()}
}

// checkFleet compares the store's fleet record with the configuration
// and names, in a *ConfigError, the variables that differ with both
// values. Instances of one store with another layout, mode, prefix or
// map of regions would hand out the same ID twice.
func (c Config) checkFleet(stored workerid.Fleet) error {
	return c.compareFleet(stored, "the worker-ID store", false)
}

// compareFleet is checkFleet against the record of the store where
// (for messages); with otherRegion, maps of regions that extend one
// another agree (a region added later has the longer map for a while).
func (c Config) compareFleet(stored workerid.Fleet, where string, otherRegion bool) error {
	mine := c.fleet()
	var vars, diffs []string
	if stored.Layout != mine.Layout {
		if c.LayoutName != "" {
			vars = append(vars, EnvPrefix+"_LAYOUT")
		} else {
			vars = append(vars, differingLayoutVars(stored.Layout, c.Layout())...)
		}
		diffs = append(diffs, fmt.Sprintf("layout %s, the fleet's is %s", mine.Layout, stored.Layout))
	}
	if stored.WorkerMode != mine.WorkerMode {
		vars = append(vars, EnvPrefix+"_WORKER_MODE")
		diffs = append(diffs, fmt.Sprintf("worker mode %s, the fleet's is %s", mine.WorkerMode, stored.WorkerMode))
	}
	if stored.SubjectPrefix != mine.SubjectPrefix {
		vars = append(vars, EnvPrefix+"_SUBJECT_PREFIX")
		diffs = append(diffs, fmt.Sprintf("subject prefix %s, the fleet's is %s", mine.SubjectPrefix, stored.SubjectPrefix))
	}
	if stored.Regions != mine.Regions && !(otherRegion && c.regionsExtendOneAnother(stored.Regions)) {
		vars = append(vars, EnvPrefix+"_REGIONS")
		diffs = append(diffs, fmt.Sprintf("regions %s, the fleet's are %s (a map may only add regions to the fleet's)", describeRegions(mine.Regions), describeRegions(stored.Regions)))
	}
	if len(vars) == 0 {
		return nil
	}
	return &ConfigError{Var: strings.Join(vars, ", "), Reason: fmt.Sprintf(
		"this instance has %s (generation %d recorded in %s): instances sharing a store must agree, or they could issue the same ID twice; to change the fleet, stop it and run dispenser -new-generation (docs/operations.md)",
		strings.Join(diffs, "; "), stored.Generation, where)}
}

// differingLayoutVars names the variables of the layout fields that
// differ.
func differingLayoutVars(stored string, mine uidcore.Layout) []string {
	old, err := uidcore.ParseLayout(stored)
	if err != nil {
		return []string{EnvPrefix + "_TIME_BITS/WORKER_BITS/SEQ_BITS/EPOCH"}
	}
	var vars []string
	for _, f := range []struct {
		name string
		diff bool
	}{
		{"TIME_BITS", old.TimeBits != mine.TimeBits},
		{"WORKER_BITS", old.WorkerBits != mine.WorkerBits},
		{"SEQ_BITS", old.SeqBits != mine.SeqBits},
		{"EPOCH", !old.Epoch.Equal(mine.Epoch)},
	} {
		if f.diff {
			vars = append(vars, EnvPrefix+"_"+f.name)
		}
	}
	return vars
}

// joinFleet records the fleet when the store has none yet, refuses a
// configuration that differs from the store's, and waits for the start
// of a generation recorded moments ago.
func (d *Dispenser) joinFleet(ctx context.Context) error {
	// A start whose claim is bound to be refused must not record the
	// fleet either: its layout would then bind every later start.
	if rc, ok := d.assigner.(workerid.RangeChecker); ok {
		if err := rc.CheckRange(ctx, d.cfg.Layout()); err != nil {
			return fmt.Errorf("dispenser: claim a worker ID: %w", err)
		}
	}
	fs, ok := d.assigner.(workerid.FleetStore)
	if !ok {
		return nil
	}
	// Before this region's record is written: a configuration another
	// region refuses must not become this region's record.
	if err := d.checkOtherRegions(ctx, fs); err != nil {
		return err
	}
	stored, err := fs.RecordFleet(ctx, d.cfg.fleet())
	if err != nil {
		return fmt.Errorf("dispenser: the fleet record: %w", err)
	}
	if err := workerid.CheckJoin(stored); err != nil {
		return fmt.Errorf("dispenser: %w", err)
	}
	if stored, err = d.extendRegions(ctx, fs, stored); err != nil {
		return err
	}
	if err := d.cfg.checkFleet(stored); err != nil {
		return err
	}
	d.joined = stored
	if err := workerid.WaitForStart(ctx, stored, d.log); err != nil {
		return fmt.Errorf("dispenser: %w", err)
	}
	return nil
}

// checkGeneration re-reads the fleet record after a worker ID was
// claimed, before the claim serves (workerid.CheckGeneration).
func (d *Dispenser) checkGeneration(ctx context.Context) error {
	fs, ok := d.assigner.(workerid.FleetStore)
	if !ok {
		return nil
	}
	if err := workerid.CheckGeneration(ctx, fs, d.joined); err != nil {
		return fmt.Errorf("dispenser: %w", err)
	}
	return nil
}

// lanes is the assigner the generators claim their extra lanes from:
// the worker-ID store, with the generation checked after every claim as
// after the instance's own, so that an old instance paused past a new
// generation cannot claim a fresh lane (reserved past the new
// generation's start) and pad old-layout IDs on it.
func (d *Dispenser) lanes() uidcore.Assigner { return generationChecked{d} }

// generationChecked is an assigner whose claims are given up when the
// fleet's generation changed (workerid.CheckGeneration).
type generationChecked struct{ d *Dispenser }

func (g generationChecked) Claim(ctx context.Context, layout uidcore.Layout) (uidcore.Claim, error) {
	c, err := g.d.assigner.Claim(ctx, layout)
	if err != nil {
		return nil, err
	}
	if err := g.d.checkGeneration(ctx); err != nil {
		releaseQuietly(c, g.d.log)
		return nil, err
	}
	return c, nil
}

// NewGeneration moves the fleet of the configured store to the
// configuration's layout, worker mode and subject prefix: the safe way
// to change them. Every instance of the old generation must have stopped
// (no lease live): it refuses otherwise. It seals the record and revokes
// every lease, expired or not, so that an old instance paused or cut off
// past its TTL cannot renew when it comes back. The new generation starts after the last second whose
// IDs the old one could have issued (its highest reserved second, or for
// disposable worker IDs, which reserve nothing, now plus
// DISPENSER_MAX_AHEAD), converted so that every new ID is larger than
// every old one; its instances wait for that second. A store without a
// record gets the configuration as its first generation.
func NewGeneration(ctx context.Context, cfg Config, log *slog.Logger) (workerid.Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return workerid.Fleet{}, err
	}
	d := &Dispenser{cfg: cfg, log: log}
	url, closeNATS, err := d.connectNATS(ctx)
	if err != nil {
		return workerid.Fleet{}, err
	}
	defer closeNATS()
	closeAssigner, err := d.openAssigner(ctx, url)
	if err != nil {
		return workerid.Fleet{}, err
	}
	defer closeAssigner()
	fs, ok := d.assigner.(workerid.FleetStore)
	if !ok {
		return workerid.Fleet{}, errors.New("dispenser: the worker-ID store keeps no fleet record")
	}
	return workerid.ChangeGeneration(ctx, fs, workerid.GenerationChange{
		Fleet:   cfg.fleet(),
		Differs: cfg.checkFleet,
		// No margin on the leases' horizon: a lease issues only seconds of
		// a reservation the store can no longer forget (workerid.Lease.Until).
		Plan: func(old workerid.Fleet, lastReserved int64) (workerid.Fleet, error) {
			return planGeneration(old, cfg, lastReserved, time.Now())
		},
		Logger: log,
	})
}

// planGeneration is the record that lets cfg's fleet follow old, whose
// leases reserved up to last.
func planGeneration(old workerid.Fleet, cfg Config, last int64, now time.Time) (workerid.Fleet, error) {
	mine := cfg.fleet()
	if old.WorkerMode == workerid.ModeDisposable {
		if cfg.MaxAhead < 0 {
			return workerid.Fleet{}, &ConfigError{Var: EnvPrefix + "_MAX_AHEAD", Reason: "a disposable fleet reserves no seconds, so a new generation must start after the farthest its instances may run ahead: set the bound they ran with"}
		}
		last = max(last, now.Add(cfg.MaxAhead).Unix())
	}
	next, err := workerid.NextGeneration(old, mine, max(last, old.StartsAfter))
	if err != nil {
		return workerid.Fleet{}, err
	}
	if start := time.Unix(next.StartsAfter+1, 0); start.Sub(now) > workerid.MaxGenerationWait {
		return workerid.Fleet{}, &ConfigError{Var: EnvPrefix + "_TIME_BITS/WORKER_BITS/SEQ_BITS/EPOCH", Reason: fmt.Sprintf(
			"the layout %s exceeds every ID of generation %d (%s) only from %s, more than %s from now: choose an earlier epoch or more time bits",
			mine.Layout, old.Generation, old.Layout, start.UTC().Format(time.RFC3339), workerid.MaxGenerationWait)}
	}
	return next, nil
}

// ResetFleet removes the configured store's fleet record when it was
// written by a start that should never have written it, so that the
// next start records its own configuration (workerid.ResetFleet: it
// refuses while a lease is live, when leases reserved seconds, and for a
// generation recorded by -new-generation). found is false when the
// store held no record.
func ResetFleet(ctx context.Context, cfg Config, log *slog.Logger) (removed workerid.Fleet, found bool, err error) {
	if err := cfg.Validate(); err != nil {
		return workerid.Fleet{}, false, err
	}
	d := &Dispenser{cfg: cfg, log: log}
	url, closeNATS, err := d.connectNATS(ctx)
	if err != nil {
		return workerid.Fleet{}, false, err
	}
	defer closeNATS()
	closeAssigner, err := d.openAssigner(ctx, url)
	if err != nil {
		return workerid.Fleet{}, false, err
	}
	defer closeAssigner()
	fs, ok := d.assigner.(workerid.FleetStore)
	if !ok {
		return workerid.Fleet{}, false, errors.New("dispenser: the worker-ID store keeps no fleet record")
	}
	return workerid.ResetFleet(ctx, fs, log)
}
