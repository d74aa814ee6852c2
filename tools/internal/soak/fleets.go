package soak

// fleet is a group of dispensers sharing one ID space: one worker-ID
// store, one subject prefix (so one queue group) and one blocks stream.
// Two fleets run side by side so that both worker-ID stores meet the
// faults. Their ID spaces are separate (each hands out worker IDs from
// 0), so IDs may coincide across fleets: uniqueness, order and claims are
// checked per fleet.
type fleet struct {
	name          string // its subject prefix: <name>.next, <name>.batch
	store         string // where its worker IDs are leased, for people
	queueGroup    string
	blocksStream  string
	blocksSubject string
}

var (
	// mysqlFleet leases worker IDs on MySQL, through the cuttable proxy.
	mysqlFleet = &fleet{name: "uid", store: "MySQL", queueGroup: "uid-dispenser", blocksStream: "UID_BLOCKS", blocksSubject: "uid.blocks"}
	// kvFleet leases worker IDs in a JetStream KV bucket at 3 replicas,
	// whose stream leader the soak kills.
	kvFleet = &fleet{name: "uidkv", store: "JetStream KV", queueGroup: "uidkv-dispenser", blocksStream: "UIDKV_BLOCKS", blocksSubject: "uidkv.blocks"}

	fleets = []*fleet{mysqlFleet, kvFleet}
)

// The KV fleet's worker-ID bucket and the stream behind it.
const (
	kvBucket = "uid_workers"
	kvStream = "KV_" + kvBucket
)

// Dispensers per fleet. The MySQL fleet's are slots 0..2 (d0, d1, d2),
// the KV fleet's come after (k0, k1); k0 reaches NATS only through the
// partition proxy.
const (
	numDispensers   = 3
	numKVDispensers = 2
	partitionedSlot = numDispensers // k0
)

// kvClientEvery: every fourth group of clients (one of each kind) uses
// the KV fleet, a quarter of the load: enough to fault it, little enough
// for two cores.
const kvClientEvery = 4

// clientFleet is the fleet client i (of n ordinary clients) uses; bulk
// clients stay on the MySQL fleet.
func clientFleet(i, n int) *fleet {
	if i < n && (i/int(numKinds))%kvClientEvery == kvClientEvery-1 {
		return kvFleet
	}
	return mysqlFleet
}

// fleetNamed is the fleet called name (the MySQL fleet for an unknown
// name: a client's fleet always comes from fleets).
func fleetNamed(name string) *fleet {
	for _, f := range fleets {
		if f.name == name {
			return f
		}
	}
	return mysqlFleet
}
