// Package promcheck checks PromQL written for the dispenser (the Grafana
// dashboard's queries, the alert rules) against what a running dispenser
// really exports: every expression must parse with the Prometheus parser,
// name only metrics found in a live scrape of /metrics, and match only on
// labels those metrics carry (or that Prometheus adds at scrape time).
//
// A query that names a metric nobody exports draws an empty panel or an
// alert that can never fire; neither shows up until the day it is needed,
// which is why the check runs against a scrape and not a list kept by hand.
package promcheck

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

// TargetLabels are the labels Prometheus attaches to every series of a
// target when it scrapes it: job and instance always, subject_prefix from
// the scrape configurations in compose/prometheus and the Helm chart (the
// dispenser exports no subject prefix; the deployment that sets
// DISPENSER_SUBJECT_PREFIX labels its targets with it).
var TargetLabels = []string{"job", "instance", "subject_prefix"}

// Exported is what one scrape of /metrics holds: each series name (a
// histogram's _bucket, _sum and _count, a counter's _total as written)
// with the labels its samples carry.
type Exported map[string]map[string]bool

// Names lists the series names, sorted.
func (e Exported) Names() []string { return slices.Sorted(maps.Keys(e)) }

// ParseScrape reads a /metrics body in the Prometheus text format.
func ParseScrape(r io.Reader) (Exported, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("promcheck: parse /metrics: %w", err)
	}
	e := Exported{}
	add := func(name string, m *dto.Metric, extra ...string) {
		labels := e[name]
		if labels == nil {
			labels = map[string]bool{}
			e[name] = labels
		}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = true
		}
		for _, l := range extra {
			labels[l] = true
		}
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(name+"_bucket", m, "le")
				add(name+"_sum", m)
				add(name+"_count", m)
			case dto.MetricType_SUMMARY:
				add(name, m, "quantile")
				add(name+"_sum", m)
				add(name+"_count", m)
			default:
				add(name, m)
			}
		}
	}
	return e, nil
}

// promql is the parser with Prometheus's defaults: the stable functions
// only, as a server without feature flags accepts them.
var promql = parser.NewParser(parser.Options{})

// grafanaVariables are the Grafana macros that stand where PromQL wants a
// duration, replaced by one before parsing (a $var inside a label
// matcher's string is valid PromQL as it is).
var grafanaVariables = strings.NewReplacer(
	"$__rate_interval", "5m",
	"$__interval", "1m",
	"$__range", "1h",
)

// Check parses expr and checks every selector in it against e: the metric
// must be exported and each label matched must be one its series carry or
// one of TargetLabels. external names metrics that other exporters provide
// to the same Prometheus (up, probe_success), which are checked for their
// name only.
func (e Exported) Check(expr string, external ...string) error {
	node, err := promql.ParseExpr(grafanaVariables.Replace(expr))
	if err != nil {
		return fmt.Errorf("promcheck: %q does not parse: %w", expr, err)
	}
	var errs []string
	selectors := 0
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		selectors++
		name := vs.Name
		if name == "" {
			errs = append(errs, fmt.Sprintf("selector %s names no metric", vs))
			return nil
		}
		if slices.Contains(external, name) {
			return nil
		}
		labels, ok := e[name]
		if !ok {
			errs = append(errs, fmt.Sprintf("%s is not exported by the dispenser", name))
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel || slices.Contains(TargetLabels, m.Name) {
				continue
			}
			if !labels[m.Name] {
				errs = append(errs, fmt.Sprintf("%s has no label %s (it has %v)", name, m.Name, slices.Sorted(maps.Keys(labels))))
			}
		}
		return nil
	})
	if selectors == 0 {
		errs = append(errs, "no metric selector")
	}
	if len(errs) > 0 {
		return fmt.Errorf("promcheck: %q: %s", expr, strings.Join(errs, "; "))
	}
	return nil
}
