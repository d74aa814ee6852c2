// Package mysqlstore is the MySQL worker-ID store: [NewAssigner] hands out
// worker IDs in both modes of package workerid, disposable from Baidu
// UidGenerator's exact WORKER_NODE table (a fleet may share it with
// running UidGenerator instances) and leased from a WORKER_LEASE table,
// through workerid's lease machinery. schema.sql is the DDL of both
// tables; the assigner runs the same statements, with the configured
// table names, unless Config.TablesByHand is set.
//
// Expiry is compared on the database server's clock (UTC_TIMESTAMP), so the
// instances' clocks do not matter for it. Errors name the server's
// address, never the password. Its sibling on NATS is
// [github.com/uid-dispenser/uid-dispenser/natsio/kvstore].
package mysqlstore
