// Package alerts tests the Prometheus alert rules of uid-dispenser
// (compose/prometheus/alerts.yml) beyond what promtool checks: every
// expression names only metrics and labels a running dispenser exports
// (or that the scrape and the blackbox exporter add), every rule has a
// for: duration, a severity and a runbook entry in docs/operations.md,
// and alerts_test.yml has a case where each rule fires and one where it
// does not. promtool itself (check rules, test rules) runs from
// scripts/promtool.sh in make ops-check.
package alerts
