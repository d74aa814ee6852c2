package dispenser

import (
	"errors"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/telemetry/telemetrytest"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

func withRegions(t testing.TB, cfg Config, region, regions string) Config {
	t.Helper()
	m, err := workerid.ParseRegions(regions)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Region, cfg.Regions = region, m
	cfg.MaxLanes = 4
	return cfg
}

// The map of regions is part of the fleet's identity: an instance of
// the region claims inside its range; another map is refused before any
// claim, naming DISPENSER_REGIONS and both maps; a map that only adds a
// region is recorded without a new generation, after which the old map
// is refused; and an instance without regions is refused on a store
// that has them.
func TestFleetRecordsTheMapOfRegions(t *testing.T) {
	const two = "east=0-255,west=512-767" // 256-511 and 768-1023 kept for later regions
	fleetStores(t, func(t *testing.T, url, dsn string) {
		first := start(t, withRegions(t, testConfig(url, dsn), "west", two))
		if w := first.WorkerID(); w < 512 || w > 767 {
			t.Fatalf("west's instance has worker ID %d, outside 512-767", w)
		}
		testenv.CheckDistinct(t, collect(t, client(t, url), 2, 100, nil))
		refused := func(name string, cfg Config, want ...string) {
			t.Helper()
			err := startErr(cfg)
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(ce.Var, "DISPENSER_REGIONS") {
				t.Fatalf("%s: Start = %v, want a *ConfigError of DISPENSER_REGIONS", name, err)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %q does not say %q", name, err, w)
				}
			}
		}
		refused("another range", withRegions(t, testConfig(url, dsn), "west", "east=0-255,west=256-1023"),
			"regions east=0-255,west=256-1023, the fleet's are east=0-255,west=512-767")
		if dsn != "" {
			// On KV an instance without regions uses the bucket without a
			// region's name: another store, which it cannot be checked against.
			refused("no regions", testConfig(url, dsn), "regions (none), the fleet's are "+two)
		}
		// The written order does not matter: the record is canonical.
		second := start(t, withRegions(t, testConfig(url, dsn), "west", "west=512-767, east=0-255"))
		if second.WorkerID() == first.WorkerID() || second.WorkerID() < 512 {
			t.Fatalf("second west instance: worker ID %d (first %d)", second.WorkerID(), first.WorkerID())
		}
		refused("a shrunk range", withRegions(t, testConfig(url, dsn), "west", "east=0-255,west=512-700,north=768-1023"), "the fleet's are "+two)
		// Adding a region from unused worker IDs needs no new generation;
		// the old map is refused from then on.
		three := "east=0-255,north=256-511,west=512-767"
		third := start(t, withRegions(t, testConfig(url, dsn), "west", three))
		if w := third.WorkerID(); w < 512 || w > 767 || w == first.WorkerID() || w == second.WorkerID() {
			t.Fatalf("third west instance: worker ID %d", w)
		}
		refused("the map before north", withRegions(t, testConfig(url, dsn), "west", two), "the fleet's are "+three)
		testenv.CheckDistinct(t, collect(t, client(t, url), 4, 300, nil))
	})
}

// A region's range must fit the layout and hold the instance's lanes;
// the region must be in the map, and regions need leased worker IDs.
func TestRegionsConfigurationErrors(t *testing.T) {
	base := testConfig("nats://127.0.0.1:4222", "")
	cases := []struct {
		region, regions string
		change          func(*Config)
		variable        string
		mention         string
	}{
		{"west", "east=0-511,west=512-2047", nil, "DISPENSER_REGIONS", "largest worker ID 1023"},
		{"north", "east=0-511,west=512-1023", nil, "DISPENSER_REGION", "not in the map"},
		{"", "east=0-511,west=512-1023", nil, "DISPENSER_REGION", "must name its own"},
		{"east", "east=0-1,west=2-1023", nil, "DISPENSER_MAX_LANES", "4 is outside 1..2, the worker IDs of region east (0-1)"},
		{"east", "east=0-511,west=512-1023", func(c *Config) { c.WorkerMode = workerid.ModeDisposable }, "DISPENSER_REGIONS", "leased"},
	}
	for _, c := range cases {
		cfg := withRegions(t, base, c.region, c.regions)
		if c.change != nil {
			c.change(&cfg)
		}
		err := cfg.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Var != c.variable || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s in %s: %v, want a ConfigError of %s mentioning %q", c.region, c.regions, err, c.variable, c.mention)
		}
	}
}

// The rules of sequence homes: in a fleet of regions every sequence
// names its home, a region of the map; without regions none does, and a
// sequence without a home is as before. Each refusal is a ConfigError of
// DISPENSER_SEQUENCES (exit 2) naming the sequence.
func TestSequenceHomesConfiguration(t *testing.T) {
	base := testConfig("nats://127.0.0.1:4222", "")
	for _, c := range []struct {
		regions, sequences string
		mention            string // "": valid
		homes              map[string]string
	}{
		{"", "orders,invoices=5", "", nil},
		{"", "", "", nil},
		{"east=0-511,west=512-1023", "orders@east,invoices@west=5", "", map[string]string{"orders": "east", "invoices": "west"}},
		{"east=0-511,west=512-1023", "", "", map[string]string{}},
		{"east=0-511,west=512-1023", "orders@east,invoices=5", `sequence "invoices" has no home region`, nil},
		{"east=0-511,west=512-1023", "orders@north", `"orders": its home region north is not in DISPENSER_REGIONS east=0-511,west=512-1023`, nil},
		{"east=0-511,west=512-1023", "orders@East", "its home region East is not in", nil},
		{"", "orders@east", `sequence "orders" has the home region east, but DISPENSER_REGIONS is not set`, nil},
		{"east=0-511,west=512-1023", "orders@", "no home region after @", nil},
	} {
		cfg := base
		if c.regions != "" {
			cfg = withRegions(t, base, "east", c.regions)
		}
		cfg.Sequences = c.sequences
		err := cfg.Validate()
		if c.mention == "" {
			if err != nil {
				t.Errorf("%q in %q: %v", c.sequences, c.regions, err)
			} else if got := cfg.sequenceHomes(); !maps.Equal(got, c.homes) || (got == nil) != (c.homes == nil) {
				t.Errorf("%q in %q: homes %v, want %v", c.sequences, c.regions, got, c.homes)
			}
			continue
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Var != "DISPENSER_SEQUENCES" || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%q in %q: %v, want a ConfigError of DISPENSER_SEQUENCES mentioning %q", c.sequences, c.regions, err, c.mention)
		}
	}
}

// An instance of a region says so: uid.parse names the region of an
// ID's worker ID, the micro metadata carries the region and the map, and
// /metrics labels every series (target_info, gauges, counters, the Go
// runtime's) with uid_region.
func TestRegionShownInParseMetadataAndMetrics(t *testing.T) {
	telemetrytest.ClearEnv(t)
	url := testenv.NATS(t, nil).ClientURL()
	cfg := withRegions(t, testConfig(url, ""), "west", "east=0-511,west=512-1023")
	cfg.MetricsAddr = "127.0.0.1:0"
	d := start(t, cfg)
	nc := testConn(t, url)
	l := uidcore.DefaultLayout()
	for worker, region := range map[uint64]string{3: "east", 700: "west"} {
		id, _ := l.Compose(time.Now().Unix(), worker, 1)
		msg, err := nc.Request(cfg.SubjectPrefix+".parse", []byte(strconv.FormatUint(id, 10)), 2*time.Second)
		if err != nil || !strings.Contains(string(msg.Data), `"region":"`+region+`"`) || !strings.Contains(string(msg.Data), `"workerId":"`+strconv.FormatUint(worker, 10)+`"`) {
			t.Fatalf("parse of an ID of worker %d: %v %s, want region %s", worker, err, msg.Data, region)
		}
	}
	msg, err := nc.Request("$SRV.INFO.uid-dispenser."+d.ServiceID(), nil, 2*time.Second)
	if err != nil || !strings.Contains(string(msg.Data), `"region":"west"`) || !strings.Contains(string(msg.Data), `"regions":"east=0-511,west=512-1023"`) {
		t.Fatalf("INFO: %v %s", err, msg.Data)
	}
	_, body, err := telemetrytest.HTTPGet("http://" + d.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, series := range []string{`target_info\{[^}]*uid_region="west"`, `uid_ring_available\{[^}]*uid_region="west"`,
		`uid_requests_total\{[^}]*uid_region="west"`, `go_goroutines\{[^}]*uid_region="west"`} {
		if !regexp.MustCompile(`(?m)^` + series).MatchString(body) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	// Every series, counters and the Go runtime's included, carries the
	// region once: a dashboard across regions filters on it.
	samples := 0
	for line := range strings.Lines(body) {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		samples++
		if n := strings.Count(line, `uid_region="`); n != 1 || !strings.Contains(line, `uid_region="west"`) {
			t.Errorf("a series without the region (or with it %d times): %s", n, line)
		}
	}
	if samples < 50 {
		t.Fatalf("%d samples in /metrics", samples)
	}
}
