package uidclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/trace"

	"github.com/uid-dispenser/uid-dispenser/internal/retry"
	"github.com/uid-dispenser/uid-dispenser/natsio/internal/quote"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// DefaultAttemptTimeout is Config.AttemptTimeout's default.
const DefaultAttemptTimeout = time.Second

// Config configures a Client. Zero values take defaults.
type Config struct {
	SubjectPrefix string // default protocol.DefaultSubjectPrefix
	// AttemptTimeout bounds one request. An instance that dies while it
	// holds a request never answers it; the client then asks again and
	// another instance answers. Default DefaultAttemptTimeout. The
	// caller's context bounds all attempts together.
	AttemptTimeout time.Duration
	// MinBackoff and MaxBackoff bound the pause between attempts after no
	// responders or a 503 (defaults 2ms and 250ms; doubled each time,
	// with jitter: the retry policy). A 503 with Uid-Retry-After-Ms is
	// retried no sooner than it says.
	MinBackoff, MaxBackoff time.Duration
	// HomeWait bounds how long a sequence request keeps asking while its
	// home region cannot be reached (no responders, and the instances
	// reached name the home), before it fails with a
	// *HomeUnreachableError: long enough to ride out a gateway link that
	// reconnects (nats-server waits a fixed second before it reconnects
	// one), short of the call's deadline. Default 2s.
	HomeWait time.Duration
	// MoveAfter and MoveEvery move the connection off a NATS server cut
	// off from its cluster (Mover): after MoveAfter attempts in a row on
	// it ended in no responders (default DefaultMoveAfter, 2; a timeout
	// neither counts nor resets), the client forces nc to reconnect to
	// another server of its pool, at most once every MoveEvery (default
	// DefaultMoveEvery, 5s).
	// The connection is the caller's: set MoveAfter negative to keep the
	// client from ever forcing it to reconnect (0 is the default).
	MoveAfter int
	MoveEvery time.Duration
	// Logger logs the moves (default slog.Default()).
	Logger *slog.Logger
	// TracerProvider makes the client spans (and so the trace context
	// sent along); nil: the global one.
	TracerProvider trace.TracerProvider
}

// Client asks dispensers for IDs over NATS. It is safe for concurrent use.
//
// It retries, until the context is done, when no dispenser is subscribed
// (all down or restarting), when one answers 503 (no ID right now) and
// when an attempt times out. Retrying an ID request is always safe: an ID
// lost in a dropped reply is never issued again. When attempts keep
// ending in no responders, its NATS server may be cut off
// from the cluster, which NATS does not move a client off: the client
// then moves the connection to another server of its pool (Mover;
// Config.MoveAfter). A sequence request with
// no responders is the exception in a fleet of regions: when the
// instances reached name the sequence's home region (only its instances
// serve the sequence), the call fails with a *HomeUnreachableError naming
// it once that has lasted Config.HomeWait, or at its deadline if sooner. Error replies come back
// as *ServiceError; errors.Is(err, ErrBadRequest) tells a malformed
// request.
type Client struct {
	nc                             *nats.Conn
	cfg                            Config
	subjNext, subjBatch, subjParse string
	seqNext, seqBatch              string // wildcard subjects, for the spans
	otel                           clientTelemetry
	stats                          clientCounters
	mover                          *Mover
	// rangesRefused: a dispenser did not know the ranges encoding (an
	// older one, in a rolling upgrade); batches are asked binary since.
	rangesRefused atomic.Bool
}

// ClientStats counts what a Client absorbed by retrying: the callers see
// only the final outcome.
type ClientStats struct {
	Requests     uint64 // calls (each may take several attempts)
	Retries      uint64 // attempts after the first
	Unavailable  uint64 // 503 replies retried (at capacity, claim lost, shutting down)
	NoResponders uint64 // attempts no dispenser was subscribed for
	TimedOut     uint64 // attempts that timed out
	Moves        uint64 // connection moved off a server cut off from its cluster (Mover)
}

type clientCounters struct {
	requests, retries, unavailable, noResponders, timedOut atomic.Uint64
}

// Stats returns the client's counters since it was made.
func (c *Client) Stats() ClientStats {
	return ClientStats{
		Requests:     c.stats.requests.Load(),
		Retries:      c.stats.retries.Load(),
		Unavailable:  c.stats.unavailable.Load(),
		NoResponders: c.stats.noResponders.Load(),
		TimedOut:     c.stats.timedOut.Load(),
		Moves:        c.mover.Moves(),
	}
}

// New returns a client that sends requests on nc. Unless
// Config.MoveAfter is negative, the client may force nc to reconnect
// (Mover); it never closes it.
func New(nc *nats.Conn, cfg Config) *Client {
	if cfg.SubjectPrefix == "" {
		cfg.SubjectPrefix = protocol.DefaultSubjectPrefix
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = DefaultAttemptTimeout
	}
	if cfg.HomeWait <= 0 {
		cfg.HomeWait = 2 * time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 2 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(250*time.Millisecond, cfg.MinBackoff)
	}
	c := &Client{
		nc:        nc,
		cfg:       cfg,
		subjNext:  protocol.Subject(cfg.SubjectPrefix, protocol.EndpointNext),
		subjBatch: protocol.Subject(cfg.SubjectPrefix, protocol.EndpointBatch),
		subjParse: protocol.Subject(cfg.SubjectPrefix, protocol.EndpointParse),
		seqNext:   protocol.SeqSubject(cfg.SubjectPrefix, "*", protocol.EndpointNext),
		seqBatch:  protocol.SeqSubject(cfg.SubjectPrefix, "*", protocol.EndpointBatch),
		mover:     NewMover(nc, MoveConfig{After: cfg.MoveAfter, Every: cfg.MoveEvery, Logger: cfg.Logger}),
	}
	c.otel = newClientTelemetry(cfg.TracerProvider, c.subjNext, c.subjBatch, c.subjParse, c.seqNext, c.seqBatch)
	return c
}

// Next returns one new ID.
func (c *Client) Next(ctx context.Context) (uint64, error) {
	id, _, err := c.next(ctx, c.subjNext, c.subjNext)
	return id, err
}

// SeqNext returns the next number of the sequence name. An undeclared
// name is a *ServiceError matching ErrNotFound, at once (not retried). In
// a fleet of regions, a sequence whose home region cannot be reached is
// a *HomeUnreachableError naming the home (ErrHomeUnreachable) once no
// responders has lasted Config.HomeWait.
func (c *Client) SeqNext(ctx context.Context, name string) (uint64, error) {
	n, _, err := c.SeqNextFrom(ctx, name)
	return n, err
}

// SeqNextFrom is SeqNext also returning the instance that answered (the
// reply's protocol.InstanceHeader; "" from an instance that does not send it).
func (c *Client) SeqNextFrom(ctx context.Context, name string) (n uint64, instance string, err error) {
	n, reply, err := c.next(ctx, protocol.SeqSubject(c.cfg.SubjectPrefix, name, protocol.EndpointNext), c.seqNext)
	if err != nil {
		return 0, "", err
	}
	return n, reply.Header.Get(protocol.InstanceHeader), nil
}

// SeqBatch returns the next n numbers of the sequence name, increasing,
// fetched in one request as ranges (binary from a dispenser older than
// ranges).
func (c *Client) SeqBatch(ctx context.Context, name string, n int) ([]uint64, error) {
	nums, _, err := c.SeqBatchFrom(ctx, name, n)
	return nums, err
}

// SeqBatchFrom is SeqBatch also returning the instance that answered (the
// reply's protocol.InstanceHeader; "" from an instance that does not send it).
func (c *Client) SeqBatchFrom(ctx context.Context, name string, n int) (nums []uint64, instance string, err error) {
	nums, reply, err := c.appendBatch(ctx, nil, n, protocol.SeqSubject(c.cfg.SubjectPrefix, name, protocol.EndpointBatch), c.seqBatch)
	if err != nil {
		return nums, "", err
	}
	return nums, reply.Header.Get(protocol.InstanceHeader), nil
}

func (c *Client) next(ctx context.Context, subject, template string) (uint64, *nats.Msg, error) {
	reply, err := c.request(ctx, &nats.Msg{Subject: subject}, template)
	if err != nil {
		return 0, nil, err
	}
	id, err := strconv.ParseUint(string(reply.Data), 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("uidclient: %s: reply %q is not a decimal number", subject, quote.Shorten(string(reply.Data), 40))
	}
	return id, reply, nil
}

// Batch returns n new IDs, fetched in one request as runs of
// consecutive IDs (Uid-Encoding: ranges) and expanded here. n must not
// exceed the service's largest batch (a 400 otherwise).
func (c *Client) Batch(ctx context.Context, n int) ([]uint64, error) {
	return c.AppendBatch(ctx, nil, n)
}

// AppendBatch is Batch appending to dst.
func (c *Client) AppendBatch(ctx context.Context, dst []uint64, n int) ([]uint64, error) {
	ids, _, err := c.appendBatch(ctx, dst, n, c.subjBatch, c.subjBatch)
	return ids, err
}

// Run is a run of consecutive IDs: First, First+1, …, First+Count-1.
type Run = protocol.Run

// BatchRuns returns n new IDs as the runs of consecutive IDs the service
// sent (Uid-Encoding: ranges), without expanding them: a million IDs of
// one second and worker ID are one Run.
func (c *Client) BatchRuns(ctx context.Context, n int) ([]Run, error) {
	runs, _, err := c.batchRuns(ctx, nil, n, c.subjBatch, c.subjBatch)
	return runs, err
}

// appendBatch returns the reply too, for its headers.
func (c *Client) appendBatch(ctx context.Context, dst []uint64, n int, subject, template string) ([]uint64, *nats.Msg, error) {
	var stack [8]Run
	runs, reply, err := c.batchRuns(ctx, stack[:0], n, subject, template)
	if err != nil {
		return dst, nil, err
	}
	return protocol.AppendIDs(dst, runs), reply, nil
}

// batchRuns asks for n IDs as ranges and appends their runs to dst. A
// dispenser older than ranges answers that the encoding is unknown (a
// 400): during a rolling upgrade the client then asks binary, from then
// on, and makes runs of the IDs.
func (c *Client) batchRuns(ctx context.Context, dst []Run, n int, subject, template string) ([]Run, *nats.Msg, error) {
	if n < 1 {
		return dst, nil, &ServiceError{Subject: subject, Code: protocol.CodeBadRequest, Description: fmt.Sprintf("count %d: ask for at least 1 ID", n)}
	}
	enc := protocol.Ranges
	if c.rangesRefused.Load() {
		enc = protocol.Binary
	}
	msg := &nats.Msg{
		Subject: subject,
		Header:  nats.Header{protocol.EncodingHeader: []string{enc.HeaderValue()}},
		Data:    strconv.AppendInt(nil, int64(n), 10),
	}
	reply, err := c.request(ctx, msg, template)
	if enc == protocol.Ranges && refusesRanges(err) {
		c.rangesRefused.Store(true)
		return c.batchRuns(ctx, dst, n, subject, template)
	}
	if err != nil {
		return dst, nil, err
	}
	if enc == protocol.Binary {
		if len(reply.Data) != n*protocol.BinaryIDWidth {
			return dst, nil, fmt.Errorf("uidclient: %s: asked for %d IDs, the reply holds %d bytes", subject, n, len(reply.Data))
		}
		ids, err := protocol.Binary.Decode(make([]uint64, 0, n), reply.Data)
		return protocol.RunsOf(dst, ids), reply, err
	}
	runs, err := protocol.DecodeRuns(dst, reply.Data)
	if err != nil {
		return dst, nil, fmt.Errorf("uidclient: %s: %w", subject, err)
	}
	if got := protocol.CountOf(runs[len(dst):]); got != uint64(n) {
		return dst, nil, fmt.Errorf("uidclient: %s: asked for %d IDs, the reply's runs hold %d", subject, n, got)
	}
	return runs, reply, nil
}

// refusesRanges tells the 400 of a dispenser that does not know the
// ranges encoding.
func refusesRanges(err error) bool {
	var se *ServiceError
	return errors.As(err, &se) && se.Code == protocol.CodeBadRequest &&
		strings.Contains(se.Description, protocol.EncodingHeader) && strings.Contains(se.Description, "is not an encoding")
}

// Parse asks a dispenser to split id into its fields under the service's
// layout.
func (c *Client) Parse(ctx context.Context, id uint64) (uidcore.Parts, error) {
	reply, err := c.request(ctx, &nats.Msg{Subject: c.subjParse, Data: strconv.AppendUint(nil, id, 10)}, c.subjParse)
	if err != nil {
		return uidcore.Parts{}, err
	}
	return decodeParts(reply.Data)
}

// ParseWithLayout asks a dispenser to split id as UidGenerator's parseUID
// would under layout, a preset ("jssafe", "uidgenerator", "default") or
// "T/W/S@epoch" (the epoch RFC 3339 or a date; a bare T/W/S is refused,
// since it does not say its epoch), sent as the Uid-Layout
// header: the call a service migrating off UidGenerator makes in place of
// parseUID(). It returns the reply's fields as sent: an ID with the sign
// bit set (a wrapped UidGenerator ID) has a negative UID and Wrapped set.
// A layout the dispenser does not know is an ErrBadRequest naming it.
func (c *Client) ParseWithLayout(ctx context.Context, id uint64, layout string) (uidcore.ParsedJSON, error) {
	msg := &nats.Msg{Subject: c.subjParse, Data: strconv.AppendUint(nil, id, 10), Header: nats.Header{protocol.LayoutHeader: {layout}}}
	reply, err := c.request(ctx, msg, c.subjParse)
	if err != nil {
		return uidcore.ParsedJSON{}, err
	}
	var j uidcore.ParsedJSON
	if err := json.Unmarshal(reply.Data, &j); err != nil || j.UID == "" {
		return uidcore.ParsedJSON{}, fmt.Errorf("uidclient: parse reply %s is not parseUID's JSON: %v", quote.Shorten(string(reply.Data), 120), err)
	}
	return j, nil
}

// ToBase32 is id in the dispenser's base32 form (Uid-Encoding: base32):
// 13 upper-case Crockford characters, zero-padded, so that the strings
// sort as the IDs.
func ToBase32(id uint64) string { return protocol.FormatBase32(id) }

// FromBase32 reads an ID in base32, in any case, I and L as 1, O as 0.
func FromBase32(s string) (uint64, error) { return protocol.ParseBase32(s) }

// decodeParts reads UidGenerator's parseUID JSON (all values strings, the
// timestamp "yyyy-MM-dd HH:mm:ss" in UTC).
func decodeParts(data []byte) (uidcore.Parts, error) {
	var j uidcore.ParsedJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return uidcore.Parts{}, fmt.Errorf("uidclient: parse reply is not the expected JSON: %w", err)
	}
	var p uidcore.Parts
	var errs [4]error
	p.ID, errs[0] = strconv.ParseUint(j.UID, 10, 64)
	p.Time, errs[1] = time.ParseInLocation(time.DateTime, j.Timestamp, time.UTC)
	p.WorkerID, errs[2] = strconv.ParseUint(j.WorkerID, 10, 64)
	p.Sequence, errs[3] = strconv.ParseUint(j.Sequence, 10, 64)
	if err := errors.Join(errs[:]...); err != nil {
		return uidcore.Parts{}, fmt.Errorf("uidclient: parse reply %s: %w", quote.Shorten(string(data), 120), err)
	}
	return p, nil
}

// request sends msg until a dispenser answers it, the error is final, or
// ctx is done. One client span, named after the subject template, covers
// all attempts.
func (c *Client) request(ctx context.Context, msg *nats.Msg, template string) (*nats.Msg, error) {
	// Not a deferred closure: one capturing the error would move it to
	// the heap on every call.
	ctx, span := c.otel.start(ctx, msg, template)
	reply, err := c.attempts(ctx, msg, template)
	c.otel.end(span, err)
	return reply, err
}

// attempts is request's retry loop.
func (c *Client) attempts(ctx context.Context, msg *nats.Msg, template string) (*nats.Msg, error) {
	pauses := retry.Policy{Min: c.cfg.MinBackoff, Max: c.cfg.MaxBackoff}.Start()
	var last error
	c.stats.requests.Add(1)
	homeAsked := template != c.seqNext && template != c.seqBatch // only sequences have homes
	var home *HomeUnreachableError                               // set once the instances named it
	var homeSince time.Time
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			c.stats.retries.Add(1)
		}
		reply, err := c.attempt(ctx, msg)
		c.mover.Observe(err)
		if err == nil {
			err = protocol.ErrorFromHeaders(msg.Subject, reply.Header.Get(micro.ErrorCodeHeader), reply.Header.Get(micro.ErrorHeader), reply.Header.Get(protocol.RetryAfterHeader))
			if err == nil {
				return reply, nil
			}
		}
		noResponders := errors.Is(err, nats.ErrNoResponders)
		if ctx.Err() != nil {
			if home != nil && noResponders {
				return nil, home
			}
			return nil, c.gaveUp(ctx, msg.Subject, attempt, err, last)
		}
		if !homeAsked && noResponders {
			homeAsked = true
			if herr := c.homeUnreachable(ctx, msg.Subject, err); herr != nil {
				// Its own variable: errors.As would move home to the
				// heap on every call.
				var named *HomeUnreachableError
				if !errors.As(herr, &named) {
					c.stats.count(err)
					return nil, herr
				}
				home = named
			}
		}
		// The home is unreachable for as long as no responders lasts
		// without a break.
		switch {
		case home == nil:
		case !noResponders:
			homeSince = time.Time{}
		case homeSince.IsZero():
			homeSince = time.Now()
		case time.Since(homeSince) >= c.cfg.HomeWait:
			c.stats.count(err)
			return nil, home
		}
		if !retryable(err) {
			if _, isService := err.(*ServiceError); isService {
				return nil, err
			}
			return nil, fmt.Errorf("uidclient: %s: %w", msg.Subject, err)
		}
		last = err
		c.stats.count(err)
		pause := pauses.Next()
		if se, isService := err.(*ServiceError); isService {
			pause = max(pause, se.RetryAfter) // the instance's hint is a floor
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if home != nil && errors.Is(last, nats.ErrNoResponders) {
				return nil, home
			}
			return nil, c.gaveUp(ctx, msg.Subject, attempt, nil, last)
		}
	}
}

// attempt sends msg once, bounded by the attempt timeout and ctx. A
// context of its own per attempt costs four allocations and a timer, so
// it is made only when both bounds matter: a context that is never done
// (context.Background) leaves the timeout alone, and a deadline within
// the timeout is the bound itself.
func (c *Client) attempt(ctx context.Context, msg *nats.Msg) (*nats.Msg, error) {
	if ctx.Done() == nil {
		return c.nc.RequestMsg(msg, c.cfg.AttemptTimeout)
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= c.cfg.AttemptTimeout {
		return c.nc.RequestMsgWithContext(ctx, msg)
	}
	actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	defer cancel()
	return c.nc.RequestMsgWithContext(actx, msg)
}

// homeUnreachable is the error of a sequence request that met no
// responders (cause), when the instances reached name the sequence's
// home: in a fleet of regions only the home region's instances serve a
// sequence, so no responders means none of them can be reached (a
// *HomeUnreachableError naming it, returned by request once that has
// lasted HomeWait). A 404 from them is the sequence declared nowhere. Nil when
// nobody answers the question (no instance at all, or a fleet without
// regions, whose instances do not serve it): the request is retried as
// any other.
func (c *Client) homeUnreachable(ctx context.Context, subject string, cause error) error {
	name := strings.TrimPrefix(subject, c.cfg.SubjectPrefix+".seq.")
	name = name[:max(strings.LastIndexByte(name, '.'), 0)]
	actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	defer cancel()
	reply, err := c.nc.RequestWithContext(actx, protocol.SeqSubject(c.cfg.SubjectPrefix, name, protocol.EndpointHome), nil)
	if err != nil {
		return nil
	}
	if err := protocol.ErrorFromHeaders(subject, reply.Header.Get(micro.ErrorCodeHeader), reply.Header.Get(micro.ErrorHeader), ""); err != nil {
		if errors.Is(err, ErrNotFound) {
			return err
		}
		return nil
	}
	if len(reply.Data) == 0 {
		return nil
	}
	return &HomeUnreachableError{Subject: subject, Sequence: name, Home: quote.Shorten(string(reply.Data), 64), Err: cause}
}

func (c *Client) gaveUp(ctx context.Context, subject string, attempts int, err, last error) error {
	if last == nil || (err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)) {
		last = err
	}
	if last == nil || errors.Is(last, ctx.Err()) {
		return fmt.Errorf("uidclient: %s: %w after %d attempt(s)", subject, ctx.Err(), attempts)
	}
	return fmt.Errorf("uidclient: %s: %w after %d attempt(s); last error: %w", subject, ctx.Err(), attempts, last)
}

// count tallies a retryable error by its cause.
func (s *clientCounters) count(err error) {
	switch {
	case errors.Is(err, ErrUnavailable):
		s.unavailable.Add(1)
	case errors.Is(err, nats.ErrNoResponders):
		s.noResponders.Add(1)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		s.timedOut.Add(1)
	}
}

// retryable tells the errors another attempt may cure: nobody subscribed
// (instances restarting), no ID right now (503), an attempt that timed out
// (the instance died holding the request), a connection that is
// reconnecting and one lost with the request in flight (a Mover's move
// does that too): an ID request is always safe to send again.
func retryable(err error) bool {
	switch {
	case errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, ErrUnavailable),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrDisconnected):
		return true
	}
	return false
}
