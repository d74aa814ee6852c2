package dispenser

import (
	"fmt"
	"time"

	"github.com/uid-dispenser/uid-dispenser/telemetry"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// checkIssuable refuses a configuration under which the instance could
// not issue IDs for the runway-warning horizon from now: an epoch in the
// future, a time field that has run out or runs out within the horizon,
// and any set of ring options the generator would refuse. These used to
// pass validation and fail only after NATS was reached and a worker ID
// claimed (a burnt WORKER_NODE row in disposable mode), or, worse, start,
// report ready and answer every request with a 500.
func (c Config) checkIssuable(now time.Time) error {
	layout := c.Layout()
	if layout.Epoch.After(now) {
		return &ConfigError{Var: c.layoutNames("EPOCH"), Reason: fmt.Sprintf(
			"%s is in the future (now %s): no second before it can be expressed, so no ID could be issued until then",
			layout.EpochText(), layout.TimeText(now))}
	}
	horizon, _ := telemetry.ParseRunway(c.RunwayWarning) // Validate checked it
	end := layout.RunwayEnd()
	// The runway is the layout's (bits and epoch) business, but a horizon
	// longer than any layout could reach is the warning's: name all three.
	names := func() string { return c.layoutNames("TIME_BITS", "EPOCH") } // only for an error
	switch {
	case !end.After(now) && layout.Equal(uidcore.UidGeneratorLayout()):
		return &ConfigError{Var: names(), Reason: fmt.Sprintf(
			"%s (%s) is UidGenerator's layout, for reading its IDs (uid.parse with the header Uid-Layout: %s, client-demo parse -layout %s), not for issuing: its time field ran out at %s. "+
				"To replace UidGenerator on its WORKER_NODE table, choose a layout by docs/operations.md, \"Migrating from UidGenerator\"",
			uidcore.PresetUidGenerator, layout, uidcore.PresetUidGenerator, uidcore.PresetUidGenerator, layout.TimeText(end))}
	case !end.After(now):
		return &ConfigError{Var: names(), Reason: fmt.Sprintf(
			"the time field of the layout %s ran out at %s: no ID can be issued; choose more time bits or a later epoch (a new generation, see docs/operations.md)",
			layout, layout.TimeText(end))}
	case horizon > 0 && end.Sub(now) < horizon:
		return &ConfigError{Var: names(), Reason: fmt.Sprintf(
			"the time field of the layout %s runs out at %s, within %s_RUNWAY_WARNING=%s of now: choose more time bits or a later epoch, or a shorter %s_RUNWAY_WARNING",
			layout, layout.TimeText(end), EnvPrefix, c.RunwayWarning, EnvPrefix)}
	}
	return c.checkGenerator()
}

// checkGenerator refuses any set of ring options the generator would
// refuse, by the generator's own rules (uidcore.CachedOptions.Validate,
// which builds nothing), before anything is connected or claimed.
func (c Config) checkGenerator() error {
	return namedError[uidcore.CachedOptions](c.cachedOptions(nil, nil, nil).Validate())
}
