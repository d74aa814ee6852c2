// Package soak is the fault-injection soak of uid-dispenser: it runs the
// real thing, breaks it on a schedule, records every ID any client
// received and checks at the end that none was handed out twice.
//
// # What runs
//
//   - A three-node NATS cluster with JetStream (nats-server v2.15 embedded
//     in the soak's process, each node with its own name, ports and store,
//     routed to the others), restartable node by node.
//   - A mariadbd of the soak's own (mysqld.go: data directory, port,
//     socket and error log under the work directory, --no-defaults),
//     reached by the dispensers through a TCP proxy the soak can cut; or,
//     when none is installed or Config.ExternalMySQL asks, a fresh
//     database on the server Config.MySQLDSN names (without the faults
//     that need the soak's own).
//   - Three dispensers, each a separate OS process of the real binary
//     (cmd/dispenser), leased worker IDs on MySQL with a short lease TTL
//     and reserve chunk, ID blocks on JetStream (three replicas), each
//     connected to a different node.
//   - Sixteen clients, each with its own connection to one node (spread
//     over the three): uidclient.Client.Next, uidclient.Client.Batch,
//     uidclient.Prefetcher and uidclient.BlockSource, four of each, at a
//     moderate rate; bulk batch clients in a high-rate phase; and
//     sequence clients on the named sequences the dispensers declare
//     (uidclient.Client.SeqNextFrom and SeqBatchFrom).
//
// # Faults, in a cycle that repeats while the run lasts
//
//   - kill9: SIGKILL a dispenser and start it again.
//   - sigterm: stop a dispenser gracefully (it must exit 0 within its
//     shutdown timeout) and start it again.
//
// (Those two restart the first two dispensers in turn; the third is never
// restarted, so that its resources are judged over the whole run.)
//
//   - nats-restart: shut a NATS node down and start it again on the same
//     ports and store.
//   - mysql-cut-short: cut the MySQL proxy for longer than the lease's
//     renewal interval (TTL/3) but well within its expiry.
//   - mysql-kill: SIGKILL mariadbd and start it again on the same data
//     directory, down for well under the lease TTL and the reservation
//     (Config.MySQLDown plus its crash recovery, recorded in the fault's
//     note): the leases must ride it out, as the short cut.
//   - mysql-pause: SIGSTOP mariadbd for the short cut's length, then
//     SIGCONT: connections hang rather than break; the same rule.
//   - mysql-cut-long: cut it for longer than the lease TTL (every lease
//     expires; the dispensers answer 503 until a renewal gets through);
//     meanwhile one dispenser is killed and started again, and must serve
//     once the store is back.
//   - zombie: SIGSTOP the dispenser with the lowest worker ID past its
//     lease expiry, meanwhile restart (SIGKILL) other dispensers until one
//     of them has taken the paused one's worker ID over, then SIGCONT it.
//
// The first cycle always runs to its end, so every kind of fault happens
// at least once however short the run.
//
// # Checks
//
// Claims. A worker ID is held by a sequence of claims (leases) over the
// run; each dispenser logs every claim it makes with the reserved second
// of the previous owner ("after"). Claim k+1 of a worker ID issues only
// seconds after a_{k+1}, the last second claim k reserved, and claim k
// only seconds up to it, so the seconds of a worker ID are partitioned by
// its claims: an ID with worker w and second s belongs to the claim k with
// a_k < s <= a_{k+1}. That attribution needs nothing but the ID and the
// logged "after" values. An ID that falls before every logged claim of its
// worker is a violation (nobody claimed it).
//
// Duplicates. Every ID received by any client, by any call, is collected;
// a value seen twice is a violation, reported with the clients and calls
// that got it.
//
// Order ("IDs from one worker claim strictly increasing"), per client:
//
//   - within one uid.batch reply: strictly increasing (a reply may span
//     the lanes, worker IDs, of one instance);
//   - next, batch and prefetch clients: for each (worker ID, claim), the
//     IDs in the order the client received them are strictly increasing. A
//     client's calls are sequential and a claim's generator hands IDs out
//     in increasing order, so an ID lower than one received before from
//     the same claim is a violation. Different claims of one worker ID may
//     interleave (a paused zombie answering after its successor), which
//     the claim attribution separates.
//   - block clients: a block source validates each block itself (IDs
//     increasing, headers matching) and terminates one that is not; the
//     soak requires that no source met a malformed block. Across blocks the
//     per-claim order is reported, not required: a publish retried after a
//     lost acknowledgement (a NATS node restarting) may store a claim's
//     blocks out of order, which is harmless.
//
// Sequences (seqcheck.go), per name: no number received twice; the
// numbers of one instance (the Uid-Instance header of each reply)
// strictly increasing within a batch, and across calls: a call that
// started after a call answered by the same instance had returned gets
// only higher numbers; and the gap ratio, skipped ÷ handed out over what
// the clients received, reported.
//
// Deadlines. Every call runs under a context with a deadline; it must
// return, with IDs or with an error, by the deadline plus a grace. Errors
// are counted by kind; a kind that is not a clear, expected failure (the
// deadline passing while dispensers were unavailable, naming the last
// failure) is a violation: a 400, a 500, an error no classification
// recognises, a closed source. A failure must also be explained by a
// fault: the call started while a fault lasted or shortly after (the
// deadline plus a second), or a fault began while it ran; a failure in a
// quiet stretch, or during a store outage shorter than the lease TTL (a
// short MySQL cut, a mariadbd kill or pause, which the leases must ride
// out), is a violation. The soak also measures stalls
// of its own process (gaps of more than 0.5 s in a 50 ms ticker: a
// machine too loaded to run it); a call a stall explains (late by no more
// than the stall, or failed across a stall of a second or more) is
// counted apart, not as a violation, since no client could have done
// better.
//
// Processes. A dispenser that exits when it was not told to, writes a
// panic or a data race, does not exit 0 within its shutdown timeout after
// SIGTERM, or is not serving again within a bound after a restart is a
// violation. Each dispenser's open file descriptors and resident memory
// (from /proc) and goroutines (go_goroutines from its /metrics) are
// sampled over its life; so are the soak process's own. Growth without
// bound is a violation: for a process that lived long enough, the lowest
// of its last samples must not exceed the highest of its early samples
// (after a warm-up) by more than a factor and a slack per resource.
//
// Records (chart.go). The run second by second (IDs, sequence numbers,
// calls and failed calls, by when calls returned) goes to series.tsv in
// the work directory, and a chart of it with the faults marked to
// chart.svg; the summary can also be written as Markdown.
//
// The summary prints the IDs checked, the faults injected by kind, the
// duplicates found, the errors by kind and every violation; the run fails
// when there is any.
package soak
