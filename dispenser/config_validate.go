package dispenser

// Validation of Config: the rules of its own settings and the ones across
// settings, and the libraries' Validate for theirs, in one pass.

import (
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/telemetry"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
	"github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore"
)

// Validate reports the first invalid setting, as a *ConfigError naming
// its variable, in one pass: the layout; the dispenser's own settings;
// each library's settings by the library's Validate; then the rules
// across settings of different libraries. A rule lives once: a library's
// setting is checked by the library, and here only what the environment
// adds (a zero the library would read as its default) or what spans
// libraries. Each rule reports a *setting.Error naming a field, which
// namedError turns into the *ConfigError of its variable by the one table
// (settingVars, and Config's own tags for its fields); only the runway's
// errors, which name several variables, are *ConfigErrors from the start.
// It allocates nothing for a valid configuration.
func (c Config) Validate() error {
	if err := c.checkLayout(); err != nil {
		return err
	}
	if err := c.checkOwn(); err != nil {
		return err
	}
	if err := c.checkLibraries(); err != nil {
		return err
	}
	return c.checkAcross(time.Now())
}

// bad is an invalid setting of Config's field, named by its variable.
func bad(field, format string, args ...any) error {
	return namedError[Config](&setting.Error{Field: field, Reason: fmt.Sprintf(format, args...)})
}

// checkLayout checks the layout, named by DISPENSER_LAYOUT when it was
// given by it.
func (c Config) checkLayout() error {
	if c.LayoutName != "" {
		l, err := uidcore.ParseLayout(c.LayoutName)
		if err != nil {
			return bad("LayoutName", "%v", err)
		}
		if l.String() != c.Layout().String() {
			// Only a Go caller can get here: LoadConfig sets both.
			return bad("LayoutName", "%s, but the layout fields say %s: set them from it (LoadConfig does)", l, c.Layout())
		}
	}
	if err := c.Layout().Validate(); err != nil {
		err = namedError[uidcore.Layout](err)
		if ce, ok := err.(*ConfigError); ok && c.LayoutName != "" {
			ce.Var = settingVar[Config]("LayoutName") // the layout was given by it
		}
		return err
	}
	return nil
}

// checkOwn checks the settings no library has: how the dispenser
// connects, listens, logs and shuts down, the ring's size in
// UidGenerator's boost power, the declarations of sequences, and the
// zeros of library settings.
func (c Config) checkOwn() error {
	maxBoost := bits.Len(uidcore.MaxRingSeconds) - 1
	switch {
	case c.NATSConnectTimeout <= 0:
		return bad("NATSConnectTimeout", "%s must be positive", c.NATSConnectTimeout)
	case c.BoostPower < 0 || c.BoostPower > maxBoost:
		return bad("BoostPower", "%d is outside 0..%d", c.BoostPower, maxBoost)
	case c.ShutdownTimeout <= 0:
		return bad("ShutdownTimeout", "%s must be positive", c.ShutdownTimeout)
	case !validLevel(c.LogLevel):
		return bad("LogLevel", "%q is not a level: use debug, info, warn or error", c.LogLevel)
	case c.LogFormat != "text" && c.LogFormat != "json":
		return bad("LogFormat", "%q is neither text nor json", c.LogFormat)
	}
	if _, err := telemetry.ParseRunway(c.RunwayWarning); err != nil {
		return bad("RunwayWarning", "%v", err)
	}
	if _, err := sequence.ParseDeclarations(c.Sequences); err != nil {
		return bad("Sequences", "%v", err)
	}
	if err := c.checkZeros(); err != nil {
		return err
	}
	return c.checkListening()
}

// checkZeros refuses a zero in the settings whose library reads zero as
// its default. DefaultConfig passes every default, so a zero here was
// set, and would silently become the default instead of the zero asked
// for (MaxAhead 0s read as 2s ahead).
func (c Config) checkZeros() error {
	for _, z := range [...]struct {
		field string
		zero  bool
	}{
		{"RingMemory", c.RingMemory == 0},
		{"PaddingFactor", c.PaddingFactor == 0},
		{"LaneIdle", c.LaneIdle == 0},
		{"MaxAhead", c.MaxAhead == 0},
		{"MaxLag", c.MaxLag == 0},
		{"QueueGroup", c.QueueGroup == ""},
		{"SubjectPrefix", c.SubjectPrefix == ""},
		{"MaxBatch", c.MaxBatch == 0},
		{"SequenceStep", c.SequenceStep == 0},
		{"SequenceMaxStep", c.SequenceMaxStep == 0},
		{"SequenceTarget", c.SequenceTarget == 0},
		{"NATSPingInterval", c.NATSPingInterval == 0},
	} {
		if z.zero {
			return bad(z.field, "0 or empty is not a value here: leave the variable unset for the default")
		}
	}
	return nil
}

// checkLibraries checks each library's settings by the library's own
// Validate. The blocks' and both stores' settings are checked whichever
// is used: a bad value should not wait to stop an instance until someone
// turns them on.
func (c Config) checkLibraries() error {
	if err := c.cachedOptions(nil, nil, nil).Validate(); err != nil {
		return namedError[uidcore.CachedOptions](err)
	}
	if err := c.serviceConfig().Validate(); err != nil {
		return namedError[natsio.ServiceConfig](err)
	}
	if err := c.sequenceConfig(nil).Validate(); err != nil {
		return namedError[sequence.Config](err)
	}
	if err := c.blocksConfig(nil).Validate(); err != nil {
		return namedError[natsio.BlocksConfig](err)
	}
	if err := c.connConfig(c.NATSURL, "", nil).Validate(); err != nil {
		return namedError[natsconn.Config](err)
	}
	common := c.workerIDConfig(nil)
	// With a loss window IDs come from the reservation a renewal confirmed
	// W ago: the reserve chunk must cover that and the generator's ahead
	// bound, a rule across two libraries checked before the stores' own
	// (which knows no ahead bound) so that its message names the bound.
	named := common
	named.SettingName = settingVar[workerid.Config]
	if err := named.CheckChunk(c.MaxAhead, settingVar[uidcore.CachedOptions]("MaxAhead")); err != nil {
		return namedError[workerid.Config](err)
	}
	if err := c.mysqlConfig(common).Validate(); err != nil {
		return namedError[mysqlstore.Config](err)
	}
	if err := c.kvConfig(common).Validate(); err != nil {
		return namedError[kvstore.Config](err)
	}
	return nil
}

// checkAcross checks the rules between settings of different libraries:
// the map of regions against the layout, the lanes against the worker
// IDs this instance may claim, the sequences' homes against the regions,
// and the layout's runway against the warning's horizon.
func (c Config) checkAcross(now time.Time) error {
	if err := c.Regions.CheckLayout(c.Layout()); err != nil {
		return bad("Regions", "%v", err)
	}
	// The worker IDs this instance may claim: its region's, or every one
	// of the layout's (workerid.Config.Validate checked the region).
	span, _ := c.workerIDConfig(nil).WorkerRange(c.Layout())
	if c.MaxLanes < 1 || uint64(c.MaxLanes) > span.Len() {
		of := "the layout's worker IDs"
		if !c.Regions.IsZero() {
			of = fmt.Sprintf("the worker IDs of region %s (%s)", c.Region, span)
		}
		return bad("MaxLanes", "%d is outside 1..%d, %s", c.MaxLanes, span.Len(), of)
	}
	if err := c.checkSequenceHomes(); err != nil {
		return bad("Sequences", "%v", err)
	}
	return c.checkIssuable(now)
}

// validLevel says whether parseLevel reads s, without parsing the four
// names (which allocates: Validate allocates nothing).
func validLevel(s string) bool {
	for _, name := range [...]string{"debug", "info", "warn", "error"} {
		if strings.EqualFold(s, name) {
			return true
		}
	}
	_, err := parseLevel(s)
	return err == nil
}

// checkSequenceHomes applies the rules of homes: in a fleet of regions
// every sequence names its home, a region of the map (its numbers live
// in one region's store only, or two regions would hand out the same
// numbers); without regions no sequence names one, since there is no map
// to check it against.
func (c Config) checkSequenceHomes() error {
	decls, _ := sequence.ParseDeclarations(c.Sequences) // checkOwn checked them
	for _, d := range decls {
		switch {
		case c.Regions.IsZero() && d.Home != "":
			return fmt.Errorf("sequence %q has the home region %s, but %s_REGIONS is not set: homes are for a fleet of regions", d.Name, d.Home, EnvPrefix)
		case c.Regions.IsZero():
		case d.Home == "":
			return fmt.Errorf("sequence %q has no home region: in a fleet of regions (%s_REGIONS %s) declare it as %s@<region>", d.Name, EnvPrefix, c.Regions, d.Name)
		default:
			if _, err := c.Regions.Range(d.Home); err != nil {
				return fmt.Errorf("sequence %q: its home region %s is not in %s_REGIONS %s", d.Name, d.Home, EnvPrefix, c.Regions)
			}
		}
	}
	return nil
}

// checkListening checks where the dispenser listens and keeps the
// embedded server's data, which would otherwise fail later in start-up
// with messages that do not name the variable.
func (c Config) checkListening() error {
	if reason := checkListenAddr(c.EmbeddedAddr); reason != "" {
		return bad("EmbeddedAddr", "%q %s", c.EmbeddedAddr, reason)
	}
	if c.MetricsAddr != "" {
		if reason := checkListenAddr(c.MetricsAddr); reason != "" {
			return bad("MetricsAddr", "%q %s", c.MetricsAddr, reason)
		}
	}
	if c.EmbeddedDataDir != "" {
		if reason := checkDirectoryPath(c.EmbeddedDataDir); reason != "" {
			return bad("EmbeddedDataDir", "%s", reason)
		}
	}
	return nil
}

// checkListenAddr says what is wrong with a host:port to listen on.
func checkListenAddr(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "is not host:port"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "has no port number 0..65535"
	}
	return ""
}

// checkDirectoryPath says why dir cannot be (or become, by MkdirAll) a
// directory: the nearest part of it that exists must be one.
func checkDirectoryPath(dir string) string {
	for p := filepath.Clean(dir); ; {
		info, err := os.Stat(p)
		switch {
		case err == nil && !info.IsDir():
			return fmt.Sprintf("%s is not a directory", p)
		case err == nil:
			return ""
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Sprintf("%s: %v", p, errors.Unwrap(err))
		}
		parent := filepath.Dir(p)
		if parent == p {
			return ""
		}
		p = parent
	}
}

// checkIssuable refuses a configuration under which the instance could
// not issue IDs for the runway-warning horizon from now: an epoch in the
// future, a time field that has run out or runs out within the horizon.
// These used to
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
	return nil
}
