package alerts

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/promcheck"
)

const (
	rulesFile = "../../compose/prometheus/alerts.yml"
	testsFile = "../../compose/prometheus/alerts_test.yml"
	runbook   = "../../docs/operations.md"
)

// external are the metrics the rules read that others export to the same
// Prometheus: up (every scrape) and probe_success (the blackbox
// exporter's /readyz probe).
var external = []string{"up", "probe_success"}

type rule struct {
	Alert         string            `yaml:"alert"`
	Expr          string            `yaml:"expr"`
	For           string            `yaml:"for"`
	KeepFiringFor string            `yaml:"keep_firing_for"`
	Labels        map[string]string `yaml:"labels"`
	Annotations   map[string]string `yaml:"annotations"`
}

func decode(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func rules(t *testing.T) []rule {
	t.Helper()
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	decode(t, rulesFile, &f)
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) < 10 {
		t.Fatalf("%d rules in %s", len(out), rulesFile)
	}
	return out
}

// TestRulesReadWhatTheDispenserExports checks every rule's expression
// against a live scrape of a running dispenser.
func TestRulesReadWhatTheDispenserExports(t *testing.T) {
	exported := promcheck.Scrape(t)
	for _, r := range rules(t) {
		if err := exported.Check(r.Expr, external...); err != nil {
			t.Errorf("%s: %v", r.Alert, err)
		}
	}
}

// TestRulesAreComplete: a name, a for: that is a duration (zero only
// where the rule says why it cannot wait), a severity, and annotations
// whose runbook link has an entry in docs/operations.md.
func TestRulesAreComplete(t *testing.T) {
	doc, err := os.ReadFile(runbook)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{2,4} (.+)$`).FindAllStringSubmatch(string(doc), -1) {
		anchors[anchor(m[1])] = true
	}
	seen := map[string]bool{}
	for _, r := range rules(t) {
		if r.Alert == "" {
			t.Errorf("a rule without alert name: %q", r.Expr)
			continue
		}
		if seen[r.Alert] {
			t.Errorf("%s defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
			t.Errorf("%s: for: %q, want a positive duration that avoids flapping", r.Alert, r.For)
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q", r.Alert, s)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s has no %s", r.Alert, a)
			}
		}
		_, frag, ok := strings.Cut(r.Annotations["runbook_url"], "/docs/operations.md#")
		if !ok || frag != strings.ToLower(r.Alert) {
			t.Errorf("%s: runbook_url %q, want docs/operations.md#%s", r.Alert, r.Annotations["runbook_url"], strings.ToLower(r.Alert))
		} else if !anchors[frag] {
			t.Errorf("%s: docs/operations.md has no heading %s (anchor #%s)", r.Alert, r.Alert, frag)
		}
	}
}

// anchor is the fragment GitHub makes of a heading.
func anchor(heading string) string {
	h := strings.ToLower(strings.TrimSpace(heading))
	h = regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(h, "")
	return strings.ReplaceAll(h, " ", "-")
}

// TestEveryRuleIsTestedFiringAndNot: alerts_test.yml loads alerts.yml and
// has, for every rule, a case that expects it to fire and one that expects
// no alert.
func TestEveryRuleIsTestedFiringAndNot(t *testing.T) {
	var f struct {
		RuleFiles          []string `yaml:"rule_files"`
		EvaluationInterval string   `yaml:"evaluation_interval"`
		Tests              []struct {
			Name        string `yaml:"name"`
			Interval    string `yaml:"interval"`
			InputSeries []struct {
				Series string `yaml:"series"`
				Values string `yaml:"values"`
			} `yaml:"input_series"`
			AlertRuleTest []struct {
				EvalTime  string `yaml:"eval_time"`
				Alertname string `yaml:"alertname"`
				ExpAlerts []struct {
					ExpLabels      map[string]string `yaml:"exp_labels"`
					ExpAnnotations map[string]string `yaml:"exp_annotations"`
				} `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	decode(t, testsFile, &f)
	if len(f.RuleFiles) != 1 || f.RuleFiles[0] != "alerts.yml" {
		t.Errorf("alerts_test.yml loads %v, want [alerts.yml]", f.RuleFiles)
	}
	fires, quiet := map[string]int{}, map[string]int{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname]++
			} else {
				quiet[a.Alertname]++
			}
		}
	}
	names := map[string]bool{}
	for _, r := range rules(t) {
		names[r.Alert] = true
		if fires[r.Alert] == 0 {
			t.Errorf("%s: no test where it fires", r.Alert)
		}
		if quiet[r.Alert] == 0 {
			t.Errorf("%s: no test where it does not fire", r.Alert)
		}
	}
	for name := range fires {
		if !names[name] {
			t.Errorf("alerts_test.yml tests %s, which alerts.yml does not define", name)
		}
	}
}
