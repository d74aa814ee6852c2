package dispenser

// Validation of Config: the rules of its own settings and the ones across
// settings, and the libraries' Validate for theirs, in one pass.

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/telemetry"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore"
)

// Validate reports the first invalid setting, as a *ConfigError naming its
// variable (or the worker-ID configuration's error).
func (c Config) Validate() error {
	bad := func(name, format string, args ...any) error {
		return &ConfigError{Var: EnvPrefix + "_" + name, Reason: fmt.Sprintf(format, args...)}
	}
	if c.LayoutName != "" {
		l, err := uidcore.ParseLayout(c.LayoutName)
		if err != nil {
			return bad("LAYOUT", "%v", err)
		}
		if l.String() != c.Layout().String() {
			// Only a Go caller can get here: LoadConfig sets both.
			return bad("LAYOUT", "%s, but the layout fields say %s: set them from it (LoadConfig does)", l, c.Layout())
		}
	}
	if err := c.Layout().Validate(); err != nil {
		err = namedError[uidcore.Layout](err)
		if ce, ok := err.(*ConfigError); ok && c.LayoutName != "" {
			ce.Var = EnvPrefix + "_LAYOUT" // the layout was given by it
		}
		return err
	}
	switch {
	case c.NATSConnectTimeout <= 0:
		return bad("NATS_CONNECT_TIMEOUT", "%s must be positive", c.NATSConnectTimeout)
	case c.BoostPower < 0 || c.BoostPower > 24:
		return bad("BOOST_POWER", "%d is outside 0..24", c.BoostPower)
	case c.RingMemory < 512 || c.RingMemory > 128<<20:
		return bad("RING_MEMORY", "%d bytes is outside 512..134217728", c.RingMemory)
	case c.MaxLanes < 1 || uint64(c.MaxLanes) > c.Layout().MaxWorkerID()+1:
		return bad("MAX_LANES", "%d is outside 1..%d (the layout's worker IDs)", c.MaxLanes, c.Layout().MaxWorkerID()+1)
	case c.LaneIdle < time.Second:
		return bad("LANE_IDLE", "%s: use at least 1s", c.LaneIdle)
	case c.PaddingFactor < 1 || c.PaddingFactor > 100:
		return bad("PADDING_FACTOR", "%d is outside 1..100", c.PaddingFactor)
	case c.ScheduleInterval < 0:
		return bad("SCHEDULE_INTERVAL", "%s is negative", c.ScheduleInterval)
	case c.MaxAhead >= 0 && c.MaxAhead < time.Second:
		return bad("MAX_AHEAD", "%s: use at least 1s, or a negative value for no bound", c.MaxAhead)
	case c.MaxLag >= 0 && c.MaxLag < time.Second:
		return bad("MAX_LAG", "%s: use at least 1s, or a negative value for no bound", c.MaxLag)
	case c.TakeWait < 0:
		return bad("TAKE_WAIT", "%s is negative", c.TakeWait)
	case c.QueueGroup == "":
		return bad("QUEUE_GROUP", "empty")
	case c.SubjectPrefix == "":
		return bad("SUBJECT_PREFIX", "empty")
	case c.MaxBatch == 0:
		return bad("MAX_BATCH", "%d: at least 1", c.MaxBatch)
	case c.ShutdownTimeout <= 0:
		return bad("SHUTDOWN_TIMEOUT", "%s must be positive", c.ShutdownTimeout)
	}
	if !validLevel(c.LogLevel) {
		return bad("LOG_LEVEL", "%q is not a level: use debug, info, warn or error", c.LogLevel)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return bad("LOG_FORMAT", "%q is neither text nor json", c.LogFormat)
	}
	if _, err := telemetry.ParseRunway(c.RunwayWarning); err != nil {
		return bad("RUNWAY_WARNING", "%v", err)
	}
	if err := c.checkSequences(); err != nil {
		return err
	}
	if err := c.checkIssuable(time.Now()); err != nil {
		return err
	}
	// Blocks settings are checked also while blocks are off: a bad value
	// should not wait to stop an instance until someone turns them on.
	if err := c.blocksConfig(nil).Validate(); err != nil {
		return namedError[natsio.BlocksConfig](err)
	}
	if err := c.serviceConfig().Validate(); err != nil {
		return namedError[natsio.ServiceConfig](err)
	}
	if err := c.checkReachability(); err != nil {
		return err
	}
	// Both stores' settings are checked, whichever is used, like the
	// blocks' above.
	common := c.workerIDConfig(nil)
	if err := namedError[mysqlstore.Config](c.mysqlConfig(common).Validate()); err != nil {
		return err
	}
	if err := namedError[kvstore.Config](c.kvConfig(common).Validate()); err != nil {
		return err
	}
	return c.checkRegions()
}

// checkSequences validates the DISPENSER_SEQUENCE* settings.
func (c Config) checkSequences() error {
	bad := func(name, format string, args ...any) error {
		return &ConfigError{Var: EnvPrefix + "_" + name, Reason: fmt.Sprintf(format, args...)}
	}
	decls, err := sequence.ParseDeclarations(c.Sequences)
	if err != nil {
		return bad("SEQUENCES", "%v", err)
	}
	if err := c.checkSequenceHomes(decls); err != nil {
		return bad("SEQUENCES", "%v", err)
	}
	switch {
	case c.SequenceStep < 1 || c.SequenceStep > sequence.MaxValue:
		return bad("SEQUENCE_STEP", "%d is outside 1..%d", c.SequenceStep, uint64(sequence.MaxValue))
	case c.SequenceMaxStep < c.SequenceStep || c.SequenceMaxStep > sequence.MaxValue:
		return bad("SEQUENCE_MAX_STEP", "%d is below DISPENSER_SEQUENCE_STEP %d (or above %d)", c.SequenceMaxStep, c.SequenceStep, uint64(sequence.MaxValue))
	case c.SequenceTarget < time.Second:
		return bad("SEQUENCE_TARGET", "%s: use at least 1s", c.SequenceTarget)
	}
	return nil
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

// checkSequenceHomes applies the rules of homes: in a fleet of regions
// every sequence names its home, a region of the map (its numbers live
// in one region's store only, or two regions would hand out the same
// numbers); without regions no sequence names one, since there is no map
// to check it against.
func (c Config) checkSequenceHomes(decls []sequence.Declaration) error {
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

// checkReachability checks the settings that say how to reach NATS and
// where to listen, which Validate would otherwise let through to fail
// later in start-up with messages that do not name the variable: URLs,
// the choice of one authentication method, the credentials and TLS files,
// listen addresses and the embedded server's directory. Its errors never
// quote a password, token or file content.
func (c Config) checkReachability() error {
	bad := func(name, format string, args ...any) error {
		return &ConfigError{Var: EnvPrefix + "_" + name, Reason: fmt.Sprintf(format, args...)}
	}
	if err := c.connConfig(c.NATSURL, "", nil).Validate(); err != nil {
		return namedError[natsconn.Config](err)
	}
	if reason := checkListenAddr(c.EmbeddedAddr); reason != "" {
		return bad("EMBEDDED_ADDR", "%q %s", c.EmbeddedAddr, reason)
	}
	if c.MetricsAddr != "" {
		if reason := checkListenAddr(c.MetricsAddr); reason != "" {
			return bad("METRICS_ADDR", "%q %s", c.MetricsAddr, reason)
		}
	}
	if c.EmbeddedDataDir != "" {
		if reason := checkDirectoryPath(c.EmbeddedDataDir); reason != "" {
			return bad("EMBEDDED_DATA_DIR", "%s", reason)
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
