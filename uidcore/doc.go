// Package uidcore is the ID algorithm of uid-dispenser: the 64-bit layout, a
// clock-driven generator and a ring-buffer generator padded ahead of demand.
//
// It is a Go re-implementation of Baidu's UidGenerator with its known
// defects fixed, and it imports only the standard library: worker-ID
// storage, NATS and telemetry live in other packages and reach the
// generators through the small [Claim] and [Observer] interfaces.
//
// # Layout
//
// An ID is 1 sign bit (always 0) | delta seconds since the epoch | worker ID
// | sequence. The three widths are configurable and sum to at most 63
// (63 for the widest IDs; 53 for JavaScript-safe ones, the jssafe preset).
// The default, 31/10/22 from 2026-01-01T00:00:00Z, balances the three
// needs:
//
//	layout (time/worker/seq)  runway       worker IDs  IDs per second per worker
//	31/10/22 (default)        68 years     1,024       4,194,304
//	31/6/16 (jssafe, 53 bits) 68 years     64          65,536
//	31/16/16                  68 years     65,536      65,536
//	31/8/24                   68 years     256         16,777,216
//	32/12/19                  136 years    4,096       524,288
//	28/22/13 (UidGenerator)   8.5 years    4,194,304   8,192
//
// Every bit given to one field halves or doubles another: more worker bits
// survive more instance churn (or use leased worker IDs, which recycle),
// more sequence bits raise the rate a worker sustains without borrowing
// future seconds, more time bits push the runway end further out.
// [UidGeneratorLayout] reproduces UidGenerator's defaults so IDs of an
// existing fleet can be parsed; its time field ran out on 2024-11-20.
//
// # Capacity
//
// A worker ID gives 2^SeqBits IDs per second of real time; anything above
// is borrowed from future seconds, which is only a burst: borrowing
// without bound burns the runway (UidGenerator's cached generator at full
// speed ran an hour ahead in 30 s) and stamps IDs with times that have not
// happened. Sustained capacity is therefore (worker IDs held) × 2^SeqBits
// per second, and the default layout gives each worker ID 4.2 M a second
// because a dispenser fleet has few instances that each need many IDs.
//
// A [CachedGenerator] may hold more than one worker ID, its lanes: given
// an [Assigner] in CachedOptions.Lanes, it claims another lane when takers
// make padding borrow the next second, up to MaxLanes, and gives lanes
// back once demand has not needed them for LaneIdle. Padding fills each
// second lane by lane in ascending worker-ID order, so a generator's IDs
// strictly increase whatever lanes it holds; lanes join and leave only
// between seconds. The ahead bound (MaxAhead, 2 s by default) is then
// what it was meant to be: a cover for the moment a new lane takes to
// arrive, not a store of future seconds.
//
// # Generators
//
// [DefaultGenerator] reads the clock on every call, like UidGenerator's
// DefaultUidGenerator, and is capped at 2^seqBits IDs per second.
//
// [CachedGenerator] keeps a ring buffer that a single padding goroutine
// fills ahead of demand. Padding keeps a logical second that it advances
// when a second's sequence is used up (borrowing future seconds) and
// re-syncs to the wall clock whenever the clock is ahead, so IDs stay
// close to real time at low load and never go backwards when the clock
// does. How far it may borrow is bounded (CachedOptions.MaxAhead); at the
// bound padding pauses and takes drain the buffer: back-pressure instead
// of burning the runway. While it is held there, takes of more than
// [SmallTake] IDs leave a reserve for small ones, so that single IDs keep
// being served while bulk takes wait for the next second.
//
// Bulk takes need not go through the ring: [CachedGenerator.ReserveRuns]
// hands over what the ring holds and reserves the rest straight from the
// lanes as runs of consecutive IDs, on the padding goroutine, under the
// same bounds. The ring stays for single IDs and small batches.
//
// At low load the low bits spread: a second padding re-syncs to the wall
// clock continues the sequence after the last issued ID (modulo a
// sixteenth of a lane-second), instead of every second starting at 0, so
// that id % n spreads at any rate; a second reached by using up the one
// before starts at 0, so the capacity is unchanged.
//
// Neither generator ever returns a negative or wrapped ID: a field that
// does not fit is an error ([ErrTimeExhausted] when the time field is
// full).
package uidcore
