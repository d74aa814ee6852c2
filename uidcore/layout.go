package uidcore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
)

// Layout describes how an ID's bits are split and which instant delta
// seconds count from. The three widths sum to at most 63 (the sign bit is
// always 0): to 63 for the widest IDs, to 53 or less for IDs that a
// JavaScript Number holds exactly (see [JSSafeLayout]). Every ID of a
// layout is at most MaxID, for its whole runway, because the time field
// is the top field.
type Layout struct {
	TimeBits   uint // width of the delta-seconds field
	WorkerBits uint // width of the worker-ID field
	SeqBits    uint // width of the per-second sequence field
	// Epoch is the instant delta seconds count from. Only its instant goes
	// into IDs and String (in UTC, so the fleet identity compares equal
	// whatever offset it was written with); its offset is kept so that
	// messages print the epoch as the operator wrote it (EpochText).
	Epoch time.Time
}

// DefaultEpoch is the epoch of [DefaultLayout].
var DefaultEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// DefaultLayout is 31 bits of seconds (68 years from 2026), 10 bits of
// worker ID (1,024 worker IDs) and 22 bits of sequence (4,194,304 IDs per
// second per worker ID at wall-clock pace). A dispenser fleet has few
// instances that each need many IDs a second; an instance that needs more
// than one worker ID sustains holds several (lanes; see the package
// documentation).
func DefaultLayout() Layout {
	return Layout{TimeBits: 31, WorkerBits: 10, SeqBits: 22, Epoch: DefaultEpoch}
}

// UidGeneratorLayout reproduces Baidu UidGenerator's defaults: 28/22/13 with
// the epoch 2016-05-20 00:00 UTC+8 (unix 1463673600). Its time field ran out
// on 2024-11-20 21:24:15 UTC+8, so it is for parsing existing IDs, not for
// generating new ones.
func UidGeneratorLayout() Layout {
	return Layout{TimeBits: 28, WorkerBits: 22, SeqBits: 13, Epoch: time.Unix(1463673600, 0).In(time.FixedZone("", 8*3600))}
}

// MaxJSSafeID is the largest integer a JavaScript Number (an IEEE 754
// double) holds exactly, 2^53-1: every integer up to it converts to a
// double and back unchanged, and 2^53+1 is the first that does not.
const MaxJSSafeID = 1<<53 - 1

// JSSafeLayout is 31 bits of seconds (68 years from 2026), 6 bits of worker
// ID (64 worker IDs) and 16 bits of sequence (65,536 IDs per second per
// worker ID, 4,194,304 per second for a fleet holding all 64): 53 bits, so
// every ID it can ever issue is at most [MaxJSSafeID] and survives
// JavaScript's Number and JSON.parse. The ten bits it gives up come out of
// the worker and sequence fields, not the runway: a fleet sustains 1/1024
// of the default layout's rate.
func JSSafeLayout() Layout {
	return Layout{TimeBits: 31, WorkerBits: 6, SeqBits: 16, Epoch: DefaultEpoch}
}

// Validate reports the first problem of the layout, as a *setting.Error.
func (l Layout) Validate() error {
	check := func(field string, bits, lo, hi uint) error {
		if bits < lo || bits > hi {
			return &setting.Error{Field: field, Reason: fmt.Sprintf("%d bits is outside %d..%d", bits, lo, hi)}
		}
		return nil
	}
	// At least 20 bits of time (12 days of runway) and at least one bit of
	// worker and sequence; anything smaller is a configuration mistake.
	if err := check("TimeBits", l.TimeBits, 20, 61); err != nil {
		return err
	}
	if err := check("WorkerBits", l.WorkerBits, 1, 42); err != nil {
		return err
	}
	if err := check("SeqBits", l.SeqBits, 1, 42); err != nil {
		return err
	}
	if sum := l.Bits(); sum > 63 {
		return &setting.Error{Field: "Layout", Reason: fmt.Sprintf("TimeBits+WorkerBits+SeqBits = %d+%d+%d = %d, must be at most 63 (the sign bit is always 0; 53 or less keeps IDs JavaScript-safe)", l.TimeBits, l.WorkerBits, l.SeqBits, sum)}
	}
	if l.Epoch.IsZero() {
		return &setting.Error{Field: "Epoch", Reason: "not set"}
	}
	if l.Epoch.Unix() < 0 {
		return &setting.Error{Field: "Epoch", Reason: "before 1970-01-01T00:00:00Z"}
	}
	return nil
}

// String gives the layout as "31/16/16@2026-01-01T00:00:00Z".
func (l Layout) String() string {
	return fmt.Sprintf("%d/%d/%d@%s", l.TimeBits, l.WorkerBits, l.SeqBits, l.Epoch.UTC().Format(time.RFC3339))
}

// Equal reports whether l and o describe the same IDs: the same widths and
// the same epoch instant, whatever offset each epoch was written with.
func (l Layout) Equal(o Layout) bool {
	return l.TimeBits == o.TimeBits && l.WorkerBits == o.WorkerBits && l.SeqBits == o.SeqBits && l.Epoch.Equal(o.Epoch)
}

// EpochText is the epoch in RFC 3339 with the offset it was given in,
// followed by its UTC form when that offset is not UTC's:
// "2016-05-20T00:00:00+08:00 (2016-05-19T16:00:00Z)".
func (l Layout) EpochText() string { return l.TimeText(l.Epoch) }

// TimeText prints t in RFC 3339 in the epoch's offset, followed by its UTC
// form when that offset is not UTC's: operators read times in the zone
// they configured.
func (l Layout) TimeText(t time.Time) string {
	utc := t.UTC().Format(time.RFC3339)
	if _, off := l.Epoch.Zone(); off != 0 && !l.Epoch.IsZero() {
		return t.In(l.Epoch.Location()).Format(time.RFC3339) + " (" + utc + ")"
	}
	return utc
}

// Bits is the number of bits an ID of the layout uses: every ID is below
// 2^Bits.
func (l Layout) Bits() uint { return l.TimeBits + l.WorkerBits + l.SeqBits }

// MaxID is the largest ID the layout can ever issue, 2^Bits-1.
func (l Layout) MaxID() uint64 { return 1<<l.Bits() - 1 }

// JSSafe reports whether every ID of the layout, for its whole runway, is
// at most MaxJSSafeID.
func (l Layout) JSSafe() bool { return l.MaxID() <= MaxJSSafeID }

// MaxDelta is the largest delta-seconds value the time field holds.
func (l Layout) MaxDelta() uint64 { return 1<<l.TimeBits - 1 }

// MaxWorkerID is the largest worker ID the layout holds.
func (l Layout) MaxWorkerID() uint64 { return 1<<l.WorkerBits - 1 }

// MaxSequence is the largest sequence within one second.
func (l Layout) MaxSequence() uint64 { return 1<<l.SeqBits - 1 }

// EpochSecond is the epoch as unix seconds.
func (l Layout) EpochSecond() int64 { return l.Epoch.Unix() }

// LastSecond is the last unix second the time field can hold.
func (l Layout) LastSecond() int64 { return l.EpochSecond() + int64(l.MaxDelta()) }

// RunwayEnd is the first instant the layout can no longer express: from
// then on generation fails with ErrTimeExhausted. Warn operators long before.
func (l Layout) RunwayEnd() time.Time { return time.Unix(l.LastSecond()+1, 0).UTC() }

// Runway is the time left from now until RunwayEnd.
func (l Layout) Runway(now time.Time) time.Duration { return l.RunwayEnd().Sub(now) }

// Errors of Compose and the generators. Test with errors.Is.
var (
	// ErrTimeExhausted: the second is past the time field's end (or before
	// the epoch). Never answered with a wrapped or negative ID.
	ErrTimeExhausted = errors.New("uidcore: time field exhausted")
	// ErrWorkerRange: the worker ID does not fit the worker field.
	ErrWorkerRange = errors.New("uidcore: worker ID out of range")
	// ErrSequenceRange: the sequence does not fit the sequence field.
	ErrSequenceRange = errors.New("uidcore: sequence out of range")
)

// ExhaustedError is the ErrTimeExhausted error with the details.
type ExhaustedError struct {
	Second    int64     // the unix second that did not fit
	RunwayEnd time.Time // the layout's runway end
}

func (e *ExhaustedError) Error() string { return ErrTimeExhausted.Error() + ": " + e.Detail() }

func (e *ExhaustedError) Unwrap() error { return ErrTimeExhausted }

// Detail is the message without its condition.
func (e *ExhaustedError) Detail() string {
	if e.Second < 0 || time.Unix(e.Second, 0).Before(e.RunwayEnd) {
		return fmt.Sprintf("second %s is before the epoch", time.Unix(e.Second, 0).UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("the layout's runway ended at %s", e.RunwayEnd.UTC().Format(time.RFC3339))
}

// shifts returns the bit positions of the time and worker fields.
func (l Layout) timeShift() uint { return l.WorkerBits + l.SeqBits }

// Compose packs a unix second, worker ID and sequence into an ID. Every
// field is range-checked: nothing ever overflows into a neighbour or the
// sign bit.
func (l Layout) Compose(unixSecond int64, workerID, sequence uint64) (uint64, error) {
	base, err := l.secondBase(unixSecond, workerID)
	if err != nil {
		return 0, err
	}
	if sequence > l.MaxSequence() {
		return 0, fmt.Errorf("%w: %d > %d", ErrSequenceRange, sequence, l.MaxSequence())
	}
	return base | sequence, nil
}

// secondBase is the ID of sequence 0 in the given second for the worker.
func (l Layout) secondBase(unixSecond int64, workerID uint64) (uint64, error) {
	delta := unixSecond - l.EpochSecond()
	if delta < 0 || uint64(delta) > l.MaxDelta() {
		return 0, &ExhaustedError{Second: unixSecond, RunwayEnd: l.RunwayEnd()}
	}
	if workerID > l.MaxWorkerID() {
		return 0, fmt.Errorf("%w: %d > %d (layout %s)", ErrWorkerRange, workerID, l.MaxWorkerID(), l)
	}
	return uint64(delta)<<l.timeShift() | workerID<<l.SeqBits, nil
}

// Parts is a parsed ID.
type Parts struct {
	ID       uint64
	Time     time.Time // the ID's second, in UTC
	WorkerID uint64
	Sequence uint64
}

// Parse splits an ID into its fields. It does not check that a worker of
// this layout issued it; an ID with the sign bit set, or above the
// layout's MaxID, is reported as an error because no generator of the
// layout produces one (ParseUID reads UidGenerator's wrapped IDs).
func (l Layout) Parse(id uint64) (Parts, error) {
	if id>>63 != 0 {
		return Parts{}, fmt.Errorf("uidcore: ID %d has the sign bit set: not an ID of any valid layout", id)
	}
	if id > l.MaxID() {
		return Parts{}, fmt.Errorf("uidcore: ID %d is above %d, the largest ID of the %d-bit layout %s", id, l.MaxID(), l.Bits(), l)
	}
	delta := id >> l.timeShift()
	return Parts{
		ID:       id,
		Time:     time.Unix(l.EpochSecond()+int64(delta), 0).UTC(),
		WorkerID: id >> l.SeqBits & l.MaxWorkerID(),
		Sequence: id & l.MaxSequence(),
	}, nil
}

// ParsedJSON is the JSON form of Parts, with the keys and string values of
// UidGenerator's parseUID so tools written for it keep working. The
// timestamp is "yyyy-MM-dd HH:mm:ss" in UTC. Wrapped is set (and the key
// present) only for an ID with the sign bit set, which ParseUID reads as
// UidGenerator did.
type ParsedJSON struct {
	UID       string `json:"UID"`
	Timestamp string `json:"timestamp"`
	WorkerID  string `json:"workerId"`
	Sequence  string `json:"sequence"`
	Wrapped   string `json:"wrapped,omitempty"`
	// Region is the region whose range holds the worker ID: set by a
	// caller that knows the fleet's map of regions (uidcore does not).
	Region string `json:"region,omitempty"`
}

// ParseUID splits id as UidGenerator's parseUID does, for any ID, never
// failing: the time field is everything above the worker field, shifted
// without the sign (Java's >>>), so an ID whose time field ran into the
// sign bit (UidGenerator packs without masking, and its cached generator
// kept handing such IDs out after its 28 bits of seconds ran out on
// 2024-11-20) reads as the second it was really issued in; worker and
// sequence are masked. Such a wrapped ID's UID is the signed long
// UidGenerator handed out, and Wrapped says what happened. For IDs
// without the sign bit it agrees with Parse.
func (l Layout) ParseUID(id uint64) ParsedJSON {
	delta := id >> l.timeShift()
	p := Parts{
		ID:       id,
		Time:     time.Unix(l.EpochSecond()+int64(delta), 0).UTC(),
		WorkerID: id >> l.SeqBits & l.MaxWorkerID(),
		Sequence: id & l.MaxSequence(),
	}
	out := p.JSON()
	if id>>63 != 0 {
		out.UID = strconv.FormatInt(int64(id), 10)
		out.Wrapped = fmt.Sprintf("true: the time field (%d bits) ran into the sign bit at %s; the timestamp is the second it was issued", l.TimeBits, l.TimeText(l.RunwayEnd()))
	}
	return out
}

// JSON returns the UidGenerator-compatible form of p.
func (p Parts) JSON() ParsedJSON {
	return ParsedJSON{
		UID:       strconv.FormatUint(p.ID, 10),
		Timestamp: p.Time.UTC().Format(time.DateTime),
		WorkerID:  strconv.FormatUint(p.WorkerID, 10),
		Sequence:  strconv.FormatUint(p.Sequence, 10),
	}
}

// MarshalJSON encodes p as UidGenerator's parseUID does.
func (p Parts) MarshalJSON() ([]byte, error) { return json.Marshal(p.JSON()) }
