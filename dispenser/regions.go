package dispenser

import (
	"context"
	"fmt"

	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// checkRegions validates DISPENSER_REGION and DISPENSER_REGIONS against
// the layout and the lanes; the rules of the map itself are workerid's
// (Config.Validate).
func (c Config) checkRegions() error {
	if c.Regions.IsZero() {
		return nil
	}
	if err := c.Regions.CheckLayout(c.Layout()); err != nil {
		return &ConfigError{Var: EnvPrefix + "_REGIONS", Reason: err.Error()}
	}
	span, err := c.Regions.Range(c.Region)
	if err != nil {
		return &ConfigError{Var: EnvPrefix + "_REGION", Reason: err.Error()}
	}
	if uint64(c.MaxLanes) > span.Len() {
		return &ConfigError{Var: EnvPrefix + "_MAX_LANES", Reason: fmt.Sprintf("%d is more than the %d worker IDs of region %s (%s)", c.MaxLanes, span.Len(), c.Region, span)}
	}
	return nil
}

// describeRegions is a map of regions for a message: "(none)" for a
// fleet without regions.
func describeRegions(m string) string {
	if m == "" {
		return "(none)"
	}
	return m
}

// extendRegions records this instance's map in place of the store's
// when it only adds regions to it (workerid.Regions.Extends): a region
// added later needs no new generation. It returns the record the store
// holds afterwards; a map that does not extend the store's is left to
// checkFleet to refuse.
func (d *Dispenser) extendRegions(ctx context.Context, fs workerid.FleetStore, stored workerid.Fleet) (workerid.Fleet, error) {
	old, err := workerid.ParseRegions(stored.Regions)
	if err != nil || stored.Regions == d.cfg.Regions.String() || !d.cfg.Regions.Extends(old) {
		return stored, nil // an unreadable stored map is checkFleet's to refuse
	}
	next := stored
	next.Regions = d.cfg.Regions.String()
	if err := fs.ReplaceFleet(ctx, stored, next); err != nil {
		return workerid.Fleet{}, fmt.Errorf("dispenser: record the map of regions %s in place of %s: %w", next.Regions, stored.Regions, err)
	}
	d.log.Info("recorded regions added to the fleet's map", "regions", next.Regions, "previous_regions", stored.Regions, "generation", stored.Generation)
	return next, nil
}

// regionOf names the region of a worker ID for parse replies; nil
// without regions.
func (c Config) regionOf() func(uint64) (string, bool) {
	if c.Regions.IsZero() {
		return nil
	}
	return c.Regions.Of
}
