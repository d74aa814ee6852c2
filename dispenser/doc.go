// Package dispenser wires one uid-dispenser instance: it reads the
// configuration from DISPENSER_* variables, reaches NATS (starting an
// embedded nats-server when none is configured or listening locally),
// claims a worker ID (MySQL when DISPENSER_MYSQL_DSN is set, else the
// JetStream KV bucket), runs the ring-buffer generator on the claim and
// serves it over NATS with natsio.Service. It replaces a claim that is
// lost for good with a new one, swapping the generator on it in under
// the service and the block publisher in one place (generatorSource),
// and shuts down gracefully: leave the queue group, answer what was
// delivered, release the worker ID.
//
// It is the one package that reads the environment. Config names every
// variable (the prefix DISPENSER_, EnvPrefix); the libraries take plain
// structs (mysqlstore.Config or kvstore.Config, each embedding
// workerid.Config, natsio.ServiceConfig, natsio.BlocksConfig,
// sequence.Config, uidcore.CachedOptions) that Config builds, and name a
// bad setting by its field, which Config maps to its variable in its one
// *ConfigError.
//
// cmd/dispenser is its thin main.
package dispenser
