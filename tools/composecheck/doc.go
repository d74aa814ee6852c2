// Package composecheck tests the Docker deployment of uid-dispenser in
// ../../compose (Compose files, the Dockerfile, NATS and collector
// configuration, Prometheus with the alert rules, Grafana with the
// dashboard): it loads the files with compose-go, the loader docker
// compose uses (include and extends resolved), and checks that they
// reference only files, services and configuration variables that exist,
// so they stay right without a Docker engine. It lives in the tools
// module so that compose-go is no requirement of the product's go.mod.
package composecheck
