package sequence

import (
	"context"
	"errors"
	"fmt"
)

// Segment is the numbers [From, To) of a sequence.
type Segment struct {
	From, To uint64
	// Behind is how far the store's counter was below the floor the take
	// asked for (0: not below): the store had forgotten allocations it
	// acknowledged. The segment starts at the floor all the same.
	Behind uint64
}

// Len is how many numbers the segment holds.
func (s Segment) Len() uint64 { return s.To - s.From }

func (s Segment) String() string { return fmt.Sprintf("[%d, %d)", s.From, s.To) }

// SegmentStore keeps the sequences. Implementations are safe for
// concurrent use by many instances at once.
type SegmentStore interface {
	// Take reserves the next step numbers of name in one atomic write and
	// returns them, starting at the store's counter or at floor, whichever
	// is higher: a counter below floor (the highest number the store gave
	// the caller) means the store forgot allocations it acknowledged, and
	// the take raises it past them in the same write (Segment.Behind says
	// by how much). Concurrent takes, from any instance, never overlap. A
	// step of 0 only raises the counter to floor (never lowers it) and
	// writes nothing when it is not below. An undeclared name is
	// ErrUnknownSequence.
	Take(ctx context.Context, name string, step, floor uint64) (Segment, error)
	// GiveBack returns the unused rest seg of the last segment taken for
	// name: it succeeds (true) only when no segment was taken after seg
	// (the store's max_id is still seg.To), and then lowers max_id to
	// seg.From so the next Take continues from there.
	GiveBack(ctx context.Context, name string, seg Segment) (bool, error)
	// Declare creates name with first as its first number, unless it
	// exists (then nothing changes; created is false).
	Declare(ctx context.Context, name string, first uint64) (created bool, err error)
	// List returns the names of every declared sequence.
	List(ctx context.Context) ([]string, error)
}

// Keeper is a worker-ID store that keeps named sequences beside the
// workers' leases (both of this module's stores): the dispenser opens
// the sequences on the store it claims worker IDs from. A store that is
// not a Keeper serves none.
type Keeper interface {
	// Sequences opens the store's sequences, creating what they need (a
	// table) unless the store's tables are made by hand.
	Sequences(ctx context.Context) (SegmentStore, error)
}

// TakeFrom is the segment of step numbers a store whose counter is cur
// hands out for a take with floor (see SegmentStore.Take); its To is the
// counter's new value. The caller checks it against MaxValue first.
func TakeFrom(cur, floor, step uint64) Segment {
	seg := Segment{From: max(cur, floor)}
	seg.To = seg.From + step
	if floor > cur {
		seg.Behind = floor - cur
	}
	return seg
}

// Errors callers branch on.
var (
	// ErrUnknownSequence: no sequence of that name was declared.
	ErrUnknownSequence = errors.New("unknown sequence")
	// ErrUnavailable: the numbers held are used up and the store does not
	// give a new segment right now; retrying (elsewhere) may help.
	ErrUnavailable = errors.New("sequence store unavailable")
	// ErrClosed: the allocator was closed.
	ErrClosed = errors.New("sequence allocator closed")
	// ErrExhausted: the sequence reached MaxValue.
	ErrExhausted = errors.New("sequence exhausted")
)

// UnknownError is ErrUnknownSequence for one name.
type UnknownError struct{ Name string }

func (e *UnknownError) Error() string        { return fmt.Sprintf("unknown sequence %q", e.Name) }
func (e *UnknownError) Is(target error) bool { return target == ErrUnknownSequence }

// MaxValue is the largest number a sequence hands out: numbers stay
// within a signed 64-bit integer, which every language and database reads.
const MaxValue = 1<<63 - 1
