// Package workerid assigns worker IDs to dispenser instances: the part of
// an ID that keeps two instances from ever issuing the same ID.
//
// Two modes, on either of two stores, each its own package implementing
// uidcore.Assigner with this package's lease machinery:
//
//   - [github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore]: MySQL,
//     UidGenerator's WORKER_NODE table (disposable) and a WORKER_LEASE
//     table (leased); the one library package that imports the MySQL
//     driver.
//   - [github.com/uid-dispenser/uid-dispenser/natsio/kvstore]: a JetStream
//     key-value bucket on the dispenser's NATS server (the zero-config
//     run).
//
// Both pass the same conformance suite, workerid/workeridtest. The modes:
//
//   - Disposable: every start takes a fresh worker ID that is never used
//     again, as Baidu UidGenerator does with its WORKER_NODE table. Simple
//     and compatible with a fleet of UidGenerator instances sharing the
//     table, but worker IDs run out under container churn; an ID beyond
//     the layout's range is refused, never wrapped.
//   - Leased: an instance leases the lowest worker ID that is free or
//     whose lease has expired, renews the lease in the background and
//     reserves, in the store, the seconds it may issue IDs for. A later
//     owner of the same worker ID starts strictly after the reserved
//     second, so two owners of one worker ID can never issue the same ID:
//     not after a restart, not after the clock moves back, not when an old
//     owner is paused or cut off and keeps running.
//
// The lease machinery ([Lease], [LeaseAssigner]) is written once against the
// small [LeaseStore] interface; the MySQL and KV stores only implement its
// three atomic operations. This package links no store's client.
//
// # Fencing
//
// A [Lease] is valid while its local deadline has not passed: the time the
// last successful renewal was sent plus the lease TTL, measured on the
// monotonic clock. Past it, Until returns an error wrapping
// [uidcore.ErrClaimLost] and the generators stop; a later successful
// renewal (the store came back and nobody took the worker ID) resumes the
// lease. When the store says the owner token no longer matches, the lease
// is lost for good: [Lease.Done] is closed and the instance must claim a
// new worker ID and build a new generator.
//
// Uniqueness does not depend on the lease timing: a zombie owner can
// only issue seconds it reserved before it was replaced, and the new owner
// starts after them. The lease only decides when a worker ID may be
// recycled.
//
// # A store that forgets
//
// A store may forget the writes it acknowledged in its last loss window
// W (Config.StoreLossWindow: a power loss under lazy fsync, a lossy
// failover), the claim itself included. A lease therefore issues only
// seconds of its durable reservation ([Lease.Until]): one that a renewal
// started at least W after its write found, without a regression, still
// in the record. What the store forgets was never issued from, so a new
// owner starts right after the reservation it reads, with no margin. A
// fresh lease issues nothing for W and a renewal ([Lease.Ready]); the
// reserve chunk must exceed W + TTL/3 + the generator's ahead bound
// ([Config.CheckChunk]). With W = 0 every acknowledged reservation is
// durable at once. A renewal that finds the record older than what this
// owner had acknowledged is a regression: the lease is lost at once.
package workerid
