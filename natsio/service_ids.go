package natsio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/micro"

	"github.com/uid-dispenser/uid-dispenser/natsio/internal/quote"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// The ID endpoints: next, batch and parse.

// next answers one ID, decimal or (Uid-Encoding: base32) base32; the body
// is ignored.
func (s *Service) next(ctx context.Context, req micro.Request, buf []byte) result {
	enc, err := requestEncoding(req.Headers())
	if err != nil {
		return result{err: err}
	}
	var id [1]uint64
	if _, err := s.take(ctx, id[:], true); err != nil {
		return result{err: err}
	}
	return replied(appendOne(buf, id[0], enc), 1, nil)
}

// appendOne appends the answer of a next request: one ID in base32 when
// asked for, else in decimal (binary too: one ID needs no packing, and
// next has always answered decimal to it).
func appendOne(buf []byte, id uint64, enc protocol.Encoding) []byte {
	if enc == protocol.Base32 {
		return protocol.AppendBase32(buf, id)
	}
	return strconv.AppendUint(buf, id, 10)
}

// requestEncoding is the encoding a request asks for, or the 400 for a
// Uid-Encoding value that names none.
func requestEncoding(h micro.Headers) (protocol.Encoding, error) {
	enc, err := protocol.RequestEncoding(h)
	if err != nil {
		return enc, badRequest("%s", err.Error())
	}
	return enc, nil
}

// requestLayout is the layout a parse request names in its Uid-Layout
// header, or the 400 naming a value that is not one (a bare T/W/S, which
// does not say its epoch, included); named is false without the header.
func requestLayout(h micro.Headers) (layout uidcore.Layout, named bool, err error) {
	v := protocol.HeaderCarrier(h).Get(protocol.LayoutHeader)
	if strings.TrimSpace(v) == "" {
		return uidcore.Layout{}, false, nil
	}
	if !uidcore.HasEpoch(v) {
		// Counting from the fleet's default epoch would read a
		// UidGenerator ID ten years off without a word.
		return uidcore.Layout{}, false, badRequest("%s %q is not a layout: T/W/S needs its epoch, as T/W/S@2016-05-20 (a date is midnight UTC) or T/W/S@2016-05-20T00:00:00+08:00; for UidGenerator's IDs send the preset %s",
			protocol.LayoutHeader, quote.Shorten(v, 80), uidcore.PresetUidGenerator)
	}
	l, err := uidcore.ParseLayout(v)
	if err != nil {
		return uidcore.Layout{}, false, badRequest("%s %q is not a layout: %v", protocol.LayoutHeader, quote.Shorten(v, 80), err)
	}
	return l, true, nil
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
	if enc == protocol.Binary || !errors.As(err, &se) || limit <= maxBatchFor(s.cfg.MaxBatch, s.nc.MaxPayload(), enc) {
		return err
	}
	if _, berr := parseCount(body, limit); berr != nil {
		return err
	}
	return badRequest("%s as text (%s lines); up to %d with the header %s: %s (8 bytes each)", se.Description, enc, limit, protocol.EncodingHeader, protocol.EncodingBinary)
}

// idBatchLimit is the largest count of a uid.batch request in encoding
// enc. Ranges replies are not bounded by the payload: the IDs of one
// instance come in a few runs (one per lane and second), 16 bytes each.
// A source that reserves runs (RunSource) takes up to one lane's second
// of IDs in one request, what any instance can issue within its ahead
// bound, or the configured largest batch if that is more.
func (s *Service) idBatchLimit(enc protocol.Encoding) int {
	if enc != protocol.Ranges {
		return maxBatchFor(s.cfg.MaxBatch, s.nc.MaxPayload(), enc)
	}
	if _, ok := s.src.(RunSource); ok {
		return int(max(uint64(s.cfg.MaxBatch), min(s.src.Layout().MaxSequence()+1, 1<<30)))
	}
	return s.cfg.MaxBatch
}

// reserveBatch answers a ranges batch of n IDs with runs the source
// reserves, without putting each ID through the ring. What it cannot
// reserve at once it waits for in the capacity queue, as batch does.
func (s *Service) reserveBatch(ctx context.Context, src RunSource, n int, buf []byte) result {
	reply := func(runs []uidcore.Run, err error, buf []byte) result {
		if err == nil && !runsIncrease(runs) {
			// The generator was replaced (a lost claim) between the first
			// reservation and the rest: the runs of two worker IDs need
			// not be in order, and a reply must be.
			err = fmt.Errorf("%w: generator replaced during the request", uidcore.ErrClaimLost)
		}
		if err != nil {
			// Runs reserved before the error are dropped, never reissued.
			return result{err: atCapacity(s.src, err)}
		}
		for _, r := range runs {
			buf = protocol.AppendRuns(buf, []protocol.Run{protocol.Run(r)})
		}
		return replied(buf, n, nil)
	}
	runs, got, err := src.ReserveRuns(ctx, nil, uint64(n), false)
	if err != nil || got == uint64(n) {
		return reply(runs, err, buf)
	}
	return result{later: &deferral{wait: func(ctx context.Context, buf []byte) result {
		runs, _, err := src.ReserveRuns(ctx, runs, uint64(n)-got, true)
		return reply(runs, err, buf)
	}}}
}

// batch answers the number of IDs the body asks for. A batch of more than
// uidcore.SmallTake IDs that the ring cannot fill at once waits for the
// rest in the capacity queue, up to ServiceConfig.CapacityWait.
func (s *Service) batch(ctx context.Context, req micro.Request, buf []byte) result {
	enc, err := requestEncoding(req.Headers())
	if err != nil {
		return result{err: err}
	}
	n, err := parseCount(req.Data(), s.idBatchLimit(enc))
	if err != nil {
		return result{err: s.binaryHint(err, req.Data(), enc)}
	}
	if src, ok := s.src.(RunSource); ok && enc == protocol.Ranges && n > uidcore.SmallTake {
		return s.reserveBatch(ctx, src, n, buf)
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

// runsIncrease tells whether each run starts after the previous one's
// last ID.
func runsIncrease(runs []uidcore.Run) bool {
	for i := 1; i < len(runs); i++ {
		if runs[i].First < runs[i-1].First+runs[i-1].Count {
			return false
		}
	}
	return true
}

// parse answers the fields of an ID as UidGenerator's parseUID JSON: with
// the fleet's layout, or with the one the Uid-Layout header names, read
// as UidGenerator's parseUID reads it (uidcore.Layout.ParseUID: any ID,
// wrapped ones in signed decimal and flagged, as client-demo parse does).
// The body is decimal or base32.
func (s *Service) parse(_ context.Context, req micro.Request, buf []byte) result {
	enc, err := requestEncoding(req.Headers())
	if err != nil {
		return result{err: err}
	}
	layout, named, err := requestLayout(req.Headers())
	if err != nil {
		return result{err: err}
	}
	id, err := parseIDRequest(req.Data(), idForm{base32: enc == protocol.Base32, signed: named})
	if err != nil {
		return result{err: err}
	}
	var fields uidcore.ParsedJSON
	if named {
		fields = layout.ParseUID(id)
	} else {
		parts, err := s.src.Layout().Parse(id)
		if err != nil {
			return result{err: badRequest("%v", err)}
		}
		fields = parts.JSON()
		// The region whose range holds the worker ID (none: a worker ID
		// no region has, say of an older generation). Only the fleet's
		// own layout has regions.
		if s.cfg.RegionOf != nil {
			fields.Region, _ = s.cfg.RegionOf(parts.WorkerID)
		}
	}
	reply, err := json.Marshal(fields)
	return replied(append(buf, reply...), 0, err)
}
