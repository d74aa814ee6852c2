// Package event names the lifecycle events the dispenser logs, and the
// attributes they carry, as constants: the contract between the service
// and the tools that read its logs (the soak, the fault harness's checker,
// an operator's log pipeline).
//
// Every log line a tool must recognise carries the attribute Key with one
// of the names below. The human message beside it is free to change; the
// event name and its attributes are not. A renamed or removed constant is
// a breaking change for whoever reads the logs.
//
// The package imports nothing, so that every layer (uidcore's observers,
// workerid, sequence, natsio, dispenser) and the tools module can import it.
package event

// Key is the log attribute that holds an event's name.
const Key = "event"

// Worker-ID leases (workerid). Each carries AttrWorker and AttrOwner (one
// lease's owner: a fingerprint of its token, never the token); the
// seconds are unix seconds.
const (
	// LeaseAcquired: a worker ID was claimed. AttrAfter is the last second
	// this owner must not issue (it issues only seconds above it);
	// AttrReserved the last second reserved so far.
	LeaseAcquired = "lease.acquired"
	// LeaseReserved: a renewal moved the reservation forward to
	// AttrReserved (logged at debug level: one per renewal).
	LeaseReserved = "lease.reserved"
	// LeaseExpired: a renewal missed its deadline; the owner issues only
	// seconds it had reserved (up to AttrReserved) until one gets through.
	LeaseExpired = "lease.expired"
	// LeaseRecovered: renewals work again after LeaseExpired.
	LeaseRecovered = "lease.recovered"
	// LeaseLost: another owner took the worker ID over; this owner issues
	// nothing more under it.
	LeaseLost = "lease.lost"
	// LeaseReleased: the owner gave the worker ID back. AttrReserved is
	// what it had reserved, AttrKept the last second it issued.
	LeaseReleased = "lease.released"
	// LeaseRegression: the store answered with a lease record older than
	// one this owner had written: the store forgot an acknowledged write.
	// The owner stops issuing under the worker ID at once.
	LeaseRegression = "lease.regression"
	// LeaseAwaitingDurable: a starting instance stays out of the queue
	// group (and /readyz says not ready) until its first reservation is
	// durable, a loss window W and a renewal after its claim, and its
	// sequences have settled; "wait" is how long at most.
	LeaseAwaitingDurable = "lease.awaiting_durable"
	// LeaseDurable: the lease's durable reservation (what it may issue)
	// moved up to AttrReserved. The fault harness's checker reads a
	// claim's seconds from it.
	LeaseDurable = "lease.durable"
)

// Lanes: extra worker IDs an instance holds while demand needs them
// (uidcore's lanes, logged by telemetry's observer). AttrWorker each.
const (
	LaneClaimed  = "lane.claimed"
	LaneReturned = "lane.returned"
)

// Named sequences (sequence). AttrName each.
const (
	// SequenceSegment: the store gave this instance the numbers
	// AttrFirst..AttrLast (logged at debug level: one per segment).
	SequenceSegment = "sequence.segment"
	// SequenceRegression: the store gave a segment at or below a number it
	// had given this instance before (AttrRemembered): it forgot an
	// acknowledged allocation. None of the segment is handed out.
	SequenceRegression = "sequence.regression"
	// SequenceRepaired: the store's counter was raised to AttrRemembered.
	SequenceRepaired = "sequence.repaired"
	// SequenceGivenBack: on close, the unused rest AttrFirst..AttrLast of
	// a segment went back to the store: none of it was handed out here,
	// and the next segment taken, by any instance, starts at AttrFirst.
	SequenceGivenBack = "sequence.given_back"
)

// The instance (dispenser).
const (
	// Serving: the instance answers requests under AttrWorker.
	Serving = "service.serving"
	// ClaimLostAtStart: a starting instance's claim of AttrPrevious was
	// lost for good (the store forgot it, or another owner took the
	// worker ID) before its first reservation was durable, so nothing was
	// issued under it: the instance claims a worker ID afresh and starts
	// on that claim (Serving).
	ClaimLostAtStart = "service.claim_lost_at_start"
	// WorkerChanged: the instance serves under a new worker ID
	// (AttrWorker) after losing AttrPrevious for good; its ID endpoints
	// are back in the queue group.
	WorkerChanged = "service.worker_changed"
	// NotIssuing: the instance lost worker ID AttrPrevious for good and
	// cannot issue IDs until a new claim is durable (or one can be made):
	// its ID endpoints left the queue group, /readyz says not ready,
	// until WorkerChanged.
	NotIssuing = "service.not_issuing"
	// SequencesNotServing: a sequence request met the sequence store out
	// of reach (a 503 "sequence store unavailable"): the sequences' next
	// and batch left the queue group until SequencesServing; the IDs are
	// served on (/readyz unchanged).
	SequencesNotServing = "sequence.not_serving"
	// SequencesServing: the store answers again and a take would get a
	// segment at once (after any settle period): the sequences' next and
	// batch are back in the queue group.
	SequencesServing = "sequence.serving"
	// FleetGeneration: the instance refused to go on because the fleet
	// moved to a newer generation.
	FleetGeneration = "fleet.generation"
	// StoreRegression: a store read showed that it forgot an acknowledged
	// write (the specific event above says which record).
	StoreRegression = "store.regression"
	// StoreEpochChanged: the store may have forgotten acknowledged writes
	// without a request failing (the KV stream elected a leader, its last
	// sequence went back, the connection was re-established): sequences
	// settle, leases renew at once.
	StoreEpochChanged = "store.epoch_changed"
)

// The Go client (natsio/uidclient).
const (
	// ClientMoved: the client forced its connection off AttrServer (its
	// URL without user information), where its requests kept ending in no
	// responders: a server cut off from its cluster.
	ClientMoved = "client.moved"
)

// Attribute keys.
const (
	AttrWorker     = "worker_id"
	AttrPrevious   = "previous"
	AttrOwner      = "owner"
	AttrFleet      = "fleet"
	AttrAfter      = "after"
	AttrReserved   = "reserved"
	AttrKept       = "kept"
	AttrName       = "name"
	AttrFirst      = "first"
	AttrLast       = "last"
	AttrRemembered = "remembered"
	AttrServer     = "server"
)
