// Package dispenser wires one uid-dispenser instance: it reads the
// configuration from DISPENSER_* variables, reaches NATS (starting an
// embedded nats-server when none is configured or listening locally),
// claims a worker ID (MySQL when DISPENSER_MYSQL_DSN is set, else the
// JetStream KV bucket), runs the ring-buffer generator on the claim and
// serves it over NATS with natsio.Service. It replaces a claim that is
// lost for good with a new one, and shuts down gracefully: leave the
// queue group, answer what was delivered, release the worker ID.
//
// cmd/dispenser is its thin main.
package dispenser
