// Package compose holds the Docker deployment of uid-dispenser (Compose
// files, the Dockerfile, NATS and collector configuration). Its Go test
// checks that the files parse and reference only files, services and
// configuration variables that exist, so they stay right without a Docker
// engine.
package compose
