package dispenser

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
	"github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore"
)

// clearEnv unsets every DISPENSER_ variable (and the unprefixed names
// envconfig could fall back to) for the test.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, name := range configVars() {
		for _, v := range []string{EnvPrefix + "_" + name, name} {
			if old, ok := os.LookupEnv(v); ok {
				os.Unsetenv(v)
				t.Cleanup(func() { os.Setenv(v, old) })
			}
		}
	}
}

// configVars lists the configuration's variables without the prefix.
func configVars() []string {
	var names []string
	for _, v := range Variables() {
		names = append(names, strings.TrimPrefix(v.Name, EnvPrefix+"_"))
	}
	return names
}

// configFields lists Config's leaf fields, nested structs walked: what
// the list of variables must cover.
func configFields(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			names = append(names, configFields(f.Type)...)
			continue
		}
		names = append(names, f.Name)
	}
	return names
}

func TestLoadConfigDefaults(t *testing.T) {
	clearEnv(t)
	loadsDefaults(t, "LoadConfig in an empty environment")
}

func TestLoadConfigReadsVariables(t *testing.T) {
	clearEnv(t)
	t.Setenv("DISPENSER_NATS_URL", "nats://a:4222,nats://b:4222")
	t.Setenv("DISPENSER_TIME_BITS", "30")
	t.Setenv("DISPENSER_WORKER_BITS", "11")
	t.Setenv("DISPENSER_EPOCH", "2020-06-01T00:00:00+02:00")
	t.Setenv("DISPENSER_MAX_AHEAD", "-1s")
	t.Setenv("DISPENSER_WORKER_MODE", "disposable")
	t.Setenv("DISPENSER_NATS_PING_INTERVAL", "2s")
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.connConfig(cfg.NATSURL, "", nil).PingInterval; got != 2*time.Second {
		t.Fatalf("the connection pings every %v, want DISPENSER_NATS_PING_INTERVAL's 2s", got)
	}
	if cfg.NATSURL != "nats://a:4222,nats://b:4222" || cfg.TimeBits != 30 || cfg.WorkerBits != 11 || cfg.MaxAhead != -time.Second || cfg.WorkerMode != workerid.ModeDisposable {
		t.Fatalf("%+v", cfg)
	}
	if got := cfg.Layout().String(); got != "30/11/22@2020-05-31T22:00:00Z" {
		t.Fatalf("layout %s", got)
	}
	if opts := cfg.cachedOptions(nil, nil, nil); opts.MaxAhead >= 0 {
		t.Fatalf("negative MAX_AHEAD gave %v, want no bound", opts.MaxAhead)
	}
}

func TestInvalidValuesNameTheVariable(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"DISPENSER_TIME_BITS", "many", "DISPENSER_TIME_BITS"},
		{"DISPENSER_TIME_BITS", "32", "DISPENSER_TIME_BITS/WORKER_BITS/SEQ_BITS"},
		{"DISPENSER_SEQ_BITS", "0", "DISPENSER_SEQ_BITS"},
		{"DISPENSER_EPOCH", "yesterday", "DISPENSER_EPOCH"},
		{"DISPENSER_EPOCH", "1960-01-01T00:00:00Z", "DISPENSER_EPOCH"},
		{"DISPENSER_MAX_BATCH", "0", "DISPENSER_MAX_BATCH"},
		{"DISPENSER_MAX_AHEAD", "0s", "DISPENSER_MAX_AHEAD"},
		{"DISPENSER_TAKE_WAIT", "soon", "DISPENSER_TAKE_WAIT"},
		{"DISPENSER_BOOST_POWER", "30", "DISPENSER_BOOST_POWER"},
		{"DISPENSER_RING_MEMORY", "100", "DISPENSER_RING_MEMORY"},
		{"DISPENSER_MAX_LANES", "0", "DISPENSER_MAX_LANES"},
		{"DISPENSER_EPOCH", "2999-01-01T00:00:00Z", "DISPENSER_EPOCH"},
		{"DISPENSER_RUNWAY_WARNING", "69y", "DISPENSER_RUNWAY_WARNING"},
		{"DISPENSER_PADDING_FACTOR", "101", "DISPENSER_PADDING_FACTOR"},
		{"DISPENSER_QUEUE_GROUP", "a b", "DISPENSER_QUEUE_GROUP"},
		{"DISPENSER_SUBJECT_PREFIX", "uid.>", "DISPENSER_SUBJECT_PREFIX"},
		{"DISPENSER_SUBJECT_PREFIX", "a..b", "DISPENSER_SUBJECT_PREFIX"},
		{"DISPENSER_LOG_LEVEL", "loud", "DISPENSER_LOG_LEVEL"},
		{"DISPENSER_LOG_FORMAT", "xml", "DISPENSER_LOG_FORMAT"},
		{"DISPENSER_SHUTDOWN_TIMEOUT", "0s", "DISPENSER_SHUTDOWN_TIMEOUT"},
		{"DISPENSER_NATS_TLS_CERT", "client.pem", "DISPENSER_NATS_TLS_CERT"},
		{"DISPENSER_WORKER_MODE", "borrowed", "DISPENSER_WORKER_MODE"},
		{"DISPENSER_MYSQL_DSN", "root:hunter2@nowhere(", "DISPENSER_MYSQL_DSN"},
		// workerid.Config's settings, named by the library by field.
		{"DISPENSER_LEASE_TTL", "500ms", "DISPENSER_LEASE_TTL"},
		{"DISPENSER_RESERVE_CHUNK", "500ms", "DISPENSER_RESERVE_CHUNK"},
		{"DISPENSER_WORKER_NODE_TABLE", "WORKER_NODE; DROP TABLE x", "DISPENSER_WORKER_NODE_TABLE"},
		{"DISPENSER_WORKER_LEASE_TABLE", "worker_node", "DISPENSER_WORKER_LEASE_TABLE"},
		{"DISPENSER_FLEET_TABLE", "1fleet", "DISPENSER_FLEET_TABLE"},
		{"DISPENSER_SEQUENCE_TABLE", "uid_fleet", "DISPENSER_SEQUENCE_TABLE"},
		{"DISPENSER_WORKER_KV_BUCKET", "a.b", "DISPENSER_WORKER_KV_BUCKET"},
		{"DISPENSER_WORKER_KV_REPLICAS", "6", "DISPENSER_WORKER_KV_REPLICAS"},
		{"DISPENSER_STORE_STARTUP_DEADLINE", "soon", "DISPENSER_STORE_STARTUP_DEADLINE"},
		// A zero the library would read as its default.
		{"DISPENSER_RING_MEMORY", "0", "DISPENSER_RING_MEMORY: 0 or empty"},
		{"DISPENSER_PADDING_FACTOR", "0", "DISPENSER_PADDING_FACTOR: 0 or empty"},
		{"DISPENSER_SEQUENCE_STEP", "0", "DISPENSER_SEQUENCE_STEP: 0 or empty"},
		{"DISPENSER_QUEUE_GROUP", "", "DISPENSER_QUEUE_GROUP: 0 or empty"},
		{"DISPENSER_NATS_PING_INTERVAL", "0s", "DISPENSER_NATS_PING_INTERVAL: 0 or empty"},
		// Rules of uidcore, sequence, natsconn and natsio, named by the table.
		{"DISPENSER_LANE_IDLE", "500ms", "DISPENSER_LANE_IDLE: 500ms: use at least 1s"},
		{"DISPENSER_MAX_LAG", "10ms", "DISPENSER_MAX_LAG: 10ms: use at least 1s"},
		{"DISPENSER_SCHEDULE_INTERVAL", "-1s", "DISPENSER_SCHEDULE_INTERVAL"},
		{"DISPENSER_SEQUENCE_MAX_STEP", "10", "DISPENSER_SEQUENCE_MAX_STEP: 10 is below DISPENSER_SEQUENCE_STEP 1000"},
		{"DISPENSER_SEQUENCE_TARGET", "10ms", "DISPENSER_SEQUENCE_TARGET"},
		{"DISPENSER_NATS_PASSWORD", "hunter2", "DISPENSER_NATS_PASSWORD: set without DISPENSER_NATS_USER"},
		{"DISPENSER_NATS_URL", "http://u:hunter2@a:4222", "DISPENSER_NATS_URL"},
		{"DISPENSER_NATS_PING_INTERVAL", "-2s", "DISPENSER_NATS_PING_INTERVAL: -2s is negative"},
		{"DISPENSER_BLOCKS_REPLICAS", "9", "DISPENSER_BLOCKS_REPLICAS"},
		{"DISPENSER_EMBEDDED_ADDR", "nowhere", "DISPENSER_EMBEDDED_ADDR"},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(tc.name, tc.value)
			_, err := LoadConfig()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want it to name %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error leaks the password: %v", err)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err %T %v is not a ConfigError naming %s", err, err, tc.want)
			}
		})
	}
}

func TestUsageListsEveryVariableWithItsDefault(t *testing.T) {
	var buf bytes.Buffer
	if err := Usage(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lineOf := func(name string) string {
		for l := range strings.SplitSeq(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), name+" ") {
				return l
			}
		}
		return ""
	}
	vars := Variables()
	if fields := configFields(reflect.TypeFor[Config]()); len(vars) != len(fields) {
		t.Fatalf("%d variables listed for %d fields", len(vars), len(fields))
	}
	for _, v := range vars {
		line := lineOf(v.Name)
		if line == "" {
			t.Errorf("usage lacks %s", v.Name)
			continue
		}
		if v.Default != "" && !strings.Contains(line, "default "+v.Default+")") {
			t.Errorf("usage line %q lacks the default %s", line, v.Default)
		}
	}
	for name, def := range map[string]string{
		"DISPENSER_LEASE_TTL": "30s", "DISPENSER_TAKE_WAIT": "800ms", "DISPENSER_EPOCH": "2026-01-01T00:00:00Z", "DISPENSER_WORKER_MODE": "leased",
		"DISPENSER_BLOCKS_BLOCK_SIZE": "32768", "DISPENSER_CREATE_TABLES": "true", "DISPENSER_SEQUENCE_TARGET": "15m", "DISPENSER_RESERVE_CHUNK": "0s", // 0: 1m plus the loss window
	} {
		if line := lineOf(name); !strings.Contains(line, "default "+def+")") {
			t.Errorf("usage line %q lacks the default %s", line, def)
		}
	}
	if !strings.Contains(out, "DISPENSER_MYSQL_DSN") || !strings.Contains(out, "DISPENSER_NATS_URL") {
		t.Fatalf("usage:\n%s", out)
	}
}

// The listed defaults are the defaults: every variable set to the default
// the list gives it loads DefaultConfig, so the reference never says one
// thing while the code does another.
func TestListedDefaultsAreTheDefaults(t *testing.T) {
	clearEnv(t)
	for _, v := range Variables() {
		if v.Default != "" {
			t.Setenv(v.Name, v.Default)
		}
	}
	loadsDefaults(t, "the listed defaults")
}

// loadsDefaults fails the test unless LoadConfig, in the environment the
// test set, gives DefaultConfig (the epoch compared as an instant).
func loadsDefaults(t *testing.T, env string) {
	t.Helper()
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	if !cfg.Epoch.Equal(want.Epoch.Time) {
		t.Fatalf("%s: epoch %v, want %v", env, cfg.Epoch, want.Epoch)
	}
	cfg.Epoch, want.Epoch = Instant{}, Instant{}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("%s: LoadConfig\n got %+v\nwant DefaultConfig %+v", env, cfg, want)
	}
}

// Every layout the generator cannot issue IDs with for the runway-warning
// horizon is refused by Validate, naming the variables, at the edges as
// well: a runway one second shorter than the horizon is refused, one a
// minute longer passes.
func TestValidateRefusesLayoutsThatCannotIssue(t *testing.T) {
	now := time.Now()
	withLayout := func(timeBits, workerBits, seqBits uint, epoch time.Time, warning string) Config {
		c := DefaultConfig()
		c.TimeBits, c.WorkerBits, c.SeqBits, c.Epoch, c.RunwayWarning = timeBits, workerBits, seqBits, Instant{epoch}, warning
		return c
	}
	// An epoch that leaves exactly d of runway to the 30/17/16 layout.
	epochLeaving := func(d time.Duration) time.Time {
		l := withLayout(30, 17, 16, uidcore.DefaultEpoch, "1y").Layout()
		return now.Add(d).Add(-time.Duration(l.MaxDelta()+1) * time.Second).Truncate(time.Second)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" when valid
	}{
		{"default", DefaultConfig(), ""},
		{"epoch a minute ahead", withLayout(31, 16, 16, now.Add(time.Minute), "1y"), "DISPENSER_EPOCH: "},
		{"epoch now", withLayout(31, 16, 16, now.Add(-time.Second), "1y"), ""},
		{"20/27/16 from 2026", withLayout(20, 27, 16, uidcore.DefaultEpoch, "1y"), "ran out at 2026-01-13T03:16:16Z"},
		{"UidGenerator's", withLayout(28, 22, 13, uidcore.UidGeneratorLayout().Epoch, "1y"), "is UidGenerator's layout, for reading its IDs (uid.parse with the header Uid-Layout: uidgenerator, client-demo parse -layout uidgenerator), not for issuing: its time field ran out at 2024-11-20T21:24:16+08:00 (2024-11-20T13:24:16Z)"},
		{"UidGenerator's, no warning", withLayout(28, 22, 13, uidcore.UidGeneratorLayout().Epoch, "0"), "ran out"},
		{"runway seconds short of the horizon", withLayout(30, 17, 16, epochLeaving(24*time.Hour-2*time.Second), "1d"), "within DISPENSER_RUNWAY_WARNING=1d"},
		{"runway a minute beyond the horizon", withLayout(30, 17, 16, epochLeaving(24*time.Hour+time.Minute), "1d"), ""},
		{"more lanes than worker IDs", func() Config { c := DefaultConfig(); c.MaxLanes = 2000; return c }(), "DISPENSER_MAX_LANES"},
		{"ring 65536<<8", func() Config { c := DefaultConfig(); c.BoostPower = 8; return c }(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "uidcore:"):
				t.Fatalf("err %q repeats a package prefix", err)
			}
		})
	}
}

// Variables meant for other programs in the same container, under the
// unprefixed names envconfig would fall back to, change nothing: the
// configuration is the default one. The prefixed names still count.
func TestUnprefixedVariablesAreIgnored(t *testing.T) {
	clearEnv(t)
	for name, value := range map[string]string{
		"MYSQL_DSN": "root:hunter2@tcp(127.0.0.1:1)/other", "LOG_LEVEL": "debug", "NATS_URL": "nats://elsewhere:4222",
		"EPOCH": "not a time", "WORKER_MODE": "disposable", "MAX_BATCH": "7", "BLOCKS_ENABLED": "true",
	} {
		t.Setenv(name, value)
	}
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatalf("LoadConfig read an unprefixed variable: %v", err)
	}
	want := DefaultConfig()
	if cfg.MySQLDSN != "" || cfg.LogLevel != want.LogLevel || cfg.NATSURL != "" || !cfg.Epoch.Equal(want.Epoch.Time) ||
		cfg.WorkerMode != want.WorkerMode || cfg.MaxBatch != want.MaxBatch || cfg.BlocksEnabled {
		t.Fatalf("unprefixed variables changed the configuration: %+v", cfg)
	}
	t.Setenv("DISPENSER_LOG_LEVEL", "debug")
	t.Setenv("DISPENSER_BLOCKS_ENABLED", "true")
	if cfg, err = LoadConfig(); err != nil || cfg.LogLevel != "debug" || !cfg.BlocksEnabled {
		t.Fatalf("prefixed variables: %v %+v", err, cfg)
	}
}

func TestBuildInfoFrom(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name    string
		info    *debug.BuildInfo
		version string
		commit  string
	}{
		{"no build info", nil, "1.0.0", ""},
		{"work tree without VCS", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, "1.0.0", ""},
		{"work tree", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs("0123456789abcdef0123", "false")}, "1.0.0+0123456789ab", "0123456789abcdef0123"},
		{"modified work tree", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs("0123456789abcdef0123", "true")}, "1.0.0+0123456789ab.dirty", "0123456789abcdef0123"},
		{"module version", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.4.2"}}, "1.4.2", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := buildInfoFrom(tc.info)
			if b.Version != tc.version || b.Commit != tc.commit {
				t.Fatalf("%+v, want version %q commit %q", b, tc.version, tc.commit)
			}
			out := b.String()
			if !strings.HasPrefix(out, "dispenser "+tc.version+"\n") || tc.info != nil && !strings.Contains(out, tc.info.GoVersion) {
				t.Fatalf("-version output %q", out)
			}
		})
	}
}

// DISPENSER_LAYOUT names the layout by preset or as T/W/S@epoch, instead
// of the four separate variables, never together with one of them; the
// refusals of a layout given this way name it.
func TestLayoutByName(t *testing.T) {
	for _, tc := range []struct {
		value, want string
	}{
		{"default", uidcore.DefaultLayout().String()},
		{"31/14/18", "31/14/18@2026-01-01T00:00:00Z"},
		{"30/17/16@2020-06-01T00:00:00+02:00", "30/17/16@2020-05-31T22:00:00Z"},
	} {
		clearEnv(t)
		t.Setenv("DISPENSER_LAYOUT", tc.value)
		cfg, err := LoadConfig()
		if err != nil || cfg.Layout().String() != tc.want {
			t.Errorf("DISPENSER_LAYOUT=%s: %v, %v; want %s", tc.value, cfg.Layout(), err, tc.want)
		}
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"DISPENSER_LAYOUT=uidgenerator"}, "DISPENSER_LAYOUT: uidgenerator (28/22/13@2016-05-19T16:00:00Z) is UidGenerator's layout, for reading its IDs"},
		{[]string{"DISPENSER_LAYOUT=snowflake"}, `DISPENSER_LAYOUT: layout "snowflake"`},
		{[]string{"DISPENSER_LAYOUT=31/16/17"}, "DISPENSER_LAYOUT: "},
		{[]string{"DISPENSER_LAYOUT=31/16/16@2999-01-01T00:00:00Z"}, "DISPENSER_LAYOUT: 2999-01-01T00:00:00Z is in the future"},
		{[]string{"DISPENSER_LAYOUT=default", "DISPENSER_EPOCH=2026-01-01T00:00:00Z"}, "DISPENSER_LAYOUT: set together with DISPENSER_EPOCH"},
		{[]string{"DISPENSER_LAYOUT=31/3/29", "DISPENSER_MAX_LANES=16"}, "DISPENSER_MAX_LANES"},
	} {
		clearEnv(t)
		for _, kv := range tc.env {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want %q", tc.env, err, tc.want)
		}
	}
}

// The stores get every worker-ID setting, the instance's logger, and
// name their settings by this configuration's variables (a missing
// table's message says DISPENSER_CREATE_TABLES=false, not TablesByHand).
func TestWorkerIDConfigCarriesEverySetting(t *testing.T) {
	cfg := DefaultConfig()
	m, k := cfg.mysqlConfig(cfg.workerIDConfig(nil)), cfg.kvConfig(cfg.workerIDConfig(nil))
	if want := mysqlstore.DefaultConfig(); m.SettingName == nil || m.LeaseTTL != want.LeaseTTL || m.TablesByHand != want.TablesByHand || m.FleetTable != want.FleetTable {
		t.Fatalf("defaults lost on the way to MySQL: %+v", m)
	}
	if want := kvstore.DefaultConfig(); k.SettingName == nil || k.LeaseTTL != want.LeaseTTL || k.Bucket != want.Bucket || k.Replicas != want.Replicas {
		t.Fatalf("defaults lost on the way to KV: %+v", k)
	}
	cfg.MySQLDSN, cfg.WorkerMode, cfg.LeaseTTL, cfg.CreateTables, cfg.WorkerKVReplicas = "u:p@tcp(db)/x", workerid.ModeDisposable, time.Minute, false, 3
	log := testLogger()
	w := cfg.workerIDConfig(log)
	if m := cfg.mysqlConfig(w); m.DSN != cfg.MySQLDSN || m.Mode != workerid.ModeDisposable || m.LeaseTTL != time.Minute || !m.TablesByHand || m.Logger != log {
		t.Fatalf("mysqlConfig = %+v", m)
	}
	if k := cfg.kvConfig(w); k.Replicas != 3 || k.Mode != workerid.ModeDisposable || k.Logger != log {
		t.Fatalf("kvConfig = %+v", k)
	}
	mw, kw := cfg.mysqlConfig(w).Config, cfg.kvConfig(w).Config
	for _, c := range []struct {
		store       workerid.Config
		field, want string
	}{
		{mw, "TablesByHand", "DISPENSER_CREATE_TABLES=false"},
		{mw, "Mode", "DISPENSER_WORKER_MODE"},
		{mw, "DSN", "DISPENSER_MYSQL_DSN"},
		{kw, "Mode", "DISPENSER_WORKER_MODE"},
		{kw, "Replicas", "DISPENSER_WORKER_KV_REPLICAS"},
	} {
		if got := c.store.Name(c.field); got != c.want {
			t.Errorf("Name(%s) = %s, want %s", c.field, got, c.want)
		}
	}
}

// An unknown DISPENSER_* variable is reported with the closest known one
// when it looks like a misspelling of it, and without one otherwise;
// other programs' variables and known ones are not reported.
func TestUnknownVariablesNameTheClosest(t *testing.T) {
	got := UnknownVariables([]string{
		"DISPENSER_MAXLANES=4", "DISPENSER_FOO=1", "DISPENSER_MAX_LANES=3", "PATH=/bin", "MAXLANES=1",
		"DISPENSER_LEASE_TTLL=3s", "DISPENSER_mysql_dsn=x", "DISPENSER_=",
	})
	want := []UnknownVariable{
		{"DISPENSER_", ""},
		{"DISPENSER_FOO", ""},
		{"DISPENSER_LEASE_TTLL", "DISPENSER_LEASE_TTL"},
		{"DISPENSER_MAXLANES", "DISPENSER_MAX_LANES"},
		{"DISPENSER_mysql_dsn", "DISPENSER_MYSQL_DSN"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("UnknownVariables = %+v\nwant %+v", got, want)
	}
	if s := got[3].String(); s != "DISPENSER_MAXLANES is not a dispenser setting and is ignored; did you mean DISPENSER_MAX_LANES?" {
		t.Fatalf("message %q", s)
	}
	if s := got[1].String(); !strings.Contains(s, "DISPENSER_FOO is not a dispenser setting") || strings.Contains(s, "did you mean") {
		t.Fatalf("message %q", s)
	}
}

// Values that do not decode get a message saying the expected form with
// an example, not Go's parser errors; a plain date is an epoch at
// midnight UTC.
func TestBadValuesSayTheExpectedForm(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"DISPENSER_EPOCH", "yesterday", "RFC 3339, e.g. 2026-01-01T00:00:00Z"},
		{"DISPENSER_EPOCH", "2026-13-01", "RFC 3339, e.g. 2026-01-01T00:00:00Z"},
		{"DISPENSER_LEASE_TTL", "30", `DISPENSER_LEASE_TTL: "30" is not a duration with a unit, e.g. 30s`},
		{"DISPENSER_BLOCKS_ENABLED", "yes", `DISPENSER_BLOCKS_ENABLED: "yes" is not true or false`},
		{"DISPENSER_LOG_LEVEL", "verbose", `DISPENSER_LOG_LEVEL: "verbose" is not a level: use debug, info, warn or error`},
		{"DISPENSER_MAX_LANES", "four", `DISPENSER_MAX_LANES: "four" is not a whole number`},
		{"DISPENSER_TIME_BITS", "-1", `DISPENSER_TIME_BITS: "-1" is not a whole number, 0 or more`},
	} {
		clearEnv(t)
		t.Setenv(tc.name, tc.value)
		_, err := LoadConfig()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v; want it to say %q", tc.name, tc.value, err, tc.want)
			continue
		}
		for _, internal := range []string{"strconv", "time.", "missing unit", "slog:", "parsing time"} {
			if strings.Contains(err.Error(), internal) {
				t.Errorf("%s=%s: %q speaks Go (%s)", tc.name, tc.value, err, internal)
			}
		}
	}
	clearEnv(t)
	t.Setenv("DISPENSER_EPOCH", "2025-06-01")
	cfg, err := LoadConfig()
	if err != nil || !cfg.Epoch.Equal(time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("DISPENSER_EPOCH=2025-06-01: %v, %v; want midnight UTC", cfg.Epoch, err)
	}
}
