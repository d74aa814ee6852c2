package dashboards

//lint:file-ignore SA1019 the SDK deprecates the classic dashboard model for dashboardv2, but the classic JSON is what Grafana file provisioning (and every Grafana before 12) loads.

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/promcheck"
)

const file = "../../compose/grafana/uid-dispenser.json"

// committed decodes the committed dashboard into the SDK's types.
func committed(t *testing.T) (dashboard.Dashboard, []byte) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	plugins.RegisterDefaultPlugins()
	var d dashboard.Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s does not decode into the grafana-foundation-sdk's Dashboard: %v", file, err)
	}
	return d, b
}

func TestCommittedDashboardIsGenerated(t *testing.T) {
	want, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	_, got := committed(t)
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what dashboards.Build makes: run make dashboards", file)
	}
}

// panel is a dashboard panel's title, description and PromQL queries.
type panel struct {
	title, description string
	exprs              []string
}

func panels(t *testing.T, d dashboard.Dashboard) []panel {
	t.Helper()
	var out []panel
	for _, p := range d.Panels {
		if p.Panel == nil {
			continue
		}
		pn := panel{}
		if p.Panel.Title != nil {
			pn.title = *p.Panel.Title
		}
		if p.Panel.Description != nil {
			pn.description = *p.Panel.Description
		}
		for _, target := range p.Panel.Targets {
			switch q := target.(type) {
			case prometheus.Dataquery:
				pn.exprs = append(pn.exprs, q.Expr)
			case *prometheus.Dataquery:
				pn.exprs = append(pn.exprs, q.Expr)
			default:
				t.Errorf("panel %q: a %T target, want Prometheus queries", pn.title, target)
			}
		}
		out = append(out, pn)
	}
	return out
}

// TestDashboardQueriesNameWhatTheDispenserExports runs a dispenser, scrapes
// its /metrics, and checks every query of the committed dashboard against
// it: it parses as PromQL, names only exported metrics, matches on their
// labels, and filters by the instance, subject-prefix and region
// variables.
func TestDashboardQueriesNameWhatTheDispenserExports(t *testing.T) {
	d, _ := committed(t)
	exported := promcheck.Scrape(t)
	ps := panels(t, d)
	if len(ps) < 20 {
		t.Fatalf("%d panels", len(ps))
	}
	queries := 0
	for _, p := range ps {
		if p.title == "" || len(p.description) < 40 {
			t.Errorf("panel %q has no description worth the name: %q", p.title, p.description)
		}
		if len(p.exprs) == 0 {
			t.Errorf("panel %q has no query", p.title)
		}
		for _, expr := range p.exprs {
			queries++
			if err := exported.Check(expr); err != nil {
				t.Errorf("panel %q: %v", p.title, err)
			}
			// Every selector filters by both variables.
			for _, m := range regexp.MustCompile(`\b(uid_[a-z_]+)\{([^}]*)\}`).FindAllStringSubmatch(expr, -1) {
				if !strings.Contains(m[2], `instance=~"$instance"`) || !strings.Contains(m[2], `subject_prefix=~"$prefix"`) || !strings.Contains(m[2], `uid_region=~"$region"`) {
					t.Errorf("panel %q: %s is not filtered by $instance, $prefix and $region", p.title, m[0])
				}
			}
		}
	}
	t.Logf("%d panels, %d queries checked against %d exported series names", len(ps), queries, len(exported))
}

// TestDashboardPanelsCoverTheIssue: the panels operators asked for are
// there, found by title.
func TestDashboardPanelsCoverTheIssue(t *testing.T) {
	d, _ := committed(t)
	titles := map[string]bool{}
	for _, p := range panels(t, d) {
		titles[p.title] = true
	}
	for _, want := range []string{
		"IDs issued per second", "Capacity against demand", "Lanes held", "Throttling", "Replies by outcome",
		"503s by reason", "400s", "Request latency p50", "Request latency p99", "Ring fill", "Lease time remaining",
		"Runway remaining", "Sequence numbers handed out", "Sequence requests waiting for a segment", "IDs taken beyond replies",
		"Segment waits", "Mean segment wait", "Remainder of the current segment", "Blocks stream depth", "Block publishes", "Store pressure",
		"Padding duration",
	} {
		if !titles[want] {
			t.Errorf("no panel %q", want)
		}
	}
}

// TestDashboardVariables: instance, subject prefix and region are variables whose
// own queries read exported series, and the data source is chosen.
func TestDashboardVariables(t *testing.T) {
	d, _ := committed(t)
	exported := promcheck.Scrape(t)
	vars := map[string]dashboard.VariableModel{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v, ok := vars[dsVar]; !ok || v.Type != dashboard.VariableTypeDatasource {
		t.Errorf("no data source variable %q: %+v", dsVar, v)
	}
	labelValues := regexp.MustCompile(`^label_values\((.+), ([a-z_]+)\)$`)
	for _, name := range []string{instVar, prefixVar, regionVar} {
		v, ok := vars[name]
		if !ok {
			t.Errorf("no variable %q", name)
			continue
		}
		if v.Query == nil || v.Query.String == nil {
			t.Errorf("variable %q has no query", name)
			continue
		}
		m := labelValues.FindStringSubmatch(*v.Query.String)
		if m == nil {
			t.Errorf("variable %q: query %q is not label_values(selector, label)", name, *v.Query.String)
			continue
		}
		if err := exported.Check(m[1]); err != nil {
			t.Errorf("variable %q: %v", name, err)
		}
		// The label whose values it lists is one the metric carries.
		metric, _, _ := strings.Cut(m[1], "{")
		if !exported[metric][m[2]] && !slices.Contains(promcheck.TargetLabels, m[2]) {
			t.Errorf("variable %q lists %s, which %s does not carry", name, m[2], metric)
		}
	}
}
