package workerid_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

func TestParseRegions(t *testing.T) {
	m, err := workerid.ParseRegions(" west=512-1023 , east=0-511")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.String(); got != "east=0-511,west=512-1023" {
		t.Errorf("canonical form %q, want ascending ranges", got)
	}
	r, err := m.Range("west")
	if err != nil || r != (workerid.WorkerRange{Lo: 512, Hi: 1023}) || r.Len() != 512 {
		t.Errorf("west: %v, %v", r, err)
	}
	for id, want := range map[uint64]string{0: "east", 511: "east", 512: "west", 1023: "west", 1024: ""} {
		if got, _ := m.Of(id); got != want {
			t.Errorf("worker ID %d is of region %q, want %q", id, got, want)
		}
	}
	if err := m.CheckLayout(uidcore.DefaultLayout()); err != nil {
		t.Errorf("default layout: %v", err)
	}
	// Gaps are fine: they are worker IDs kept for regions added later.
	if _, err := workerid.ParseRegions("a=0-99,b=500-599"); err != nil {
		t.Errorf("ranges with a gap: %v", err)
	}
	if z, err := workerid.ParseRegions("  "); err != nil || !z.IsZero() || z.String() != "" {
		t.Errorf("blank map: %v, %v", z, err)
	}
}

func TestParseRegionsErrors(t *testing.T) {
	cases := []struct {
		text    string
		kind    workerid.RegionErrorKind
		mention string
	}{
		{"east=0-511,", workerid.RegionMalformed, "empty entry"},
		{",east=0-511", workerid.RegionMalformed, "empty entry"},
		{"east", workerid.RegionMalformed, "name=lo-hi"},
		{"east=", workerid.RegionMalformed, "lo-hi"},
		{"=0-5", workerid.RegionMalformed, "region name"},
		{"ea st=0-5", workerid.RegionMalformed, "region name"},
		{"east.1=0-5", workerid.RegionMalformed, "region name"},
		{"east=5", workerid.RegionMalformed, "lo-hi"},
		{"east=a-5", workerid.RegionMalformed, "not a worker ID"},
		{"east=-1-5", workerid.RegionMalformed, "not a worker ID"},
		{"east=+1-5", workerid.RegionMalformed, "not a worker ID"},
		{"east=0-99999999999999999999", workerid.RegionMalformed, "not a worker ID"},
		{"east=9-5", workerid.RegionMalformed, "ends before it starts"},
		{"east=0-5,EAST=6-9", workerid.RegionDuplicate, "named twice"},
		{"east=0-511,west=511-1023", workerid.RegionOverlap, "overlaps east=0-511"},
		{"east=0-1023,west=100-200", workerid.RegionOverlap, "overlaps"},
		{strings.Repeat("a", 1100), workerid.RegionMalformed, "more than 1024"},
	}
	for _, c := range cases {
		_, err := workerid.ParseRegions(c.text)
		var re *workerid.RegionError
		if !errors.As(err, &re) {
			t.Errorf("%q: %v, want a *RegionError", c.text, err)
			continue
		}
		if re.Kind != c.kind || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%q: kind %d, %q; want kind %d mentioning %q", c.text, re.Kind, err, c.kind, c.mention)
		}
	}
}

func TestRegionsBeyondLayoutAndMissing(t *testing.T) {
	m, err := workerid.ParseRegions("east=0-511,west=512-1024")
	if err != nil {
		t.Fatal(err)
	}
	err = m.CheckLayout(uidcore.DefaultLayout())
	var re *workerid.RegionError
	if !errors.As(err, &re) || re.Kind != workerid.RegionBeyondLayout || re.Entry != "west=512-1024" || !strings.Contains(err.Error(), "1023") {
		t.Errorf("range past the default layout: %v", err)
	}
	if _, err := m.Range("north"); !errors.As(err, &re) || re.Kind != workerid.RegionMissing || !strings.Contains(err.Error(), "east, west") {
		t.Errorf("missing region: %v", err)
	}
}

// The configuration rules: a region must be in the map, a region needs a
// map, and regions need leased worker IDs; errors name the field and
// unwrap to the *RegionError.
func TestConfigRegions(t *testing.T) {
	m, _ := workerid.ParseRegions("east=0-511,west=512-1023")
	ok := workerid.DefaultConfig()
	ok.Region, ok.Regions = "west", m
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid regions: %v", err)
	}
	if r, err := ok.WorkerRange(uidcore.DefaultLayout()); err != nil || r.Lo != 512 || r.Hi != 1023 {
		t.Errorf("west's range: %v, %v", r, err)
	}
	// The range is checked against the layout the instance claims in.
	small := uidcore.Layout{TimeBits: 52, WorkerBits: 3, SeqBits: 8, Epoch: uidcore.DefaultEpoch}
	var re *workerid.RegionError
	if _, err := ok.WorkerRange(small); !errors.As(err, &re) || re.Kind != workerid.RegionBeyondLayout {
		t.Errorf("range past a 3-bit layout: %v", err)
	}
	none := workerid.DefaultConfig()
	if r, err := none.WorkerRange(uidcore.DefaultLayout()); err != nil || r.Lo != 0 || r.Hi != 1023 {
		t.Errorf("no regions: %v, %v, want every worker ID", r, err)
	}
	cases := []struct {
		name    string
		set     func(*workerid.Config)
		field   string
		mention string
	}{
		{"missing", func(c *workerid.Config) { c.Region = "north" }, "Region", "not in the map"},
		{"unset", func(c *workerid.Config) { c.Region = "" }, "Region", "must name its own"},
		{"no map", func(c *workerid.Config) { c.Regions = workerid.Regions{} }, "Region", "without a map"},
		{"disposable", func(c *workerid.Config) { c.Mode = workerid.ModeDisposable }, "Regions", "leased"},
	}
	for _, c := range cases {
		cfg := ok
		c.set(&cfg)
		err := cfg.Validate()
		var se *setting.Error
		if !errors.As(err, &se) || se.Field != c.field || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: %v, want a *setting.Error of %s mentioning %q", c.name, err, c.field, c.mention)
		}
	}
	cfg := ok
	cfg.Region = "north"
	if err := cfg.Validate(); !errors.As(err, &re) || re.Kind != workerid.RegionMissing {
		t.Errorf("missing region does not unwrap to a RegionError: %v", err)
	}
}

// How many regions the presets hold, as docs/operations.md states: any
// layout with at least one worker bit holds two regions.
func TestRegionsPerPreset(t *testing.T) {
	for _, c := range []struct {
		layout uidcore.Layout
		map2   string
	}{
		{uidcore.DefaultLayout(), "east=0-511,west=512-1023"},
		{uidcore.UidGeneratorLayout(), "east=0-2097151,west=2097152-4194303"},
		// A jssafe-like layout with 6 worker bits (64 worker IDs).
		{uidcore.Layout{TimeBits: 31, WorkerBits: 6, SeqBits: 16, Epoch: uidcore.DefaultEpoch}, "east=0-31,west=32-63"},
		// One worker bit: one worker ID per region.
		{uidcore.Layout{TimeBits: 31, WorkerBits: 1, SeqBits: 16, Epoch: uidcore.DefaultEpoch}, "east=0-0,west=1-1"},
	} {
		m, err := workerid.ParseRegions(c.map2)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.CheckLayout(c.layout); err != nil {
			t.Errorf("%s: two regions %s: %v", c.layout, c.map2, err)
		}
		var total uint64
		for _, r := range m.List() {
			total += r.Range.Len()
		}
		if total != c.layout.MaxWorkerID()+1 {
			t.Errorf("%s: the two regions hold %d worker IDs, want all %d", c.layout, total, c.layout.MaxWorkerID()+1)
		}
	}
}

// FuzzParseRegions: the parser never panics; a map it accepts has no
// overlaps, reads back from its String to the same map, and every
// worker ID of a range is of that region.
func FuzzParseRegions(f *testing.F) {
	for _, s := range []string{"east=0-511,west=512-1023", "a=0-0", "a=0-5,b=6-9,c=100-200", "a=0-5,", "a=5-1", "a=0-5,b=3-9", " x = 1 - 2 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := workerid.ParseRegions(s)
		if err != nil {
			var re *workerid.RegionError
			if !errors.As(err, &re) || re.Kind == 0 {
				t.Fatalf("%q: error %v is not a *RegionError with a kind", s, err)
			}
			return
		}
		list := m.List()
		for i, r := range list {
			if r.Range.Lo > r.Range.Hi {
				t.Fatalf("%q: range %s backwards", s, r.Range)
			}
			if i > 0 && r.Range.Lo <= list[i-1].Range.Hi {
				t.Fatalf("%q: %s overlaps %s", s, r, list[i-1])
			}
			for _, id := range []uint64{r.Range.Lo, r.Range.Hi} {
				if got, _ := m.Of(id); got != r.Name {
					t.Fatalf("%q: worker ID %d is of %q, want %q", s, id, got, r.Name)
				}
			}
		}
		again, err := workerid.ParseRegions(m.String())
		if err != nil || again.String() != m.String() {
			t.Fatalf("%q: canonical form %q reads back as %q, %v", s, m.String(), again.String(), err)
		}
	})
}
