package soak

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// callKind is the API a client uses.
type callKind uint8

const (
	kindNext     callKind = iota // uidclient.Client.Next
	kindBatch                    // uidclient.Client.Batch
	kindPrefetch                 // uidclient.Prefetcher.Next
	kindBlocks                   // uidclient.BlockSource.NextN
	kindSeqNext                  // uidclient.Client.SeqNextFrom
	kindSeqBatch                 // uidclient.Client.SeqBatchFrom
)

// numKinds is the number of kinds of the ID clients, which take them in
// turn; the sequence clients come apart.
const numKinds = kindSeqNext

func (k callKind) String() string {
	return [...]string{"next", "batch", "prefetch", "blocks", "seq-next", "seq-batch"}[k]
}

// isSeq tells the kinds that get numbers of a named sequence, not IDs.
func (k callKind) isSeq() bool { return k == kindSeqNext || k == kindSeqBatch }

// callRecord is one call of a client: when, how long, which of the
// client's IDs it produced and how it failed.
type callRecord struct {
	start   time.Duration // since the soak started
	elapsed time.Duration
	off     int   // its IDs are ids[off : off+n]
	n       int32 // IDs received (a prefetch burst or a block take may fail part-way)
	errKind int16 // index into the recorder's error kinds; -1: no error
	inst    int16 // index into the recorder's instances (sequence replies); -1: none
}

// clientLog is everything one client received, in order. Only its
// client's goroutine appends to it; the checks read it after the clients
// stopped.
type clientLog struct {
	id    int
	node  int
	kind  callKind
	fleet string // the fleet it asks, by name; IDs are unique per fleet
	seq   string // the sequence a sequence client asks for
	// region is the region whose cluster the client connects to
	// (regions mode; "" otherwise).
	region string
	ids    []uint64
	calls  []callRecord
}

func (l *clientLog) record(r *recorder, start time.Time, elapsed time.Duration, ids []uint64, err error) {
	l.recordFrom(r, start, elapsed, ids, "", err)
}

// recordFrom is record with the instance that answered a sequence call.
func (l *clientLog) recordFrom(r *recorder, start time.Time, elapsed time.Duration, ids []uint64, instance string, err error) {
	l.calls = append(l.calls, callRecord{
		start:   start.Sub(r.origin),
		elapsed: elapsed,
		off:     len(l.ids),
		n:       int32(len(ids)),
		errKind: r.errorKind(err),
		inst:    r.instance(instance),
	})
	l.ids = append(l.ids, ids...)
}

// callIDs are the IDs call i produced.
func (l *clientLog) callIDs(i int) []uint64 {
	c := l.calls[i]
	return l.ids[c.off : c.off+int(c.n)]
}

// recorder interns the kinds of the errors clients met and the
// instances that answered sequence calls.
type recorder struct {
	origin time.Time

	mu        sync.Mutex
	kinds     []errorKind
	kindByID  map[string]int16
	instances []string
	instByID  map[string]int16
}

// instance interns a sequence reply's instance ("": -1). A run sees a
// few per dispenser process (a new one per worker claim), far below an
// int16's range; past it a reply is recorded without its instance (its
// order unchecked) rather than share an index with another.
func (r *recorder) instance(id string) int16 {
	if id == "" {
		return -1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if i, ok := r.instByID[id]; ok {
		return i
	}
	if len(r.instances) >= math.MaxInt16 {
		return -1
	}
	i := int16(len(r.instances))
	r.instances = append(r.instances, id)
	r.instByID[id] = i
	return i
}

type errorKind struct {
	name    string
	clear   bool   // an expected, self-explaining failure
	example string // the first message of that kind
}

func newRecorder(origin time.Time) *recorder {
	return &recorder{origin: origin, kindByID: map[string]int16{}, instByID: map[string]int16{}}
}

func (r *recorder) errorKind(err error) int16 {
	if err == nil {
		return -1
	}
	name, clear := classify(err)
	r.mu.Lock()
	defer r.mu.Unlock()
	if i, ok := r.kindByID[name]; ok {
		return i
	}
	i := int16(len(r.kinds))
	r.kinds = append(r.kinds, errorKind{name: name, clear: clear, example: err.Error()})
	r.kindByID[name] = i
	return i
}

// kindHomeUnreachable is the error kind of a sequence call whose home
// region could not be reached (uidclient.HomeUnreachableError).
const kindHomeUnreachable = "home region unreachable (no responders)"

// classify names the kind of a client error and says whether it is a
// clear, expected failure: the call's deadline passed while no dispenser
// could answer, and the error says what the last attempt met. Anything
// else (a 400 or 500 reply, a closed source, an error without a known
// cause) is not.
func classify(err error) (kind string, clear bool) {
	var se *uidclient.ServiceError
	hasService := errors.As(err, &se)
	switch {
	case errors.Is(err, uidclient.ErrHomeUnreachable):
		// At once, not at the deadline: only the home region serves a
		// sequence (whether it was down then is seqUnavailable's to say).
		return kindHomeUnreachable, true
	case errors.Is(err, uidclient.ErrPrefetcherClosed), errors.Is(err, uidclient.ErrBlockSourceClosed):
		return "source closed", false
	case errors.Is(err, uidclient.ErrBadRequest):
		return "400 bad request", false
	case hasService && se.Code != protocol.CodeUnavailable:
		return "unexpected reply " + se.Error(), false
	case !errors.Is(err, context.DeadlineExceeded):
		return "unclassified: " + shortMessage(err), false
	case hasService: // 503 at the last attempt
		return "deadline, last: 503 " + descriptionKind(se.Description), true
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "no responders"):
		return "deadline, last: no responders", true
	case strings.Contains(msg, "prefetcher empty"):
		return "deadline, prefetcher empty", true
	case strings.Contains(msg, "attempt(s)"):
		return "deadline, last: attempt timed out", true
	case msg == context.DeadlineExceeded.Error():
		// A block source waiting for a block says nothing more.
		return "deadline, no block", true
	}
	return "deadline, other: " + shortMessage(err), true
}

// descriptionKind is the kind part of a 503 description ("worker claim
// lost: …" → "worker claim lost").
func descriptionKind(d string) string {
	if i := strings.Index(d, ":"); i > 0 {
		return d[:i]
	}
	return d
}

// shortMessage is an error's message with numbers replaced by N (so that
// messages differing only in counts are one kind), at most 100 bytes.
func shortMessage(err error) string {
	var b strings.Builder
	digits := false
	for _, r := range err.Error() {
		if r >= '0' && r <= '9' {
			if !digits {
				b.WriteByte('N')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteRune(r)
	}
	s := b.String()
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return s
}
