// Package sequence hands out named sequences: dense, increasing numbers
// per name (order numbers, invoice numbers), drawn from a store in
// segments the way Meituan Leaf's segment mode does, so that the store
// sees one write per segment rather than one per number.
//
// A [SegmentStore] keeps, per name, the highest number ever handed out
// in a segment (max_id). [SegmentStore.Take] advances it by a step in
// one atomic write and returns the segment [max_id-step, max_id); no two
// takes ever overlap, whichever instance makes them. That one rule is
// what makes the numbers unique across instances, restarts, kills and
// store outages: an instance only hands out numbers of segments it took.
//
// An [Allocator] serves many names from one store:
//   - double buffering: when a name's current segment is 10% used the
//     next one is taken in the background, so a request rarely waits for
//     the store, and a store outage is bridged by the numbers held;
//   - both segments used up and the store unreachable: [ErrUnavailable]
//     naming the store, never a sentinel number in place of one;
//   - adaptive step: a segment that lasted less than Config.Target makes
//     the next step double (up to Config.MaxStep), one that lasted more
//     than twice the target halves it (down to Config.MinStep), so the
//     store sees a bounded rate of writes whatever the demand;
//   - increasing per instance: the segments an allocator takes for a name
//     come from a max_id that only grows while it runs, so its numbers
//     strictly increase; numbers of two instances interleave;
//   - dense on graceful shutdown: [Allocator.Close] gives back the unused
//     rest of each name's segments with a compare-and-set
//     ([SegmentStore.GiveBack]) that succeeds only when no later segment
//     was taken since, so a quiet fleet restarted gracefully continues
//     with no gap. An instance killed without Close loses at most the
//     segments it held: two per name, each at most MaxStep (a batch
//     larger than MaxStep that meets a store failure while it gathers
//     segments may leave its count plus a step held).
//
// The package imports only the standard library and internal/setting
// (the setting error every library shares); the stores live with their clients
// (workerid/mysqlstore, natsio/kvstore) and one conformance suite, package
// sequencetest, runs against each of them.
package sequence
