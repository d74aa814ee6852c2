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

// maxGenerationWait bounds how far in the future a new generation may
// start: its instances wait for that second before they serve.
const maxGenerationWait = 10 * time.Minute

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
	if sealed(stored) {
		return fmt.Errorf("dispenser: the fleet record of generation %d is sealed: dispenser -new-generation is recording a new generation, or stopped midway (run it again)", stored.Generation)
	}
	if stored, err = d.extendRegions(ctx, fs, stored); err != nil {
		return err
	}
	if err := d.cfg.checkFleet(stored); err != nil {
		return err
	}
	d.joined = stored
	wait := time.Until(time.Unix(stored.StartsAfter+1, 0))
	if wait <= 0 {
		return nil
	}
	if wait > maxGenerationWait+time.Minute {
		return fmt.Errorf("dispenser: generation %d starts at %s, more than %s from now: is this machine's clock behind?",
			stored.Generation, time.Unix(stored.StartsAfter+1, 0).UTC().Format(time.RFC3339), maxGenerationWait)
	}
	d.log.Info("waiting for the start of the fleet's generation", "generation", stored.Generation,
		"starts", time.Unix(stored.StartsAfter+1, 0).UTC().Format(time.RFC3339), "in", wait.Round(time.Millisecond))
	select {
	case <-ctx.Done():
		return fmt.Errorf("dispenser: waiting for generation %d: %w", stored.Generation, ctx.Err())
	case <-time.After(wait):
		return nil
	}
}

// ErrGenerationChanged: the store's fleet record is no longer the one
// the instance joined (a new generation was recorded): the instance
// must not serve on, it is of the old generation.
var ErrGenerationChanged = errors.New("dispenser: the fleet's generation changed")

// checkGeneration re-reads the fleet record after a worker ID was
// claimed, before the claim serves: a new generation seals the record,
// then revokes the old leases, then records itself, so a claim whose
// check reads the record unsealed made its first reservation before the
// revocation (counted in the new generation's start, and the lease then
// lost), and any later claim is seen here and given up.
func (d *Dispenser) checkGeneration(ctx context.Context) error {
	fs, ok := d.assigner.(workerid.FleetStore)
	if !ok {
		return nil
	}
	stored, err := fs.RecordFleet(ctx, d.joined)
	if err != nil {
		return fmt.Errorf("dispenser: the fleet record: %w", err)
	}
	// Only a seal or a new generation counts: another instance may
	// extend the map of regions meanwhile (extendRegions), which changes
	// the record but not the generation.
	if stored.Generation != d.joined.Generation || sealed(stored) {
		return fmt.Errorf("%w: the store holds generation %d (layout %s), this instance joined generation %d (layout %s): it stops; start it with the new configuration",
			ErrGenerationChanged, stored.Generation, stored.Layout, d.joined.Generation, d.joined.Layout)
	}
	return nil
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
	return nextGeneration(ctx, fs, cfg, log)
}

func nextGeneration(ctx context.Context, fs workerid.FleetStore, cfg Config, log *slog.Logger) (workerid.Fleet, error) {
	mine := cfg.fleet()
	current, err := fs.RecordFleet(ctx, mine)
	if err != nil {
		return workerid.Fleet{}, fmt.Errorf("dispenser: the fleet record: %w", err)
	}
	old := current // the old generation's record; current may be it sealed
	if sealed(current) {
		old = unseal(current)
		log.Warn("the fleet record is sealed: an earlier dispenser -new-generation stopped midway; finishing it", "generation", old.Generation)
	}
	if cfg.checkFleet(old) == nil {
		if old != current {
			if err := fs.ReplaceFleet(ctx, current, old); err != nil {
				return workerid.Fleet{}, fmt.Errorf("dispenser: unseal generation %d: %w", old.Generation, err)
			}
		}
		// RecordFleet also writes the configuration as generation 1 when
		// the store had no record: that is no "already".
		msg := "the fleet already has this configuration: no new generation"
		if old.Generation == 1 && old.StartsAfter == 0 {
			msg = "the fleet's record is this configuration as generation 1 (recorded now if the store had none): no new generation"
		}
		log.Info(msg, "generation", old.Generation, "layout", old.Layout)
		return old, nil
	}
	last, live, err := fs.LeaseHorizon(ctx)
	if err != nil {
		return workerid.Fleet{}, fmt.Errorf("dispenser: the leases: %w", err)
	}
	if live > 0 {
		return workerid.Fleet{}, fmt.Errorf("dispenser: %d worker-ID leases of generation %d are live: stop every instance first (a killed instance's lease expires after its %s_LEASE_TTL)", live, old.Generation, EnvPrefix)
	}
	// Refuse a layout that cannot follow before sealing anything.
	if _, err := planGeneration(old, cfg, last, time.Now()); err != nil {
		return workerid.Fleet{}, err
	}
	// Sealed, the record lets no old instance in and makes one that just
	// claimed a worker ID give it up (checkGeneration); so every old
	// claim that serves reserved its seconds before the revocation below.
	if !sealed(current) {
		if err := fs.ReplaceFleet(ctx, current, seal(current)); err != nil {
			return workerid.Fleet{}, fmt.Errorf("dispenser: seal generation %d: %w", old.Generation, err)
		}
		current = seal(current)
	}
	// An instance paused or cut off past its TTL is not live, but its
	// token still renews: revoked, it can reserve no second beyond the
	// horizon read after, which StartsAfter covers.
	revoked, err := fs.RevokeLeases(ctx)
	if err != nil {
		return workerid.Fleet{}, fmt.Errorf("dispenser: revoke the leases of generation %d (the record stays sealed: run this again): %w", old.Generation, err)
	}
	if revoked > 0 {
		log.Warn("revoked leases of the old generation: an instance paused or cut off from the store that comes back stops at its next renewal",
			"revoked", revoked, "generation", old.Generation)
	}
	if last, _, err = fs.LeaseHorizon(ctx); err != nil {
		return workerid.Fleet{}, fmt.Errorf("dispenser: the leases (the record stays sealed: run this again): %w", err)
	}
	next, err := planGeneration(old, cfg, last, time.Now())
	if err != nil {
		// The old generation may serve on: unseal.
		if uerr := fs.ReplaceFleet(ctx, current, old); uerr != nil {
			return workerid.Fleet{}, fmt.Errorf("%w (and unsealing generation %d failed: %w)", err, old.Generation, uerr)
		}
		return workerid.Fleet{}, err
	}
	if err := fs.ReplaceFleet(ctx, current, next); err != nil {
		return workerid.Fleet{}, fmt.Errorf("dispenser: record generation %d: %w", next.Generation, err)
	}
	log.Info("recorded a new generation of the fleet", "generation", next.Generation, "layout", next.Layout,
		"worker_mode", next.WorkerMode, "subject_prefix", next.SubjectPrefix, "previous_layout", old.Layout,
		"starts_after", next.StartsAfter, "starts_after_time", time.Unix(next.StartsAfter, 0).UTC().Format(time.RFC3339))
	return next, nil
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
	if start := time.Unix(next.StartsAfter+1, 0); start.Sub(now) > maxGenerationWait {
		return workerid.Fleet{}, &ConfigError{Var: EnvPrefix + "_TIME_BITS/WORKER_BITS/SEQ_BITS/EPOCH", Reason: fmt.Sprintf(
			"the layout %s exceeds every ID of generation %d (%s) only from %s, more than %s from now: choose an earlier epoch or more time bits",
			mine.Layout, old.Generation, old.Layout, start.UTC().Format(time.RFC3339), maxGenerationWait)}
	}
	return next, nil
}

// A sealed fleet record is the old generation's with StartsAfter
// encoded below zero (-StartsAfter-1), written by dispenser
// -new-generation before it revokes the old leases: it needs no field of
// its own (no schema change) and differs from every record an instance
// joined.
func sealed(f workerid.Fleet) bool { return f.StartsAfter < 0 }

func seal(f workerid.Fleet) workerid.Fleet {
	f.StartsAfter = -f.StartsAfter - 1
	return f
}

func unseal(f workerid.Fleet) workerid.Fleet { return seal(f) }
