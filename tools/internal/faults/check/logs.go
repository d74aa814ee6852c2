package check

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
)

// Log is one dispenser process's log (JSON lines, as
// DISPENSER_LOG_FORMAT=json writes them).
type Log struct {
	Process string // e.g. d1#3
	Path    string
	// Fleet is the process's fleet (its subject prefix): fleets have
	// worker IDs and sequences of their own.
	Fleet string
}

// claim is one owner's hold of a worker ID: it issues only seconds in
// (after, high].
type claim struct {
	fleet   string
	process string
	owner   string
	worker  int64
	after   int64
	high    int64 // the highest second reserved; on release, the last kept
	// durable is the highest second the lease logged durable
	// (lease.durable): since D1' a lease issues only those, so a log
	// that has any lease.durable event bounds its claims by them.
	durable  int64
	released bool
}

func (c claim) String() string {
	return fmt.Sprintf("%s (owner %s) (%d, %d]", c.process, c.owner, c.after, c.high)
}

// segment is numbers first..last of a sequence a store gave an instance.
type segment struct {
	fleet       string
	process     string
	name        string
	first, last int64
	refused     bool // the instance logged it as a regression and handed none out
}

func (s segment) String() string {
	return fmt.Sprintf("%s [%d, %d]", s.process, s.first, s.last)
}

type logFacts struct {
	claims   []claim
	segments []segment
}

// readLogs reads the lease claims and sequence segments of every log and
// counts every event by name.
func readLogs(logs []Log, r *Result) logFacts {
	var facts logFacts
	for _, l := range logs {
		if err := readLog(l, &facts, r); err != nil {
			r.Problems = append(r.Problems, err.Error())
		}
	}
	return facts
}

// line is the attributes of a log line that the checker reads.
type line map[string]json.RawMessage

func (l line) str(key string) (string, bool) {
	raw, ok := l[key]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	return string(raw), true
}

func (l line) num(key string) (int64, bool) {
	raw, ok := l[key]
	if !ok {
		return 0, false
	}
	s := string(bytes.Trim(raw, `"`))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		u, uerr := strconv.ParseUint(s, 10, 64)
		if uerr != nil {
			return 0, false
		}
		n = int64(u >> 1) // beyond int64: never a second or a sequence number in practice
	}
	return n, true
}

func readLog(l Log, facts *logFacts, r *Result) error {
	f, err := os.Open(l.Path)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	defer f.Close()
	// The claim of each worker ID and owner in this process, and the
	// reservations logged before their claim's lease.acquired (the first
	// reservation of a claim is written, and logged, before the claim is).
	type holder struct {
		worker int64
		owner  string
	}
	current := map[holder]int{}
	early := map[holder]int64{}
	earlyDurable := map[holder]int64{}
	logsDurable := false
	// raise raises the bound of h's claim that field picks to reserved,
	// or, before the claim is logged, what pending keeps for it.
	raise := func(h holder, reserved int64, pending map[holder]int64, field func(*claim) *int64) {
		i, held := current[h]
		if !held {
			pending[h] = max(pending[h], reserved)
			return
		}
		bound := field(&facts.claims[i])
		*bound = max(*bound, reserved)
	}
	first := len(facts.claims)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		b := sc.Bytes()
		if len(b) == 0 || b[0] != '{' {
			continue // the Go runtime's own output
		}
		var ln line
		if json.Unmarshal(b, &ln) != nil {
			continue
		}
		name, ok := ln.str(event.Key)
		if !ok {
			continue
		}
		r.Events[name]++
		worker, hasWorker := ln.num(event.AttrWorker)
		owner, hasOwner := ln.str(event.AttrOwner)
		if !hasOwner {
			owner = l.Process
		}
		switch name {
		case event.LeaseAcquired:
			after, okA := ln.num(event.AttrAfter)
			reserved, okR := ln.num(event.AttrReserved)
			if !hasWorker || !okA {
				r.Problems = append(r.Problems, fmt.Sprintf("%s: %s without %s or %s: %s", l.Process, name, event.AttrWorker, event.AttrAfter, b))
				continue
			}
			if !okR {
				reserved = after
			}
			h := holder{worker, owner}
			if e, ok := early[h]; ok {
				reserved = max(reserved, e)
				delete(early, h)
			}
			durable := after
			if e, ok := earlyDurable[h]; ok {
				durable = max(durable, e)
				delete(earlyDurable, h)
			}
			current[h] = len(facts.claims)
			facts.claims = append(facts.claims, claim{fleet: l.Fleet, process: l.Process, owner: owner, worker: worker, after: after, high: reserved, durable: durable})
		case event.LeaseDurable:
			reserved, okR := ln.num(event.AttrReserved)
			if !hasWorker || !okR {
				continue
			}
			logsDurable = true
			raise(holder{worker, owner}, reserved, earlyDurable, func(c *claim) *int64 { return &c.durable })
		case event.LeaseReserved, event.LeaseRecovered:
			reserved, okR := ln.num(event.AttrReserved)
			if !hasWorker || !okR {
				continue
			}
			raise(holder{worker, owner}, reserved, early, func(c *claim) *int64 { return &c.high })
		case event.LeaseReleased:
			h := holder{worker, owner}
			i, held := current[h]
			if !hasWorker || !held {
				continue
			}
			// Released: it says it issued nothing beyond kept, and the
			// next owner may start right after it.
			if kept, ok := ln.num(event.AttrKept); ok {
				facts.claims[i].high = kept
				facts.claims[i].released = true
			} else if reserved, ok := ln.num(event.AttrReserved); ok {
				facts.claims[i].high = max(facts.claims[i].high, reserved)
			}
			delete(current, h)
		case event.SequenceSegment:
			seqName, _ := ln.str(event.AttrName)
			first, okF := ln.num(event.AttrFirst)
			last, okL := ln.num(event.AttrLast)
			if !okF || !okL {
				r.Problems = append(r.Problems, fmt.Sprintf("%s: %s without %s or %s: %s", l.Process, name, event.AttrFirst, event.AttrLast, b))
				continue
			}
			facts.segments = append(facts.segments, segment{fleet: l.Fleet, process: l.Process, name: seqName, first: first, last: last})
		case event.SequenceRegression:
			refuseSegment(facts.segments, l.Process, ln)
		case event.SequenceGivenBack:
			giveBack(facts.segments, l.Process, ln)
		}
	}
	if logsDurable {
		// This dispenser issues only durable seconds (D1'): a claim lost
		// before its first reservation was durable issued nothing.
		for i := first; i < len(facts.claims); i++ {
			if c := &facts.claims[i]; !c.released {
				c.high = min(c.high, c.durable)
			}
		}
	}
	return sc.Err()
}

// refuseSegment marks the segment a sequence.regression event refused:
// the one it names by its first number, else this process's latest of
// that name.
func refuseSegment(segs []segment, process string, ln line) {
	seqName, _ := ln.str(event.AttrName)
	first, byFirst := ln.num(event.AttrFirst)
	for i := len(segs) - 1; i >= 0; i-- {
		s := &segs[i]
		if s.process != process || s.name != seqName || (byFirst && s.first != first) {
			continue
		}
		s.refused = true
		return
	}
}

// giveBack cuts the unused rest a sequence.given_back event names off the
// process's segment it ends: the process handed none of it out, and the
// next segment taken, another process's too, starts at its first number.
// A segment given back whole is left empty (last below first).
func giveBack(segs []segment, process string, ln line) {
	seqName, _ := ln.str(event.AttrName)
	first, okF := ln.num(event.AttrFirst)
	last, okL := ln.num(event.AttrLast)
	if !okF || !okL {
		return
	}
	for i := len(segs) - 1; i >= 0; i-- {
		s := &segs[i]
		if s.process == process && s.name == seqName && s.last == last && s.first <= first {
			s.last = first - 1
			return
		}
	}
}
