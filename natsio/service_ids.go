package natsio

import (
	"context"
	"errors"
	"strconv"

	"github.com/nats-io/nats.go/micro"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// The ID endpoints: next, batch and parse.

// next answers one decimal ID; the body is ignored.
func (s *Service) next(ctx context.Context, _ micro.Request, buf []byte) result {
	var id [1]uint64
	if _, err := s.take(ctx, id[:], true); err != nil {
		return result{err: err}
	}
	return replied(strconv.AppendUint(buf, id[0], 10), 1, nil)
}

// take fills ids from the source, waiting for padding as the source does
// when wait is set.
func (s *Service) take(ctx context.Context, ids []uint64, wait bool) (int, error) {
	var (
		got int
		err error
	)
	if wait {
		got, err = s.src.NextN(ctx, ids)
	} else {
		got, err = s.src.TryNextN(ids)
	}
	if err != nil {
		return got, atCapacity(s.src, err)
	}
	return got, nil
}

// binaryHint adds to a text batch refused as too large that binary
// replies, a third the size, would take it: the caller may not know the
// text limit is the payload's, not the configured one.
func (s *Service) binaryHint(err error, body []byte, enc protocol.Encoding) error {
	var se *protocol.ServiceError
	limit := maxBatchFor(s.cfg.MaxBatch, s.nc.MaxPayload(), protocol.Binary)
	if enc != protocol.Decimal || !errors.As(err, &se) || limit <= maxBatchFor(s.cfg.MaxBatch, s.nc.MaxPayload(), enc) {
		return err
	}
	if _, berr := parseCount(body, limit); berr != nil {
		return err
	}
	return badRequest("%s as text (decimal lines); up to %d with the header %s: %s (8 bytes each)", se.Description, limit, protocol.EncodingHeader, protocol.EncodingBinary)
}

// batch answers the number of IDs the body asks for. A batch of more than
// uidcore.SmallTake IDs that the ring cannot fill at once waits for the
// rest in the capacity queue, up to ServiceConfig.CapacityWait.
func (s *Service) batch(ctx context.Context, req micro.Request, buf []byte) result {
	enc := protocol.RequestEncoding(req.Headers())
	n, err := parseCount(req.Data(), maxBatchFor(s.cfg.MaxBatch, s.nc.MaxPayload(), enc))
	if err != nil {
		return result{err: s.binaryHint(err, req.Data(), enc)}
	}
	idp := s.idBuffer(n)
	ids := (*idp)[:n]
	reply := func(got int, err error, buf []byte) result {
		defer s.idBufs.Put(idp)
		if err != nil {
			// IDs taken before the error are dropped: a partial batch would
			// be a silent truncation. Dropped IDs are never reissued.
			return result{err: err}
		}
		return replied(enc.Append(buf, ids), n, nil)
	}
	if n <= uidcore.SmallTake {
		got, err := s.take(ctx, ids, true)
		return reply(got, err, buf)
	}
	got, err := s.take(ctx, ids, false)
	if err != nil || got == n {
		return reply(got, err, buf)
	}
	return result{later: &deferral{wait: func(ctx context.Context, buf []byte) result {
		more, err := s.take(ctx, ids[got:], true)
		return reply(got+more, err, buf)
	}}}
}

// parse answers the fields of an ID as UidGenerator's parseUID JSON.
func (s *Service) parse(_ context.Context, req micro.Request, buf []byte) result {
	id, err := parseIDRequest(req.Data())
	if err != nil {
		return result{err: err}
	}
	parts, err := s.src.Layout().Parse(id)
	if err != nil {
		return result{err: badRequest("%v", err)}
	}
	reply, err := parts.MarshalJSON()
	return replied(append(buf, reply...), 0, err)
}
