package natsio

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/micro"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
)

// The endpoints of the named sequences: <prefix>.seq.<name>.next and
// .batch, one wildcard subscription each for every name.

// addSequenceEndpoints subscribes the sequence endpoints, when
// configured, to wildcard subjects: every name the store knows is served,
// also one this instance was not configured with.
func (s *Service) addSequenceEndpoints(svc micro.Service, limits micro.EndpointOpt, maxPayload int64) error {
	if s.cfg.Sequences == nil {
		return nil
	}
	// The numbers of one instance increase (its segments); the header
	// says which instance answered, so that a client (the soak) can
	// check that across its calls. The micro instance ID, as `nats micro
	// info` lists it.
	headers := micro.Headers{protocol.InstanceHeader: []string{svc.Info().ID}}
	for _, e := range []struct {
		name, op string
		fn       handlerFunc
		meta     map[string]string
	}{
		{protocol.EndpointSeqNext, protocol.EndpointNext, s.seqNext, map[string]string{"reply": "the sequence's next number, decimal"}},
		{protocol.EndpointSeqBatch, protocol.EndpointBatch, s.seqBatch, map[string]string{
			"reply":            "the sequence's next numbers, increasing: newline-separated decimal, or 8 bytes big-endian each with header " + protocol.EncodingHeader + ": " + protocol.EncodingBinary,
			"max_batch_binary": strconv.Itoa(maxBatchFor(s.cfg.MaxBatch, maxPayload, protocol.Binary)),
			"max_batch_text":   strconv.Itoa(maxBatchFor(s.cfg.MaxBatch, maxPayload, protocol.Decimal)),
		}},
	} {
		subject := protocol.SeqSubject(s.cfg.SubjectPrefix, "*", e.op)
		err := svc.AddEndpoint(e.name, s.handle(e.name, subject, e.fn, headers), limits, micro.WithEndpointSubject(subject), micro.WithEndpointMetadata(e.meta))
		if err != nil {
			return fmt.Errorf("natsio: add endpoint %s: %w", subject, err)
		}
	}
	return nil
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
	n, err := parseCountOf(req.Data(), maxBatchFor(s.cfg.MaxBatch, s.nc.MaxPayload(), enc), "numbers")
	if err != nil {
		return result{err: s.binaryHint(err, req.Data(), enc)}
	}
	return s.seqFill(name, buf, n, enc.Append)
}

// seqFill takes n numbers of the sequence name and encodes them. When
// the numbers at hand are too few it waits for the store off the
// endpoint's goroutine (segmentWaits), up to the capacity wait.
func (s *Service) seqFill(name string, buf []byte, n int, encode func([]byte, []uint64) []byte) result {
	idp := s.idBuffer(n)
	ok, err := s.cfg.Sequences.TryFill(name, (*idp)[:n])
	if err != nil || ok {
		defer s.idBufs.Put(idp)
		return seqReply(buf, (*idp)[:n], err, encode)
	}
	s.idBufs.Put(idp)
	// A name's first numbers here always come this way (none at hand):
	// once it is answered, the metadata learns a name it did not show.
	return result{later: &deferral{segment: true, wait: func(ctx context.Context, buf []byte) result {
		idp := s.idBuffer(n)
		defer s.idBufs.Put(idp)
		return seqReply(buf, (*idp)[:n], s.cfg.Sequences.Fill(ctx, name, (*idp)[:n]), encode)
	}, after: func() { s.showSequence(name) }}}
}

// seqReply encodes the numbers of a sequence request, or returns err.
func seqReply(buf []byte, nums []uint64, err error, encode func([]byte, []uint64) []byte) result {
	if err != nil {
		return result{err: err}
	}
	return replied(encode(buf, nums), len(nums), nil)
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
