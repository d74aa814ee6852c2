package natsio

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// The request path every endpoint shares: handle builds the request
// context, runs the handler, sends the reply or the error reply, and
// records the outcome; a deferred request is finished the same way later.
// Each endpoint's counters are those of its subject (a sequence homed
// here has endpoints of its own, all named seq_next or seq_batch).

// handlerFunc serves one request, appending the reply body to buf.
type handlerFunc func(ctx context.Context, req micro.Request, buf []byte) result

// result is what serving a request came to: a reply body with the number
// of IDs it hands out, an error that becomes an error reply, or, from a
// handler, a deferral: no reply yet, because it waits for IDs or numbers
// off the endpoint's goroutine (micro runs an endpoint's handlers one at
// a time, so small requests behind it are still answered at once).
type result struct {
	reply []byte
	ids   int
	err   error
	later *deferral
}

// replied is the result of a reply with ids IDs in it, or of err.
func replied(reply []byte, ids int, err error) result {
	if err != nil {
		return result{err: err}
	}
	return result{reply: reply, ids: ids}
}

// call is one request on its way through handle and, for a batch that
// waits for capacity, the capacity queue.
type call struct {
	ctx      context.Context
	otel     *endpointTelemetry
	span     serverRequest
	req      micro.Request
	counters *endpointCounters
	bp       *[]byte // reply buffer from the pool
	// headers go on every reply (read only: shared by the calls of an
	// endpoint); nil for most endpoints.
	headers micro.Headers
	// replyTo is set once the call is deferred: it is then answered with
	// a plain publish, because micro reads the request's error state once
	// the handler has returned.
	replyTo string
}

// handle is the one wrapper every endpoint handler passes through: it
// builds the request context, recovers panics, maps errors to error
// replies, always answers, and records the outcome and duration in the
// counters of subject, the endpoint's. The spans of a wildcard endpoint
// are named after its subject, so that made-up sequence names do not make
// spans (and cached templates) of their own. headers (nil for none) go on
// every reply.
func (s *Service) handle(endpoint, subject string, fn handlerFunc, headers micro.Headers) micro.Handler {
	counters := s.endpoints[subject]
	tel := s.otel.endpoint(endpoint, subject)
	return micro.HandlerFunc(func(req micro.Request) {
		ctx, span := tel.start(req.Headers(), s.src.WorkerID)
		c := &call{ctx: ctx, otel: tel, span: span, req: req, counters: counters, bp: s.replyBuffer(), headers: headers}
		r := s.invoke(ctx, endpoint, fn, req, (*c.bp)[:0])
		if r.later != nil {
			err := s.wait(c, r.later)
			if err == nil {
				return // the queue it waits in answers it
			}
			r = result{err: err}
		}
		s.finish(c, r)
	})
}

// wait hands a deferred call to the queue of what it waits for: the
// segment waits for a sequence's numbers, the capacity queue for IDs.
// When that queue takes no more, it returns the error to answer with.
func (s *Service) wait(c *call, d *deferral) error {
	c.replyTo = c.req.Reply()
	w := waitingBatch{call: c, wait: d.wait, after: d.after, deadline: c.span.start.Add(s.cfg.CapacityWait)}
	if d.segment {
		return s.segments.start(w)
	}
	if !s.capacity.enqueue(w) {
		return atCapacity(s.src, &uidcore.EmptyError{Cause: fmt.Errorf("%d bulk requests already wait", maxWaitingBatches)})
	}
	return nil
}

// finish sends the reply (or the error reply) of a call and records it.
// r is never a deferral.
func (s *Service) finish(c *call, r result) {
	req, reply, ids, err := c.req, r.reply, r.ids, r.err
	code := 0
	if err == nil {
		if rerr := s.respond(c, reply); rerr != nil && !errors.Is(rerr, nats.ErrMsgNoReply) {
			s.log.Warn("reply failed", "subject", req.Subject(), "err", rerr)
		}
		c.counters.ids.Add(uint64(ids))
	} else {
		var description string
		code, description = replyFor(err)
		if code == protocol.CodeInternal {
			s.log.Error("request failed", "subject", req.Subject(), "err", err)
		}
		if rerr := s.respondError(c, code, headerSafe(description), err); rerr != nil && !errors.Is(rerr, nats.ErrMsgNoReply) {
			s.log.Warn("error reply failed", "subject", req.Subject(), "err", rerr)
		}
	}
	// The reply has been copied into the connection's buffer.
	if cap(reply) > cap(*c.bp) {
		*c.bp = reply
	}
	s.replyBufs.Put(c.bp)
	c.counters.record(code)
	if d := c.otel.end(c.ctx, c.span, ids, code, err); d > time.Second {
		s.log.Warn("slow request", "subject", req.Subject(), "duration", d)
	}
}

// respond sends a reply: through micro from the handler, as a plain
// message once the call was deferred (micro reads the request's state
// after its handler returns).
func (s *Service) respond(c *call, data []byte) error {
	if c.replyTo != "" {
		return s.nc.PublishMsg(&nats.Msg{Subject: c.replyTo, Data: data, Header: nats.Header(c.headers)})
	}
	if c.headers != nil {
		return c.req.Respond(data, micro.WithHeaders(c.headers))
	}
	return c.req.Respond(data)
}

// respondError sends micro's error reply, with the retry hint of a
// capacity 503; from the handler through micro, so its stats count it.
func (s *Service) respondError(c *call, code int, description string, err error) error {
	extra := micro.Headers{}
	maps.Copy(extra, c.headers)
	var ce *capacityError
	if errors.As(err, &ce) {
		extra[protocol.RetryAfterHeader] = []string{strconv.FormatInt(max(ce.retryAfter.Milliseconds(), 1), 10)}
	}
	if c.replyTo != "" {
		h := nats.Header(extra)
		h.Set(micro.ErrorHeader, description)
		h.Set(micro.ErrorCodeHeader, strconv.Itoa(code))
		return s.nc.PublishMsg(&nats.Msg{Subject: c.replyTo, Header: h})
	}
	return c.req.Error(strconv.Itoa(code), description, nil, micro.WithHeaders(extra))
}

// invoke runs fn and turns a panic into an error, so one bad request never
// takes the instance down and still gets an answer.
func (s *Service) invoke(ctx context.Context, endpoint string, fn handlerFunc, req micro.Request, buf []byte) (r result) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("handler panicked", "endpoint", endpoint, "panic", p, "stack", string(debug.Stack()))
			r = result{err: fmt.Errorf("handler panicked: %v", p)}
		}
	}()
	return fn(ctx, req, buf)
}
