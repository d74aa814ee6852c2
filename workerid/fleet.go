package workerid

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// Fleet is what every instance sharing one worker-ID store must agree
// on, recorded in the store by the first instance: the layout (bits and
// epoch), the worker mode (the two modes' worker IDs overlap), the
// subject prefix (instances of one store serve one set of subjects) and
// the map of regions (two regions that disagree on it could claim the
// same worker IDs from their own stores).
// Instances with another layout on the same store could issue the same
// 64-bit value twice, even with distinct worker IDs.
//
// A fleet changes its layout or epoch only as a new generation: with no
// lease live any more, the record is sealed, every lease is revoked
// (RevokeLeases), and the record is replaced by one whose StartsAfter
// is the last second at which the old generation's largest possible ID
// is not yet exceeded by the new layout's smallest, so every ID of the
// new generation is larger than every ID of the old.
type Fleet struct {
	Generation    int    `json:"generation"`
	Layout        string `json:"layout"` // uidcore.Layout.String()
	WorkerMode    Mode   `json:"worker_mode"`
	SubjectPrefix string `json:"subject_prefix"`
	// StartsAfter: IDs of this generation are issued only for later unix
	// seconds (0 for the first generation).
	StartsAfter int64 `json:"starts_after"`
	// Regions is the fleet's map of regions (Regions.String, canonical),
	// "" for a fleet without regions: records written before regions
	// existed read as that.
	Regions string `json:"regions,omitempty"`
	// Sealed: dispenser -new-generation is revoking this generation's
	// leases (ChangeGeneration); no instance joins the record, and one
	// that just claimed a worker ID gives it up.
	Sealed bool `json:"sealed,omitempty"`
}

// StoredStartsAfter is StartsAfter as the stores keep it: a sealed
// record's below zero (-StartsAfter-1). That was the only mark of a seal
// before the Sealed field, and the stores keep writing it so that
// instances of earlier versions sharing a store still see the seal.
func (f Fleet) StoredStartsAfter() int64 {
	if f.Sealed {
		return -f.StartsAfter - 1
	}
	return f.StartsAfter
}

// SetStoredStartsAfter sets StartsAfter from a stored value
// (StoredStartsAfter's, or one written before the Sealed field): below
// zero it marks the record sealed.
func (f *Fleet) SetStoredStartsAfter(v int64) {
	f.StartsAfter = v
	if v < 0 {
		f.Sealed, f.StartsAfter = true, -v-1
	}
}

// fleetJSON is Fleet without its JSON methods.
type fleetJSON Fleet

// MarshalJSON writes the record as the KV store keeps it: StartsAfter
// stored (StoredStartsAfter), and "sealed".
func (f Fleet) MarshalJSON() ([]byte, error) {
	j := fleetJSON(f)
	j.StartsAfter = f.StoredStartsAfter()
	return json.Marshal(j)
}

// UnmarshalJSON reads a record MarshalJSON wrote, or one written before
// the Sealed field (a seal only in a negative "starts_after").
func (f *Fleet) UnmarshalJSON(data []byte) error {
	var j fleetJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*f = Fleet(j)
	f.SetStoredStartsAfter(j.StartsAfter)
	return nil
}

// FleetStore is implemented by assigners whose store records the fleet
// (both of this module's). The dispenser checks an instance against the
// record before it claims a worker ID.
type FleetStore interface {
	// RecordFleet stores f when the store holds no fleet record yet and
	// returns the record the store holds: f, or the one an earlier
	// instance wrote.
	RecordFleet(ctx context.Context, f Fleet) (Fleet, error)
	// ReplaceFleet writes next in place of the record of old.Generation,
	// failing with ErrFleetChanged when the store holds another record
	// (another instance replaced it first).
	ReplaceFleet(ctx context.Context, old, next Fleet) error
	// LeaseHorizon is the last unix second any lease ever reserved (0
	// without leases) and the number of leases live now.
	LeaseHorizon(ctx context.Context) (lastReserved int64, live int, err error)
	// RevokeLeases frees every lease that has an owner, expired or not,
	// atomically per lease (a renewal lands before it, and is kept, or
	// after it, and fails with ErrLeaseTaken), keeping each reserved
	// second so that a later owner starts after it. It returns how many
	// it freed. A new generation revokes the old one's leases before it
	// reads the horizon: an old instance paused or cut off past its TTL
	// (not live, so not refused) would otherwise renew when it comes
	// back and reserve seconds after the new generation's StartsAfter.
	RevokeLeases(ctx context.Context) (revoked int, err error)
}

// RegionFleetReader is implemented by stores that can read the fleet
// record of another region's store (the KV store, through the
// gateways): at start-up an instance compares the records of the regions
// it reaches with its own configuration.
type RegionFleetReader interface {
	// RegionFleet is the fleet record of region's store; found is false
	// when that store has none yet (the region never started). An error
	// means the store could not be read (say, the region is cut off).
	RegionFleet(ctx context.Context, region string) (f Fleet, found bool, err error)
}

// ErrFleetChanged: the store's fleet record is no longer the one read.
var ErrFleetChanged = errors.New("workerid: the store's fleet record changed meanwhile")

// NextGeneration is the fleet record that lets next's layout follow
// current's on the same store: every ID next can issue from StartsAfter+1
// on is larger than every ID current's instances could have issued up to
// lastSecond (the last second any of them reserved, or could run ahead
// to). It fails when next's layout cannot exceed those IDs at all.
func NextGeneration(current Fleet, next Fleet, lastSecond int64) (Fleet, error) {
	old, err := uidcore.ParseLayout(current.Layout)
	if err != nil {
		return Fleet{}, fmt.Errorf("workerid: the store's fleet record: %w", err)
	}
	nl, err := uidcore.ParseLayout(next.Layout)
	if err != nil {
		return Fleet{}, err
	}
	// Every old ID is below the first ID of the second after lastSecond.
	delta := lastSecond + 1 - old.EpochSecond()
	if delta < 0 {
		delta = 0
	}
	oldShift := old.WorkerBits + old.SeqBits
	newShift := nl.WorkerBits + nl.SeqBits
	if uint64(delta) > old.MaxDelta() {
		// The old generation may have used its time field to the end, up
		// to the largest positive 64-bit ID: nothing is above it.
		return Fleet{}, fmt.Errorf("workerid: the layout %s may have issued IDs up to the end of its time field: no layout can issue IDs above them", old)
	}
	bound := uint64(delta) << oldShift
	// The first second whose sequence-0 ID of worker 0 reaches bound.
	first := (bound + 1<<newShift - 1) >> newShift
	if first > nl.MaxDelta() {
		return Fleet{}, fmt.Errorf("workerid: the layout %s cannot issue IDs above those of %s up to %s: its time field ends first",
			nl, old, time.Unix(lastSecond, 0).UTC().Format(time.RFC3339))
	}
	next.Generation = current.Generation + 1
	next.StartsAfter = max(nl.EpochSecond()+int64(first)-1, current.StartsAfter)
	return next, nil
}

// FleetRemover is implemented by stores whose fleet record can be
// removed (both of this module's), for dispenser -reset-fleet
// (ResetFleet).
type FleetRemover interface {
	// ReadFleet is the store's fleet record, read where writes are
	// decided (the stream leader, the primary); found is false when the
	// store holds none. It writes nothing.
	ReadFleet(ctx context.Context) (f Fleet, found bool, err error)
	// RemoveFleet removes the record old, failing with ErrFleetChanged
	// when the store holds another (compare-and-set).
	RemoveFleet(ctx context.Context, old Fleet) error
}
