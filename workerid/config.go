package workerid

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// Mode is how worker IDs are handed out.
type Mode string

const (
	// ModeLeased leases recyclable worker IDs with time reservations.
	ModeLeased Mode = "leased"
	// ModeDisposable takes a fresh worker ID on every start (UidGenerator).
	ModeDisposable Mode = "disposable"
)

// Config configures worker-ID assignment, the settings every store
// shares; each store's own Config (mysqlstore.Config, kvstore.Config)
// embeds it beside the settings of its backend. It is a plain struct
// whose zero values take the defaults of DefaultConfig, the one place
// they are written (WithDefaults fills them in). The dispenser maps its
// environment onto it.
type Config struct {
	Mode Mode // default ModeLeased
	// LeaseTTL is how long a lease lasts without renewal (renewed every
	// third of it); at least 1s. Leased mode.
	LeaseTTL time.Duration
	// ReserveChunk is how far ahead seconds are reserved in the store at
	// a time; at least 1s. Leased mode. With a loss window it must exceed
	// W + LeaseTTL/3 + the generator's ahead bound (CheckChunk): a lease
	// issues only the reservation of W and a renewal ago. Zero:
	// ReserveChunkFor(W), a minute plus W.
	ReserveChunk time.Duration
	// StoreStartupDeadline is how long start-up (and a claim) retries an
	// unreachable store before it fails; negative: one attempt.
	StoreStartupDeadline time.Duration
	// StoreLossWindow is W, the longest window of acknowledged writes the
	// store may forget (a power loss under lazy fsync, a failover to a
	// replica that lacks the last transactions): a lease issues only
	// seconds of a reservation a renewal confirmed W after its write
	// (Lease.Until), so a fresh claim issues its first ID W and a renewal
	// after it. Zero: DefaultConfig's, NATS's default sync interval;
	// negative: none, valid only when every obligation of
	// docs/operations.md "What the guarantees assume" holds.
	StoreLossWindow time.Duration
	// StoreDurability is what start-up does when the store says it may
	// forget acknowledged writes (MySQL's flush and binlog settings, a
	// read-only server, JetStream's sync interval where readable):
	// DurabilityWarn (the default) or DurabilityRefuse.
	StoreDurability Durability

	// Region is this instance's region and Regions the fleet's map of
	// regions to worker-ID ranges (regions.go): with a map, the instance
	// claims worker IDs only inside its region's range. Both zero: no
	// regions, every worker ID of the layout. Leased mode only.
	Region  string
	Regions Regions

	// Host identifies the instance in the store's records, for operators
	// (see DetectHost); zero: DetectHost(nil), an actual host.
	Host Host

	Logger *slog.Logger // nil: slog.Default()
	// SettingName names a setting, given its field name, in the messages
	// that tell the operator to change it (say, "set TablesByHand"): the
	// dispenser passes its environment variables. nil: the field name.
	SettingName func(field string) string
}

// Durability is what start-up does about a store that may forget
// acknowledged writes.
type Durability string

const (
	// DurabilityWarn logs a warning naming each setting to change and
	// starts: the loss window (StoreLossWindow) covers a bounded loss.
	DurabilityWarn Durability = "warn"
	// DurabilityRefuse refuses to start.
	DurabilityRefuse Durability = "refuse"
)

// DefaultConfig is the configuration with every default: leased worker
// IDs.
func DefaultConfig() Config {
	const lossWindow = 2 * time.Minute
	return Config{
		Mode:                 ModeLeased,
		LeaseTTL:             30 * time.Second,
		ReserveChunk:         ReserveChunkFor(lossWindow),
		StoreStartupDeadline: 30 * time.Second,
		StoreLossWindow:      lossWindow,
		StoreDurability:      DurabilityWarn,
	}
}

// ReserveChunkFor is the default reserve chunk under the loss window W:
// a minute (the chunk with W = 0) plus W, so that the durable
// reservation, the acknowledged one of W and a renewal ago, stays ahead
// of the clock with the default TTL and ahead bound (CheckChunk).
func ReserveChunkFor(lossWindow time.Duration) time.Duration {
	return time.Minute + max(lossWindow, 0)
}

// LossWindow is W: StoreLossWindow with the default filled in, 0 when
// it is negative (no loss assumed).
func (c Config) LossWindow() time.Duration {
	return max(cmp.Or(c.StoreLossWindow, DefaultConfig().StoreLossWindow), 0)
}

// WithDefaults is c with every zero setting set to DefaultConfig's.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	c.Mode = cmp.Or(c.Mode, d.Mode)
	c.LeaseTTL = cmp.Or(c.LeaseTTL, d.LeaseTTL)
	c.StoreStartupDeadline = cmp.Or(c.StoreStartupDeadline, d.StoreStartupDeadline)
	c.StoreLossWindow = cmp.Or(c.StoreLossWindow, d.StoreLossWindow)
	c.ReserveChunk = cmp.Or(c.ReserveChunk, ReserveChunkFor(c.LossWindow()))
	c.StoreDurability = cmp.Or(c.StoreDurability, d.StoreDurability)
	return c
}

// InstanceHost is Host, or DetectHost(nil) when it is zero.
func (c Config) InstanceHost() (Host, error) {
	if c.Host != (Host{}) {
		return c.Host, nil
	}
	return DetectHost(nil)
}

// Name is how messages name the setting of the Config field: by
// SettingName when set, else the field name.
func (c Config) Name(field string) string {
	if c.SettingName == nil {
		return field
	}
	return c.SettingName(field)
}

// Validate reports the first invalid setting as a *setting.Error, zero
// settings read as their defaults. A store's Config.Validate checks its
// own settings too.
func (c Config) Validate() error {
	c = c.WithDefaults()
	bad := func(field, format string, args ...any) error {
		return &setting.Error{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if c.Mode != ModeLeased && c.Mode != ModeDisposable {
		return bad("Mode", "%q is neither %q nor %q", c.Mode, ModeLeased, ModeDisposable)
	}
	if c.LeaseTTL < time.Second {
		return bad("LeaseTTL", "%s is shorter than 1s", c.LeaseTTL)
	}
	if c.ReserveChunk < time.Second {
		return bad("ReserveChunk", "%s is shorter than 1s", c.ReserveChunk)
	}
	if c.Mode == ModeLeased {
		// The generator's ahead bound is its caller's (the dispenser
		// checks with it): here only what no bound can do without.
		if err := c.CheckChunk(0, ""); err != nil {
			return err
		}
	}
	if c.StoreDurability != DurabilityWarn && c.StoreDurability != DurabilityRefuse {
		return bad("StoreDurability", "%q is neither %q nor %q", c.StoreDurability, DurabilityWarn, DurabilityRefuse)
	}
	return c.validateRegions()
}

// CheckChunk refuses, as a *setting.Error on ReserveChunk, a reserve chunk
// that does not exceed W + LeaseTTL/3 + maxAhead when W is not 0: a
// lease issues only the reservation a renewal confirmed W after its
// write, which lags the acknowledged one by W and a renewal interval, so
// a shorter chunk stalls padding at the durable reservation's end
// (uniqueness holds; IDs stop). maxAheadName names the ahead bound's
// setting ("": no bound to name); a negative maxAhead (no bound) counts
// as 0.
func (c Config) CheckChunk(maxAhead time.Duration, maxAheadName string) error {
	c = c.WithDefaults()
	w := c.LossWindow()
	if w == 0 || c.Mode != ModeLeased {
		return nil
	}
	need := w + c.LeaseTTL/3 + max(maxAhead, 0)
	if c.ReserveChunk > need {
		return nil
	}
	ahead := ""
	if maxAheadName != "" {
		ahead = fmt.Sprintf(" + %s (%s)", maxAheadName, max(maxAhead, 0))
	}
	return &setting.Error{Field: "ReserveChunk", Reason: fmt.Sprintf(
		"%s must exceed %s (%s) + %s/3 (%s)%s = %s: with a loss window IDs come only from the reservation of W and a renewal ago, so a shorter chunk stalls them; raise %s (unset: %s), or lower %s (0 only when the store meets every obligation of docs/operations.md, What the guarantees assume)",
		c.ReserveChunk, c.Name("StoreLossWindow"), w, c.Name("LeaseTTL"), c.LeaseTTL/3, ahead, need,
		c.Name("ReserveChunk"), ReserveChunkFor(w), c.Name("StoreLossWindow"))}
}

// validateRegions checks Region against Regions and the mode.
func (c Config) validateRegions() error {
	if c.Regions.IsZero() {
		if c.Region != "" {
			return &setting.Error{Field: "Region", Reason: fmt.Sprintf("%q given without a map of regions (%s): regions without ranges could claim the same worker IDs", c.Region, c.Name("Regions"))}
		}
		return nil
	}
	if _, err := c.Regions.Range(c.Region); err != nil {
		return &setting.Error{Field: "Region", Reason: "not usable", Err: err}
	}
	if c.Mode == ModeDisposable {
		// A disposable worker ID is used once: a region's share of the
		// layout runs out after that many starts, and WORKER_NODE's
		// auto-increment (shared with UidGenerator instances, which know
		// nothing of ranges) cannot be made to land inside a range.
		return &setting.Error{Field: "Regions", Reason: fmt.Sprintf("regions need %s=%s: disposable worker IDs are never reused, so a region's range would run out after as many starts, and a store's auto-increment cannot be kept inside a range", c.Name("Mode"), ModeLeased)}
	}
	return nil
}

// WorkerRange is the range of worker IDs this instance claims from in
// layout: its region's, or with no regions every worker ID of the layout.
// A region's range past the layout is a *RegionError (RegionBeyondLayout).
func (c Config) WorkerRange(layout uidcore.Layout) (WorkerRange, error) {
	return c.Regions.claimRange(c.Region, layout)
}
