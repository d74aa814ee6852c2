// Package soak is the fault-injection soak of uid-dispenser: it runs the
// real thing, breaks it on a schedule, records every ID any client
// received and checks at the end that none was handed out twice.
//
// # What runs
//
//   - A three-node NATS cluster with JetStream, each node its own
//     nats-server process (the v2.15 binary of the product go.mod, built
//     once into the user's cache by NATSServerBinary) with a configuration
//     file, a store and a log of its own in the work directory, routed to
//     the others with no_advertise (clients learn no URLs from the nodes)
//     and short pings (a silent client or route is dropped after about
//     3 s). A node keeps its ports and store across restarts.
//   - A mariadbd of the soak's own (mysqld.go: data directory, port,
//     socket and error log under the work directory, --no-defaults),
//     reached by the dispensers through a TCP proxy the soak can cut; or,
//     when none is installed or Config.ExternalMySQL asks, a fresh
//     database on the server Config.MySQLDSN names (without the faults
//     that need the soak's own).
//   - Two fleets of dispensers, each dispenser a separate OS process of
//     the real binary (cmd/dispenser), with a short lease TTL and reserve
//     chunk. The MySQL fleet (d0, d1, d2; subjects uid.*, blocks stream
//     UID_BLOCKS) leases worker IDs on MySQL; the KV fleet (k0, k1;
//     subjects uidkv.*, its own queue group and blocks stream UIDKV_BLOCKS)
//     leases them in the JetStream KV bucket uid_workers at three
//     replicas. Blocks streams have three replicas too. Every dispenser is
//     given every node's URL, its own first, except k0, whose only URL is
//     a TCP proxy in front of node 0 (the partition). Both fleets declare
//     the named sequences orders and invoices, each in its own store.
//   - Sixteen clients, each with its own connection (every node's URL):
//     uidclient.Client.Next, uidclient.Client.Batch, uidclient.Prefetcher
//     and uidclient.BlockSource, four of each, at a moderate rate; one of
//     each kind asks the KV fleet, the others the MySQL fleet. Bulk batch
//     clients in a high-rate phase, and sequence clients
//     (uidclient.Client.SeqNextFrom and SeqBatchFrom) on both fleets.
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
//   - nats-kill-kv-leader: SIGKILL the node that leads the KV bucket's
//     stream (KV_uid_workers, its leader found through the JetStream API),
//     keep it down 2 s and start it again on the same store; the note
//     records which node led which stream and when the stream had a
//     leader again.
//   - nats-kill-blocks-leader: the same for the leader of a blocks stream
//     (the MySQL fleet's and the KV fleet's in turn).
//   - nats-pause: SIGSTOP a node (in turn) past the ping timeouts of its
//     routes and clients, then SIGCONT it.
//   - partition-short: cut k0 off from its node (the proxy) for less than
//     its lease TTL.
//   - partition-long: cut it past its lease's expiry; meanwhile restart
//     k1 (SIGKILL) until a new claim has taken one of k0's worker IDs
//     over; after the heal k0 must give that worker ID up (and it may
//     serve only seconds it reserved before: the claim attribution and
//     the duplicate check hold it to that).
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
// Duplicates. Every ID received by any client, by any call, is collected
// per fleet; a value seen twice within a fleet is a violation, reported
// with the clients and calls that got it. The fleets have separate ID
// spaces (each hands out worker IDs from 0), so a value both fleets
// issued is no duplicate; claims and order are attributed per fleet too.
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
// Sequences (seqcheck.go), per name and fleet: no number received twice; the
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
// Fault windows. For each fault, the calls that started from its start to
// a second after its end are counted, with those that failed; the summary
// prints them by kind. A kill -9 of a stream leader's node whose window
// had at least 100 calls may fail at most 1% of them (issue 15: one
// node's loss must not take a fleet out); more is a violation.
//
// Records (chart.go). The run second by second (IDs, sequence numbers,
// calls and failed calls, by when calls returned) goes to series.tsv in
// the work directory, and a chart of it with the faults marked to
// chart.svg; the summary can also be written as Markdown.
//
// The summary prints the IDs checked (by kind and fleet), the sequences'
// figures, the faults injected by kind with their windows, the
// duplicates found, the errors by kind and every violation; the run fails
// when there is any.
//
// # Regions mode
//
// With Config.Regions (`-regions 2`, regions.go) the soak runs issue 21's
// supercluster instead: a 3-node cluster per region (east, west),
// joined by gateways, each node's gateway behind a TCP proxy it
// advertises (so gossip never routes around the proxies), the proxies
// delaying every link (Config.GatewayDelay, 30 ms each way) and cut
// together. The worker IDs are halved between the regions
// (DISPENSER_REGIONS, the same everywhere); each region runs two
// dispensers of each fleet (DISPENSER_REGION), the MySQL fleet on a
// database of the region's own on the soak's mariadbd, the KV fleet on
// the region's bucket uid_workers_<region> (placed in its cluster, three
// replicas), and a Next, a Batch and a Prefetcher client per fleet and
// Config.SeqClients sequence clients, connected to its own region's
// cluster only. One named sequence is homed in each region
// (orders@east, invoices@west, the same DISPENSER_SEQUENCES on every
// dispenser of both fleets) and every region's sequence clients ask for
// all of them: one local, one through the gateway. No blocks, no bulk
// clients (see regions.go). Its faults, in a cycle: region-down
// (every dispenser of a region, the regions in turn, SIGKILLed and
// restarted after Config.RegionDown; its clients must be served through
// the gateway meanwhile), gateway-cut (every gateway link cut until no
// request crosses, for Config.GatewayCut more, then healed),
// nats-kill-node-each (a node of every cluster SIGKILLed at once and
// restarted) and nats-kill-kv-leader (the node leading one region's KV
// stream, the regions in turn). The checks are the ordinary ones (IDs
// unique per fleet across all regions together, order per claim at each
// client, deadlines, unexplained failures, processes), and every fault
// window of at least 100 calls may fail at most 1% of them, judged for
// the ID and the sequence clients apart. The sequences' numbers are
// checked as in the ordinary mode (per name and fleet, across all
// regions together); a sequence call failing with a HomeUnreachableError
// while its home region's dispensers are down, or while the gateways are
// cut for a caller of another region, is the documented unavailability
// (regionseq.go): counted apart, outside the 1% (any other failure of a
// sequence call counts in it). The figures (regionfigures.go) read the
// serving region from each ID's worker field: IDs and calls per region,
// calls served by another region, the latency of local and failed-over
// Next and Batch calls; and count the sequence calls per sequence and
// calling region.
package soak
