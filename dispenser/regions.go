package dispenser

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// sequenceHomes is each declared sequence's home region, nil without
// regions (the declaration is checked already).
func (c Config) sequenceHomes() map[string]string {
	if c.Regions.IsZero() {
		return nil
	}
	decls, _ := sequence.ParseDeclarations(c.Sequences)
	homes := map[string]string{}
	for _, d := range decls {
		homes[d.Name] = d.Home
	}
	return homes
}

// declaredHere are the sequences this instance declares in its store:
// every one without regions, those homed in its region with regions
// (another region's sequence lives in that region's store alone).
func (c Config) declaredHere() ([]sequence.Declaration, error) {
	decls, err := sequence.ParseDeclarations(c.Sequences) // validated already
	if err != nil || c.Regions.IsZero() {
		return decls, err
	}
	return slices.DeleteFunc(decls, func(d sequence.Declaration) bool { return d.Home != c.Region }), nil
}

// warnUnservedSequences names the sequences of the region's store that
// this instance does not serve, since its DISPENSER_SEQUENCES does not
// home them here: with regions an instance serves only what its
// declaration homes in its region (a name left in the store from another
// declaration would otherwise have two homes).
func (d *Dispenser) warnUnservedSequences() {
	homes := d.cfg.sequenceHomes()
	if homes == nil {
		return
	}
	for _, st := range d.seq.Stats() {
		if home := homes[st.Name]; home != d.cfg.Region {
			d.log.Warn("sequence in this region's store not served here: DISPENSER_SEQUENCES does not home it in this region",
				"sequence", st.Name, "region", d.cfg.Region, "declared_home", cmp.Or(home, "(none)"))
		}
	}
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

// otherRegionTimeout bounds the read of another region's fleet record: a
// region cut off must not hold up the start of this one for long.
const otherRegionTimeout = 2 * time.Second

// checkOtherRegions compares the fleet records of the other regions'
// stores that this instance reaches (through the gateways, on KV) with
// its configuration: a mismatch is a *ConfigError like one in its own
// store. A region it cannot read is logged and skipped, since a region
// must start while another is down.
func (d *Dispenser) checkOtherRegions(ctx context.Context, fs workerid.FleetStore) error {
	reader, ok := fs.(workerid.RegionFleetReader)
	if !ok || d.cfg.Regions.IsZero() {
		return nil
	}
	for _, r := range d.cfg.Regions.List() {
		if r.Name == d.cfg.Region {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, otherRegionTimeout)
		f, found, err := reader.RegionFleet(rctx, r.Name)
		cancel()
		switch {
		case err != nil:
			d.log.Warn("could not read the fleet record of another region: not compared", "region", r.Name, "error", err)
		case !found:
			d.log.Info("another region has no fleet record yet", "region", r.Name)
		default:
			if err := d.cfg.compareFleet(f, "region "+r.Name+"'s store", true); err != nil {
				return err
			}
		}
	}
	return nil
}

// regionsExtendOneAnother says whether the map stored and this
// instance's are equal or one only adds regions to the other.
func (c Config) regionsExtendOneAnother(stored string) bool {
	m, err := workerid.ParseRegions(stored)
	if err != nil {
		return false
	}
	return m.String() == c.Regions.String() || m.Extends(c.Regions) || c.Regions.Extends(m)
}

// blocksRegion is the region whose blocks stream this instance
// publishes to: with regions, its own (a stream per region).
func (c Config) blocksRegion() string {
	if c.Regions.IsZero() {
		return ""
	}
	return c.Region
}
