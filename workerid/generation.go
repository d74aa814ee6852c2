package workerid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// MaxGenerationWait bounds how far in the future a new generation may
// start: its instances wait for that second before they serve.
const MaxGenerationWait = 10 * time.Minute

// ErrGenerationChanged: the store's fleet record is no longer the one
// the instance joined (a new generation was recorded): the instance
// must not serve on, it is of the old generation.
var ErrGenerationChanged = errors.New("workerid: the fleet's generation changed")

// ErrFleetSealed: the fleet record is sealed, so no instance joins it:
// dispenser -new-generation is recording a new generation, or stopped
// midway.
var ErrFleetSealed = errors.New("workerid: the fleet record is sealed")

// CheckJoin refuses a sealed record, which no instance may join.
func CheckJoin(stored Fleet) error {
	if stored.Sealed {
		return fmt.Errorf("%w: generation %d: dispenser -new-generation is recording a new generation, or stopped midway (run it again)", ErrFleetSealed, stored.Generation)
	}
	return nil
}

// WaitForStart waits for the first second of f's generation (at once
// when it has begun). A start farther away than MaxGenerationWait (and a
// minute of clock skew) is refused: the machine's clock is behind.
func WaitForStart(ctx context.Context, f Fleet, log *slog.Logger) error {
	start := time.Unix(f.StartsAfter+1, 0)
	wait := time.Until(start)
	if wait <= 0 {
		return nil
	}
	if wait > MaxGenerationWait+time.Minute {
		return fmt.Errorf("workerid: generation %d starts at %s, more than %s from now: is this machine's clock behind?",
			f.Generation, start.UTC().Format(time.RFC3339), MaxGenerationWait)
	}
	log.Info("waiting for the start of the fleet's generation", "generation", f.Generation,
		"starts", start.UTC().Format(time.RFC3339), "in", wait.Round(time.Millisecond))
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("workerid: waiting for generation %d: %w", f.Generation, ctx.Err())
	case <-t.C:
		return nil
	}
}

// CheckGeneration re-reads the fleet record after a worker ID was
// claimed, before the claim serves: a new generation seals the record,
// then revokes the old leases, then records itself, so a claim whose
// check reads the record unsealed made its first reservation before the
// revocation (counted in the new generation's start, and the lease then
// lost), and any later claim is seen here and given up
// (ErrGenerationChanged).
func CheckGeneration(ctx context.Context, fs FleetStore, joined Fleet) error {
	stored, err := fs.RecordFleet(ctx, joined)
	if err != nil {
		return fmt.Errorf("workerid: the fleet record: %w", err)
	}
	// Only a seal or a new generation counts: another instance may
	// extend the map of regions meanwhile, which changes the record but
	// not the generation.
	if stored.Generation != joined.Generation || stored.Sealed {
		return fmt.Errorf("%w: the store holds generation %d (layout %s), this instance joined generation %d (layout %s): it stops; start it with the new configuration",
			ErrGenerationChanged, stored.Generation, stored.Layout, joined.Generation, joined.Layout)
	}
	return nil
}

// GenerationChange is what ChangeGeneration needs from the program that
// moves a fleet to a new configuration.
type GenerationChange struct {
	// Fleet is the record the new configuration makes (generation 1,
	// StartsAfter 0): written as it is when the store holds none.
	Fleet Fleet
	// Differs says why a record's configuration is not the new one (nil:
	// it is, and no new generation is needed).
	Differs func(Fleet) error
	// Plan is the record that lets the new configuration follow old,
	// whose leases reserved up to lastReserved (see NextGeneration).
	Plan   func(old Fleet, lastReserved int64) (Fleet, error)
	Logger *slog.Logger
}

// ChangeGeneration moves the fleet of fs to ch's configuration: the
// safe way to change a layout, worker mode or subject prefix. Every
// instance of the old generation must have stopped (no lease live): it
// refuses otherwise. It seals the record and revokes every lease,
// expired or not, so that an old instance paused or cut off past its
// TTL cannot renew when it comes back, then records the planned
// generation. A change that stopped midway (the record left sealed) is
// finished by running it again.
func ChangeGeneration(ctx context.Context, fs FleetStore, ch GenerationChange) (Fleet, error) {
	log := ch.Logger
	current, err := fs.RecordFleet(ctx, ch.Fleet)
	if err != nil {
		return Fleet{}, fmt.Errorf("workerid: the fleet record: %w", err)
	}
	old := current // the old generation's record; current may be it sealed
	if current.Sealed {
		old = current.unseal()
		log.Warn("the fleet record is sealed: an earlier dispenser -new-generation stopped midway; finishing it", "generation", old.Generation)
	}
	if ch.Differs(old) == nil {
		if old != current {
			if err := fs.ReplaceFleet(ctx, current, old); err != nil {
				return Fleet{}, fmt.Errorf("workerid: unseal generation %d: %w", old.Generation, err)
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
		return Fleet{}, fmt.Errorf("workerid: the leases: %w", err)
	}
	if live > 0 {
		return Fleet{}, fmt.Errorf("workerid: %d worker-ID leases of generation %d are live: stop every instance first (a killed instance's lease expires after its lease TTL)", live, old.Generation)
	}
	// Refuse a layout that cannot follow before sealing anything.
	if _, err := ch.Plan(old, last); err != nil {
		return Fleet{}, err
	}
	// Sealed, the record lets no old instance in and makes one that just
	// claimed a worker ID give it up (CheckGeneration); so every old
	// claim that serves reserved its seconds before the revocation below.
	if !current.Sealed {
		if err := fs.ReplaceFleet(ctx, current, current.seal()); err != nil {
			return Fleet{}, fmt.Errorf("workerid: seal generation %d: %w", old.Generation, err)
		}
		current = current.seal()
	}
	// An instance paused or cut off past its TTL is not live, but its
	// token still renews: revoked, it can reserve no second beyond the
	// horizon read after, which StartsAfter covers.
	revoked, err := fs.RevokeLeases(ctx)
	if err != nil {
		return Fleet{}, fmt.Errorf("workerid: revoke the leases of generation %d (the record stays sealed: run this again): %w", old.Generation, err)
	}
	if revoked > 0 {
		log.Warn("revoked leases of the old generation: an instance paused or cut off from the store that comes back stops at its next renewal",
			"revoked", revoked, "generation", old.Generation)
	}
	if last, _, err = fs.LeaseHorizon(ctx); err != nil {
		return Fleet{}, fmt.Errorf("workerid: the leases (the record stays sealed: run this again): %w", err)
	}
	next, err := ch.Plan(old, last)
	if err != nil {
		// The old generation may serve on: unseal.
		if uerr := fs.ReplaceFleet(ctx, current, old); uerr != nil {
			return Fleet{}, fmt.Errorf("%w (and unsealing generation %d failed: %w)", err, old.Generation, uerr)
		}
		return Fleet{}, err
	}
	if err := fs.ReplaceFleet(ctx, current, next); err != nil {
		return Fleet{}, fmt.Errorf("workerid: record generation %d: %w", next.Generation, err)
	}
	log.Info("recorded a new generation of the fleet", "generation", next.Generation, "layout", next.Layout,
		"worker_mode", next.WorkerMode, "subject_prefix", next.SubjectPrefix, "previous_layout", old.Layout,
		"starts_after", next.StartsAfter, "starts_after_time", time.Unix(next.StartsAfter, 0).UTC().Format(time.RFC3339))
	return next, nil
}

func (f Fleet) seal() Fleet {
	f.Sealed = true
	return f
}

func (f Fleet) unseal() Fleet {
	f.Sealed = false
	return f
}

// ErrFleetInUse: dispenser -reset-fleet refuses to remove a fleet record
// that instances may have issued IDs under.
var ErrFleetInUse = errors.New("workerid: the fleet record is in use")

// ResetFleet removes a fleet record written by a start that should never
// have written it (a configuration mistake, say), so that the next start
// records its own: the way out that does not edit the store by hand. It
// refuses a record IDs may have been issued under: a generation recorded
// by dispenser -new-generation (its StartsAfter keeps the new IDs above
// the old ones), and a fleet with a lease live or with seconds reserved
// by any lease ever (ErrFleetInUse). It seals the record before it reads
// the leases, so that no instance joins meanwhile and one that just
// claimed a worker ID gives it up (CheckGeneration), then removes the
// sealed record by compare-and-set; a refusal unseals it. It returns
// the record removed, or found false when the store held none.
func ResetFleet(ctx context.Context, fs FleetStore, log *slog.Logger) (removed Fleet, found bool, err error) {
	r, ok := fs.(FleetRemover)
	if !ok {
		return Fleet{}, false, errors.New("workerid: the store cannot remove its fleet record")
	}
	current, found, err := r.ReadFleet(ctx)
	if err != nil || !found {
		return Fleet{}, false, err
	}
	old := current.unseal()
	if old.Generation > 1 || old.StartsAfter != 0 {
		return Fleet{}, true, fmt.Errorf("%w: generation %d (layout %s) was recorded by dispenser -new-generation: its start keeps its IDs above the previous generation's, so it is never removed; to change the configuration, run dispenser -new-generation", ErrFleetInUse, old.Generation, old.Layout)
	}
	if !current.Sealed {
		if err := fs.ReplaceFleet(ctx, current, old.seal()); err != nil {
			return Fleet{}, true, fmt.Errorf("workerid: seal the fleet record: %w", err)
		}
		current = old.seal()
	}
	refuse := func(err error) (Fleet, bool, error) {
		if uerr := fs.ReplaceFleet(ctx, current, old); uerr != nil {
			return Fleet{}, true, fmt.Errorf("%w (and unsealing the record failed: %w; run dispenser -reset-fleet again or -new-generation)", err, uerr)
		}
		return Fleet{}, true, err
	}
	last, live, err := fs.LeaseHorizon(ctx)
	if err != nil {
		return refuse(fmt.Errorf("workerid: the leases: %w", err))
	}
	if live > 0 {
		return refuse(fmt.Errorf("%w: %d worker-ID leases are live: stop every instance first (a killed instance's lease expires after its lease TTL)", ErrFleetInUse, live))
	}
	if last > 0 {
		return refuse(fmt.Errorf("%w: leases reserved seconds up to %s under layout %s: instances served under this record, and another configuration could repeat their IDs; run dispenser -new-generation instead",
			ErrFleetInUse, time.Unix(last, 0).UTC().Format(time.RFC3339), old.Layout))
	}
	if err := r.RemoveFleet(ctx, current); err != nil {
		return Fleet{}, true, fmt.Errorf("workerid: remove the fleet record (it stays sealed: run dispenser -reset-fleet again): %w", err)
	}
	log.Warn("removed the fleet record: the next instance to start records its configuration", "generation", old.Generation,
		"layout", old.Layout, "worker_mode", old.WorkerMode, "subject_prefix", old.SubjectPrefix)
	return old, true, nil
}
