// Package compose holds the Docker deployment of uid-dispenser (Compose
// files, the Dockerfile, NATS and collector configuration, Prometheus with
// the alert rules, Grafana with the dashboard). Its Go test
// loads the files with compose-go, the loader docker compose uses
// (include and extends resolved), and checks that they reference only
// files, services and configuration variables that exist, so they stay
// right without a Docker engine. compose-go is imported by that test
// only: no binary links it.
package compose
