package natsio

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/micro"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/sequence"
)

// The endpoints of the named sequences: <prefix>.seq.<name>.next and
// .batch. Without regions, one wildcard subscription each serves every
// name. In a fleet of regions a sequence lives in its home region's store
// alone, so only the home region's instances may answer it: each
// subscribes next and batch of the names homed in its region, one
// endpoint per name, and NATS routes a request from any other region
// through the gateway to them (no forwarding hop of ours). When none can
// be reached the request meets no responders; every instance answers
// <prefix>.seq.*.home with the name's home, so that a client can say
// which region it could not reach.

// seqEndpoint is one subscription of the sequences.
type seqEndpoint struct {
	name, op, subject string
}

// sequenceEndpoints are the sequence subscriptions this instance makes.
func (s *Service) sequenceEndpoints() []seqEndpoint {
	if s.cfg.Sequences == nil {
		return nil
	}
	prefix := s.cfg.SubjectPrefix
	ops := []seqEndpoint{{name: protocol.EndpointSeqNext, op: protocol.EndpointNext}, {name: protocol.EndpointSeqBatch, op: protocol.EndpointBatch}}
	if s.cfg.SequenceHomes == nil {
		for i := range ops {
			ops[i].subject = protocol.SeqSubject(prefix, "*", ops[i].op)
		}
		return ops
	}
	var out []seqEndpoint
	for _, name := range s.homedHere() {
		for _, e := range ops {
			e.subject = protocol.SeqSubject(prefix, name, e.op)
			out = append(out, e)
		}
	}
	return append(out, seqEndpoint{name: protocol.EndpointSeqHome, op: protocol.EndpointHome, subject: protocol.SeqSubject(prefix, "*", protocol.EndpointHome)})
}

// homedHere are the sequences homed in this instance's region, sorted.
func (s *Service) homedHere() []string {
	var names []string
	for name, home := range s.cfg.SequenceHomes {
		if home == s.cfg.Region {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// homesText is every sequence's home for the metadata: name@home,
// sorted by name.
func (s *Service) homesText() string {
	var homes []string
	for name, home := range s.cfg.SequenceHomes {
		homes = append(homes, name+"@"+home)
	}
	slices.Sort(homes)
	return strings.Join(homes, ",")
}

// addSequenceEndpoints subscribes the sequence endpoints, when
// configured (sequenceEndpoints); next and batch only when serving
// (SetSequencesServing).
func (s *Service) addSequenceEndpoints(svc micro.Service, limits micro.EndpointOpt, maxPayload int64, serving bool) error {
	// The numbers of one instance increase (its segments); the header
	// says which instance answered, so that a client (the soak) can
	// check that across its calls. The micro instance ID, as `nats micro
	// info` lists it.
	headers := micro.Headers{protocol.InstanceHeader: []string{svc.Info().ID}}
	handlers := map[string]struct {
		fn   handlerFunc
		meta map[string]string
	}{
		protocol.EndpointSeqNext: {s.seqNext, map[string]string{"reply": "the sequence's next number, decimal"}},
		protocol.EndpointSeqBatch: {s.seqBatch, map[string]string{
			"reply":            "the sequence's next numbers, increasing: newline-separated decimal, or 8 bytes big-endian each with header " + protocol.EncodingHeader + ": " + protocol.EncodingBinary + ", or runs of consecutive numbers (first, count: 16 bytes) with " + protocol.EncodingRanges,
			"max_batch_binary": strconv.Itoa(maxBatchFor(s.cfg.MaxBatch, maxPayload, protocol.Binary)),
			"max_batch_text":   strconv.Itoa(maxBatchFor(s.cfg.MaxBatch, maxPayload, protocol.Decimal)),
			"max_batch_ranges": strconv.Itoa(maxBatchFor(s.cfg.MaxBatch, maxPayload, protocol.Binary)),
		}},
		protocol.EndpointSeqHome: {s.seqHome, map[string]string{"reply": "the sequence's home region; 404 for a sequence of no region"}},
	}
	for _, e := range s.sequenceEndpoints() {
		if !serving && e.name != protocol.EndpointSeqHome {
			continue // out of the queue group: the home is answered from the configuration
		}
		h := handlers[e.name]
		err := svc.AddEndpoint(e.name, s.handle(e.name, e.subject, h.fn, headers), limits, micro.WithEndpointSubject(e.subject), micro.WithEndpointMetadata(h.meta))
		if err != nil {
			return fmt.Errorf("natsio: add endpoint %s: %w", e.subject, err)
		}
	}
	return nil
}

// sequenceStats are the sequences' state the stats of the seq_next
// endpoint on subject show: every name's on the wildcard, the endpoint's
// own name's on a name's endpoint.
func (s *Service) sequenceStats(subject string) []sequence.Stats {
	if s.cfg.Sequences == nil {
		return nil
	}
	all := s.cfg.Sequences.Stats()
	if s.cfg.SequenceHomes == nil {
		return all
	}
	name := s.seqName(subject)
	return slices.DeleteFunc(all, func(st sequence.Stats) bool { return st.Name != name })
}

// seqHome answers the home region of the subject's sequence.
func (s *Service) seqHome(ctx context.Context, req micro.Request, buf []byte) result {
	name := s.seqRequest(ctx, req)
	home, ok := s.cfg.SequenceHomes[name]
	if !ok {
		return result{err: &sequence.UnknownError{Name: name}}
	}
	return replied(append(buf, home...), 0, nil)
}

// seqName is the sequence a request's subject names:
// <prefix>.seq.<name>.<op>, name one token (the endpoint's wildcard).
func (s *Service) seqName(subject string) string {
	name := strings.TrimPrefix(subject, s.cfg.SubjectPrefix+".seq.")
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[:i]
	}
	return name
}

// seqRequest is the sequence req names, put on its span (tagSequence).
func (s *Service) seqRequest(ctx context.Context, req micro.Request) string {
	name := s.seqName(req.Subject())
	tagSequence(ctx, name)
	return name
}

// seqNext answers the next number of the subject's sequence.
func (s *Service) seqNext(ctx context.Context, req micro.Request, buf []byte) result {
	name := s.seqRequest(ctx, req)
	enc, err := requestEncoding(req.Headers())
	if err != nil {
		return result{err: err}
	}
	return s.seqFill(name, buf, 1, func(buf []byte, n []uint64) []byte { return appendOne(buf, n[0], enc) })
}

// seqBatch answers the number of the subject's sequence's numbers the
// body asks for, all or none.
func (s *Service) seqBatch(ctx context.Context, req micro.Request, buf []byte) result {
	name := s.seqRequest(ctx, req)
	enc, err := requestEncoding(req.Headers())
	if err != nil {
		return result{err: err}
	}
	n, err := parseCountOf(req.Data(), s.seqBatchLimit(enc), "numbers")
	if err != nil {
		return result{err: s.binaryHint(err, req.Data(), enc)}
	}
	return s.seqFill(name, buf, n, enc.Append)
}

// seqBatchLimit is the largest count of a sequence batch in encoding enc.
// Ranges get binary's: a sequence's numbers are dense within a segment,
// so with segments of two numbers or more their runs take at most the
// bytes binary does.
func (s *Service) seqBatchLimit(enc protocol.Encoding) int {
	if enc == protocol.Ranges {
		enc = protocol.Binary
	}
	return maxBatchFor(s.cfg.MaxBatch, s.nc.MaxPayload(), enc)
}

// seqFill takes n numbers of the sequence name and encodes them. When
// the numbers at hand are too few it waits for the store off the
// endpoint's goroutine (segmentWaits), up to the capacity wait.
func (s *Service) seqFill(name string, buf []byte, n int, encode func([]byte, []uint64) []byte) result {
	idp := s.idBuffer(n)
	ok, err := s.cfg.Sequences.TryFill(name, (*idp)[:n])
	if err != nil || ok {
		defer s.idBufs.Put(idp)
		return s.seqReply(buf, (*idp)[:n], err, encode)
	}
	s.idBufs.Put(idp)
	// A name's first numbers here always come this way (none at hand):
	// once it is answered, the metadata learns a name it did not show.
	return result{later: &deferral{segment: true, wait: func(ctx context.Context, buf []byte) result {
		idp := s.idBuffer(n)
		defer s.idBufs.Put(idp)
		return s.seqReply(buf, (*idp)[:n], s.cfg.Sequences.Fill(ctx, name, (*idp)[:n]), encode)
	}, after: func() { s.showSequence(name) }}}
}

// seqReply encodes the numbers of a sequence request, or returns err.
func (s *Service) seqReply(buf []byte, nums []uint64, err error, encode func([]byte, []uint64) []byte) result {
	if err != nil {
		return result{err: err}
	}
	out := encode(buf, nums)
	if int64(len(out)) > s.nc.MaxPayload() {
		// Ranges of numbers from segments of one number each: only binary
		// is sure to fit.
		return result{err: fmt.Errorf("%d numbers take %d bytes as %s, more than the %d a reply holds: ask with %s: %s", len(nums), len(out), protocol.EncodingRanges, s.nc.MaxPayload(), protocol.EncodingHeader, protocol.EncodingBinary)}
	}
	return replied(out, len(nums), nil)
}

// showSequence readvertises the service when its metadata does not list
// name, a sequence it has served.
func (s *Service) showSequence(name string) {
	s.mu.Lock()
	shown := slices.Contains(strings.Split(s.advertised.sequences, ","), name)
	s.mu.Unlock()
	if shown {
		return
	}
	if err := s.Readvertise(); err != nil {
		s.log.Warn("micro metadata not updated with a new sequence", "sequence", name, "err", err)
	}
}
