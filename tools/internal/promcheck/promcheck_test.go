package promcheck

import (
	"strings"
	"testing"
)

const sample = `# TYPE uid_requests_total counter
uid_requests_total{uid_endpoint="next",uid_outcome="ok"} 3
# TYPE uid_request_duration_seconds histogram
uid_request_duration_seconds_bucket{uid_endpoint="next",le="+Inf"} 3
uid_request_duration_seconds_sum{uid_endpoint="next"} 0.1
uid_request_duration_seconds_count{uid_endpoint="next"} 3
`

func TestCheckRefusesWhatIsNotExported(t *testing.T) {
	e, err := ParseScrape(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{
		`sum by (uid_outcome) (rate(uid_requests_total{instance=~"$instance", subject_prefix=~"$prefix"}[$__rate_interval]))`,
		`histogram_quantile(0.99, sum by (le, uid_endpoint) (rate(uid_request_duration_seconds_bucket{uid_endpoint="next"}[5m])))`,
		`up == 0`,
	} {
		if err := e.Check(ok, "up"); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for expr, want := range map[string]string{
		`rate(uid_request_total[5m])`:                         "uid_request_total is not exported",
		`rate(uid_request_duration_seconds[5m])`:              "uid_request_duration_seconds is not exported",
		`rate(uid_requests_total{uid_reject_reason="x"}[5m])`: "has no label uid_reject_reason",
		`rate(uid_requests_total[5m]`:                         "does not parse",
		`up == 0`:                                             "up is not exported",
		`1 + 1`:                                               "no metric selector",
		`{uid_endpoint="next"}`:                               "names no metric",
	} {
		if err := e.Check(expr); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", expr, err, want)
		}
	}
}

func TestScrapeOfARunningInstance(t *testing.T) {
	e := Scrape(t)
	for _, name := range []string{
		"uid_requests_total", "uid_request_duration_seconds_bucket", "uid_ids_issued_total",
		"uid_lease_remaining_seconds", "uid_ring_fill_ratio", "uid_capacity_per_second", "target_info",
	} {
		if e[name] == nil {
			t.Errorf("the scrape lacks %s; it has %v", name, e.Names())
		}
	}
	if !e["uid_requests_total"]["uid_endpoint"] {
		t.Errorf("uid_requests_total carries no uid_endpoint label: %v", e["uid_requests_total"])
	}
}
