package dispenser

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore"
)

// notFromTheEnvironment are the fields of settingVars' structs that no
// variable sets: what the dispenser fills in itself (loggers, providers,
// the claim) or leaves to the library. Any other field must be in the
// table, so that a setting added to a library without a variable, or a
// renamed field, fails here rather than in an error message that names a
// bare field.
var notFromTheEnvironment = map[string][]string{
	// Floor is the fleet generation's StartsAfter, read from the store.
	"uidcore.CachedOptions": {"Claim", "Lanes", "Clock", "Observer", "OnPutReject", "OnTakeReject", "Floor"},
	"workerid.Config":       {"Host", "Logger", "SettingName"},
	"natsio.BlocksConfig":   {"Logger", "TracerProvider"},
	"natsio.ServiceConfig":  {"Description", "Version", "Logger", "PendingMsgs", "PendingBytes", "ClaimStatus", "RegionOf", "Sequences", "SequenceHomes", "TracerProvider", "MeterProvider"},
	// Settle follows DISPENSER_STORE_LOSS_WINDOW (sequence.SettleFor).
	"sequence.Config":   {"FetchTimeout", "RetryPause", "CheckInterval", "Settle", "StoreName", "Logger", "SettingName"},
	"telemetry.Config":  {"ServiceVersion", "InstanceID", "WorkerID", "Ready", "Sampler", "SpanProcessors", "MetricReaders", "Logger", "TracerProvider", "MeterProvider", "Propagator"},
	"natsconn.Config":   {"Name", "ReconnectWait", "Logger", "SettingName"},
	"uidcore.Layout":    {},
	"mysqlstore.Config": {},
	"kvstore.Config":    {},
}

// TestSettingVarsCoverTheLibraries holds the table to the libraries'
// structs and to the variables: every field a variable could set is in
// it, every entry is a field of its struct, and every variable it names
// is one the dispenser reads.
func TestSettingVarsCoverTheLibraries(t *testing.T) {
	known := map[string]bool{}
	for _, v := range Variables() {
		known[v.Name] = true
	}
	for typ, vars := range settingVars {
		skip, listed := notFromTheEnvironment[typ.String()]
		if !listed {
			t.Errorf("%s: in settingVars but not in notFromTheEnvironment (list its fields no variable sets, if any)", typ)
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() || f.Anonymous {
				continue
			}
			_, mapped := vars[f.Name]
			switch ignored := slices.Contains(skip, f.Name); {
			case !mapped && !ignored:
				t.Errorf("%s.%s has no variable in settingVars", typ, f.Name)
			case mapped && ignored:
				t.Errorf("%s.%s is in settingVars and in notFromTheEnvironment", typ, f.Name)
			}
		}
		for field, variable := range vars {
			if _, ok := typ.FieldByName(field); !ok && !(typ.String() == "uidcore.Layout" && field == "Layout") {
				t.Errorf("settingVars names %s.%s, which the struct lacks", typ, field)
			}
			name, _, _ := strings.Cut(variable, "=")
			if first, rest, many := strings.Cut(name, "/"); many {
				// DISPENSER_TIME_BITS/WORKER_BITS/SEQ_BITS
				name = first
				for _, r := range strings.Split(rest, "/") {
					if !known[EnvPrefix+"_"+r] {
						t.Errorf("settingVars: %s.%s names %s, which is not a variable", typ, field, r)
					}
				}
			}
			if !known[name] {
				t.Errorf("settingVars: %s.%s names %s, which is not a variable", typ, field, name)
			}
		}
	}
}

// A library's setting error names the variable of its struct's field,
// a field of an embedded struct included, and fields of the same name in
// two structs name their own variables.
func TestNamedErrorNamesTheStructsVariable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{namedError[natsio.BlocksConfig](&setting.Error{Field: "Replicas", Reason: "r"}), "DISPENSER_BLOCKS_REPLICAS"},
		{namedError[kvstore.Config](&setting.Error{Field: "Replicas", Reason: "r"}), "DISPENSER_WORKER_KV_REPLICAS"},
		{namedError[kvstore.Config](&setting.Error{Field: "LeaseTTL", Reason: "r"}), "DISPENSER_LEASE_TTL"},
		{namedError[mysqlstore.Config](&setting.Error{Field: "TablesByHand", Reason: "r"}), "DISPENSER_CREATE_TABLES=false"},
	} {
		var ce *ConfigError
		if !errors.As(c.err, &ce) || ce.Var != c.want || ce.Reason != "r" {
			t.Errorf("%v: want a *ConfigError naming %s", c.err, c.want)
		}
	}
	if err := errors.New("other"); namedError[kvstore.Config](err) != err {
		t.Error("an error that is not a setting's is not returned as it is")
	}
}

// Validate builds nothing (no ring buffer, no padding goroutine: the
// ring's options are checked by uidcore.CachedOptions.Validate) and
// allocates nothing for a valid configuration. Under the race detector,
// whose sync.Pool drops matchers the regexps then allocate again, it
// allocates at most a few hundred bytes a run (the ring it used to build
// was 8 MiB).
func TestValidateAllocatesNothing(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	const runs = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		_ = cfg.Validate()
	}
	runtime.ReadMemStats(&after)
	if perRun := (after.TotalAlloc - before.TotalAlloc) / runs; perRun > 4096 {
		t.Errorf("Validate of the defaults: %d bytes a run, want at most 4096", perRun)
	}
	if n := testing.AllocsPerRun(runs, func() { _ = cfg.Validate() }); n != 0 && !raceEnabled {
		t.Errorf("Validate of the defaults: %v allocations a run, want 0", n)
	}
}
