package natsio

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// IDSource is where a Service takes its IDs. *uidcore.CachedGenerator
// implements it, and so does the dispenser's source that swaps in a new
// generator when a worker claim is lost for good (the service then calls
// Readvertise so that its metadata follows the worker ID).
type IDSource interface {
	Next(ctx context.Context) (uint64, error)
	NextN(ctx context.Context, dst []uint64) (int, error)
	// TryNextN takes what is ready without waiting (see
	// uidcore.CachedGenerator.TryNextN).
	TryNextN(dst []uint64) (int, error)
	Layout() uidcore.Layout
	WorkerID() uint64
	State() uidcore.State
}

// SequenceSource is where a Service takes the numbers of named
// sequences; *sequence.Allocator implements it.
type SequenceSource interface {
	Fill(ctx context.Context, name string, dst []uint64) error
	// TryFill is Fill without waiting: false (nothing taken) when the
	// numbers at hand are too few.
	TryFill(name string, dst []uint64) (bool, error)
	Stats() []sequence.Stats
}

// ServiceConfig configures a Service. Zero values take defaults.
type ServiceConfig struct {
	QueueGroup    string // default DefaultQueueGroup
	SubjectPrefix string // default DefaultSubjectPrefix
	MaxBatch      int    // largest batch count, default DefaultMaxBatch; capped by the max payload
	Description   string
	// Version is the micro service's version (a semantic version, the
	// binary's own); default ServiceVersion.
	Version string
	Logger  *slog.Logger // default slog.Default()

	// PendingMsgs and PendingBytes bound each endpoint subscription's
	// client-side queue; past them NATS drops requests and reports a slow
	// consumer. Defaults: no message limit, 256 MiB.
	PendingMsgs, PendingBytes int

	// ClaimStatus, when set, reports the health of the worker claim for the
	// stats ("ok" or its error).
	ClaimStatus func() error

	// CapacityWait bounds how long a bulk batch (more than
	// uidcore.SmallTake IDs) waits for IDs while the instance is at its
	// capacity, from its receipt (default DefaultCapacityWait). It waits
	// off the endpoint's goroutine, so small requests are not held up.
	CapacityWait time.Duration

	// Region is the instance's region and Regions the fleet's map of
	// regions (workerid.Regions' text), both in the micro metadata;
	// RegionOf, when set, names the region of a worker ID in parse
	// replies ("region"). Zero: no regions.
	Region, Regions string
	RegionOf        func(workerID uint64) (string, bool)

	// Sequences, when set, serves the named sequences on
	// <prefix>.seq.<name>.next and .batch (uidclient.SeqSubject).
	Sequences SequenceSource

	// TracerProvider and MeterProvider make the server spans and request
	// metrics; nil: the global ones (as uidclient.Config.TracerProvider).
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

// DefaultCapacityWait is the default ServiceConfig.CapacityWait: below the
// Go client's 1s attempt timeout.
const DefaultCapacityWait = 800 * time.Millisecond

// Service is the dispenser's NATS micro service: the endpoints next, batch
// and parse under the subject prefix, in one queue group, with the ring
// state in the micro stats.
//
// The micro service (nats.go >= 1.50) keeps running through async errors
// on its subscriptions, such as a slow consumer: it stops only on Stop or
// when its connection is closed (TestSlowConsumerDoesNotStopTheService
// holds the pinned version to it).
type Service struct {
	nc          *nats.Conn
	cfg         ServiceConfig
	log         *slog.Logger
	src         IDSource
	endpoints   map[string]*endpointCounters
	asyncErrors atomic.Uint64
	idBufs      sync.Pool // *[]uint64 for batch replies
	replyBufs   sync.Pool // *[]byte for reply bodies
	otel        *serverTelemetry
	capacity    *capacityQueue
	segments    *segmentWaits

	mu         sync.Mutex
	svc        micro.Service
	advertised advertised // what svc's metadata says
	stopped    bool
}

// advertised is what the micro metadata shows of the source and of the
// sequences.
type advertised struct {
	workerID  uint64
	layout    uidcore.Layout
	sequences string // comma-separated, sorted (Sequences.Stats' order)
}

// current is what the metadata should show now.
func (s *Service) current() advertised {
	a := advertised{workerID: s.src.WorkerID(), layout: s.src.Layout()}
	if s.cfg.Sequences != nil {
		var names []string
		for _, st := range s.cfg.Sequences.Stats() {
			names = append(names, st.Name)
		}
		a.sequences = strings.Join(names, ",")
	}
	return a
}

// endpointCounters count an endpoint's replies by outcome.
type endpointCounters struct {
	ok, badRequest, notFound, unavailable, internal atomic.Uint64
	ids                                             atomic.Uint64
}

// handlerFunc serves one request: it appends the reply body to buf and
// returns it with the number of IDs it hands out, or an error that becomes
// an error reply.
type handlerFunc func(ctx context.Context, req micro.Request, buf []byte) (reply []byte, ids int, err error)

// NewService adds the micro service to nc and starts serving src. Set nc's
// closed and error handlers before (Connect does): micro wraps them.
func NewService(nc *nats.Conn, src IDSource, cfg ServiceConfig) (*Service, error) {
	if src == nil {
		return nil, errors.New("natsio: NewService: nil IDSource")
	}
	if cfg.QueueGroup == "" {
		cfg.QueueGroup = uidclient.DefaultQueueGroup
	}
	if cfg.SubjectPrefix == "" {
		cfg.SubjectPrefix = uidclient.DefaultSubjectPrefix
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.MaxBatch < 1 {
		return nil, fmt.Errorf("natsio: MaxBatch %d must be at least 1", cfg.MaxBatch)
	}
	if cfg.PendingMsgs == 0 {
		cfg.PendingMsgs = -1
	}
	if cfg.CapacityWait <= 0 {
		cfg.CapacityWait = DefaultCapacityWait
	}
	if cfg.PendingBytes == 0 {
		cfg.PendingBytes = 256 << 20
	}
	if cfg.Description == "" {
		cfg.Description = "Unique 64-bit IDs: " + cfg.SubjectPrefix + ".next, " + cfg.SubjectPrefix + ".batch, " + cfg.SubjectPrefix + ".parse"
		if cfg.Sequences != nil {
			cfg.Description += "; named sequences: " + uidclient.SeqSubject(cfg.SubjectPrefix, "<name>", "{next,batch}")
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Service{
		nc:  nc,
		cfg: cfg,
		log: cfg.Logger,
		src: src,
		endpoints: map[string]*endpointCounters{
			uidclient.EndpointNext: {}, uidclient.EndpointBatch: {}, uidclient.EndpointParse: {},
		},
		otel: newServerTelemetry(cfg.QueueGroup, cfg.TracerProvider, cfg.MeterProvider),
	}
	if cfg.Sequences != nil {
		s.endpoints[uidclient.EndpointSeqNext] = &endpointCounters{}
		s.endpoints[uidclient.EndpointSeqBatch] = &endpointCounters{}
	}
	s.capacity = newCapacityQueue(s)
	s.segments = newSegmentWaits(s)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.start(); err != nil {
		s.capacity.stop()
		s.segments.stop()
		return nil, err
	}
	// The subscriptions are sent to the server asynchronously; a round
	// trip makes sure that it routes requests here once NewService returns.
	if err := nc.FlushTimeout(10 * time.Second); err != nil {
		_ = s.svc.Stop()
		s.capacity.stop()
		s.segments.stop()
		return nil, fmt.Errorf("natsio: subscribe the service endpoints: %w", err)
	}
	return s, nil
}

// start adds a micro service with the source's metadata and registers
// the endpoints. s.mu must be held.
func (s *Service) start() error {
	src := s.src
	shown := s.current()
	layout := shown.layout
	maxPayload := s.nc.MaxPayload()
	metadata := map[string]string{
		"worker_id": strconv.FormatUint(shown.workerID, 10),
		"layout":    fmt.Sprintf("%d/%d/%d", layout.TimeBits, layout.WorkerBits, layout.SeqBits),
		"epoch":     layout.Epoch.UTC().Format(time.RFC3339),
		// Capacity: lanes come and go with demand (the stats list the
		// worker IDs held now); what one sustains and how many it may
		// hold are fixed.
		"ids_per_second_per_lane": strconv.FormatUint(layout.MaxSequence()+1, 10),
		"max_lanes":               strconv.Itoa(src.State().MaxLanes),
	}
	if s.cfg.Region != "" {
		metadata["region"], metadata["regions"] = s.cfg.Region, s.cfg.Regions
	}
	if s.cfg.Sequences != nil {
		// The sequences known at start and, readvertised, those served
		// since (`nats micro info`).
		metadata["sequences"] = shown.sequences
	}
	svc, err := micro.AddService(s.nc, micro.Config{
		Name:         uidclient.ServiceName,
		Version:      cmp.Or(s.cfg.Version, uidclient.ServiceVersion),
		Description:  s.cfg.Description,
		QueueGroup:   s.cfg.QueueGroup,
		Metadata:     metadata,
		StatsHandler: s.statsData,
		DoneHandler:  s.onDone,
		ErrorHandler: s.onAsyncError,
	})
	if err != nil {
		return fmt.Errorf("natsio: add micro service: %w", err)
	}
	group := svc.AddGroup(s.cfg.SubjectPrefix)
	limits := micro.WithEndpointPendingLimits(s.cfg.PendingMsgs, s.cfg.PendingBytes)
	for _, e := range []struct {
		name string
		fn   handlerFunc
		meta map[string]string
	}{
		{uidclient.EndpointNext, s.next, map[string]string{"reply": "one decimal ID"}},
		{uidclient.EndpointBatch, s.batch, map[string]string{
			"reply":            "newline-separated decimal IDs, or 8-byte big-endian IDs with header " + uidclient.EncodingHeader + ": " + uidclient.EncodingBinary,
			"max_batch_binary": strconv.Itoa(maxBatchFor(s.cfg.MaxBatch, maxPayload, true)),
			"max_batch_text":   strconv.Itoa(maxBatchFor(s.cfg.MaxBatch, maxPayload, false)),
		}},
		{uidclient.EndpointParse, s.parse, map[string]string{"reply": "JSON {UID, timestamp, workerId, sequence}"}},
	} {
		err := group.AddEndpoint(e.name, s.handle(e.name, "", e.fn, nil), limits, micro.WithEndpointMetadata(e.meta))
		if err != nil {
			_ = svc.Stop()
			return fmt.Errorf("natsio: add endpoint %s: %w", uidclient.Subject(s.cfg.SubjectPrefix, e.name), err)
		}
	}
	if err := s.addSequenceEndpoints(svc, limits, maxPayload); err != nil {
		_ = svc.Stop()
		return err
	}
	s.svc, s.advertised = svc, shown
	return nil
}

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
	headers := micro.Headers{uidclient.InstanceHeader: []string{svc.Info().ID}}
	for _, e := range []struct {
		name, op string
		fn       handlerFunc
		meta     map[string]string
	}{
		{uidclient.EndpointSeqNext, uidclient.EndpointNext, s.seqNext, map[string]string{"reply": "the sequence's next number, decimal"}},
		{uidclient.EndpointSeqBatch, uidclient.EndpointBatch, s.seqBatch, map[string]string{
			"reply":            "the sequence's next numbers, increasing: newline-separated decimal, or 8 bytes big-endian each with header " + uidclient.EncodingHeader + ": " + uidclient.EncodingBinary,
			"max_batch_binary": strconv.Itoa(maxBatchFor(s.cfg.MaxBatch, maxPayload, true)),
			"max_batch_text":   strconv.Itoa(maxBatchFor(s.cfg.MaxBatch, maxPayload, false)),
		}},
	} {
		subject := uidclient.SeqSubject(s.cfg.SubjectPrefix, "*", e.op)
		err := svc.AddEndpoint(e.name, s.handle(e.name, subject, e.fn, headers), limits, micro.WithEndpointSubject(subject), micro.WithEndpointMetadata(e.meta))
		if err != nil {
			return fmt.Errorf("natsio: add endpoint %s: %w", subject, err)
		}
	}
	return nil
}

// call is one request on its way through handle and, for a batch that
// waits for capacity, the capacity queue.
type call struct {
	ctx      context.Context
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
// replies, always answers, and records the outcome and duration. The
// spans of a wildcard endpoint are named after its subject template, so
// that made-up sequence names do not make spans (and cached templates)
// of their own. headers (nil for none) go on every reply.
func (s *Service) handle(endpoint, template string, fn handlerFunc, headers micro.Headers) micro.Handler {
	counters := s.endpoints[endpoint]
	return micro.HandlerFunc(func(req micro.Request) {
		ctx, span := s.otel.start(endpoint, cmp.Or(template, req.Subject()), req.Headers())
		c := &call{ctx: ctx, span: span, req: req, counters: counters, bp: s.replyBuffer(), headers: headers}
		reply, ids, err := s.invoke(ctx, endpoint, fn, req, (*c.bp)[:0])
		var d *deferredBatch
		if errors.As(err, &d) {
			c.replyTo = req.Reply()
			w := waitingBatch{call: c, wait: d.wait, after: d.after, deadline: span.start.Add(s.cfg.CapacityWait)}
			switch {
			case d.segment:
				if err = s.segments.start(w); err == nil {
					return // answered once the segment is there
				}
				reply, ids = nil, 0
			case s.capacity.enqueue(w):
				return // the capacity queue answers it
			default:
				reply, ids, err = nil, 0, atCapacity(s.src, fmt.Errorf("%w: %d bulk requests already wait", uidcore.ErrBufferEmpty, maxWaitingBatches))
			}
		}
		s.finish(c, reply, ids, err)
	})
}

// finish sends the reply (or the error reply) of a call and records it.
func (s *Service) finish(c *call, reply []byte, ids int, err error) {
	req := c.req
	code := 0
	if err == nil {
		if rerr := s.respond(c, reply); rerr != nil && !errors.Is(rerr, nats.ErrMsgNoReply) {
			s.log.Warn("reply failed", "subject", req.Subject(), "err", rerr)
		}
		c.counters.ids.Add(uint64(ids))
	} else {
		var description string
		code, description = replyFor(err)
		if code == uidclient.CodeInternal {
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
	if d := s.otel.end(c.ctx, c.span, ids, s.src.WorkerID(), code, err); d > time.Second {
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
		extra[uidclient.RetryAfterHeader] = []string{strconv.FormatInt(max(ce.retryAfter.Milliseconds(), 1), 10)}
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
func (s *Service) invoke(ctx context.Context, endpoint string, fn handlerFunc, req micro.Request, buf []byte) (reply []byte, ids int, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("handler panicked", "endpoint", endpoint, "panic", r, "stack", string(debug.Stack()))
			reply, ids, err = nil, 0, fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return fn(ctx, req, buf)
}

func (c *endpointCounters) record(code int) {
	switch code {
	case 0:
		c.ok.Add(1)
	case uidclient.CodeBadRequest:
		c.badRequest.Add(1)
	case uidclient.CodeNotFound:
		c.notFound.Add(1)
	case uidclient.CodeUnavailable:
		c.unavailable.Add(1)
	default:
		c.internal.Add(1)
	}
}

// next answers one decimal ID; the body is ignored.
func (s *Service) next(ctx context.Context, _ micro.Request, buf []byte) ([]byte, int, error) {
	var id [1]uint64
	if _, err := s.take(ctx, id[:], true); err != nil {
		return nil, 0, err
	}
	return strconv.AppendUint(buf, id[0], 10), 1, nil
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
func (s *Service) binaryHint(err error, body []byte, binary bool) error {
	var se *uidclient.ServiceError
	limit := maxBatchFor(s.cfg.MaxBatch, s.nc.MaxPayload(), true)
	if binary || !errors.As(err, &se) || limit <= maxBatchFor(s.cfg.MaxBatch, s.nc.MaxPayload(), false) {
		return err
	}
	if _, berr := parseCount(body, limit); berr != nil {
		return err
	}
	return badRequest("%s as text (decimal lines); up to %d with the header %s: %s (8 bytes per ID)", se.Description, limit, uidclient.EncodingHeader, uidclient.EncodingBinary)
}

// batch answers the number of IDs the body asks for. A batch of more than
// uidcore.SmallTake IDs that the ring cannot fill at once waits for the
// rest in the capacity queue, up to ServiceConfig.CapacityWait.
func (s *Service) batch(ctx context.Context, req micro.Request, buf []byte) ([]byte, int, error) {
	binary := wantsBinary(req.Headers())
	n, err := parseCount(req.Data(), maxBatchFor(s.cfg.MaxBatch, s.nc.MaxPayload(), binary))
	if err != nil {
		return nil, 0, s.binaryHint(err, req.Data(), binary)
	}
	idp := s.idBuffer(n)
	ids := (*idp)[:n]
	reply := func(got int, err error, buf []byte) ([]byte, int, error) {
		defer s.idBufs.Put(idp)
		if err != nil {
			// IDs taken before the error are dropped: a partial batch would
			// be a silent truncation. Dropped IDs are never reissued.
			return nil, 0, err
		}
		return appendIDs(buf, ids, binary), n, nil
	}
	if n <= uidcore.SmallTake {
		got, err := s.take(ctx, ids, true)
		return reply(got, err, buf)
	}
	got, err := s.take(ctx, ids, false)
	if err != nil || got == n {
		return reply(got, err, buf)
	}
	return nil, 0, &deferredBatch{wait: func(ctx context.Context, buf []byte) ([]byte, int, error) {
		more, err := s.take(ctx, ids[got:], true)
		return reply(got+more, err, buf)
	}}
}

// appendIDs encodes a batch reply as the request asked.
func appendIDs(buf []byte, ids []uint64, binary bool) []byte {
	if binary {
		return uidclient.AppendBinaryIDs(buf, ids)
	}
	return uidclient.AppendDecimalIDs(buf, ids)
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

// seqNext answers the next number of the subject's sequence.
func (s *Service) seqNext(_ context.Context, req micro.Request, buf []byte) ([]byte, int, error) {
	return s.seqFill(req, buf, 1, func(buf []byte, n []uint64) []byte { return strconv.AppendUint(buf, n[0], 10) })
}

// seqBatch answers the number of the subject's sequence's numbers the
// body asks for, all or none.
func (s *Service) seqBatch(_ context.Context, req micro.Request, buf []byte) ([]byte, int, error) {
	binary := wantsBinary(req.Headers())
	n, err := parseCount(req.Data(), maxBatchFor(s.cfg.MaxBatch, s.nc.MaxPayload(), binary))
	if err != nil {
		return nil, 0, s.binaryHint(err, req.Data(), binary)
	}
	return s.seqFill(req, buf, n, func(buf []byte, ids []uint64) []byte { return appendIDs(buf, ids, binary) })
}

// seqFill takes n numbers of the subject's sequence and encodes them. When
// the numbers at hand are too few it waits for the store off the
// endpoint's goroutine (segmentWaits), up to the capacity wait.
func (s *Service) seqFill(req micro.Request, buf []byte, n int, encode func([]byte, []uint64) []byte) ([]byte, int, error) {
	name := s.seqName(req.Subject())
	idp := s.idBuffer(n)
	ok, err := s.cfg.Sequences.TryFill(name, (*idp)[:n])
	if err != nil || ok {
		defer s.idBufs.Put(idp)
		return seqReply(buf, (*idp)[:n], err, encode)
	}
	s.idBufs.Put(idp)
	// A name's first numbers here always come this way (none at hand):
	// once it is answered, the metadata learns a name it did not show.
	return nil, 0, &deferredBatch{segment: true, wait: func(ctx context.Context, buf []byte) ([]byte, int, error) {
		idp := s.idBuffer(n)
		defer s.idBufs.Put(idp)
		return seqReply(buf, (*idp)[:n], s.cfg.Sequences.Fill(ctx, name, (*idp)[:n]), encode)
	}, after: func() { s.showSequence(name) }}
}

// seqReply encodes the numbers of a sequence request, or returns err.
func seqReply(buf []byte, nums []uint64, err error, encode func([]byte, []uint64) []byte) ([]byte, int, error) {
	if err != nil {
		return nil, 0, err
	}
	return encode(buf, nums), len(nums), nil
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

// parse answers the fields of an ID as UidGenerator's parseUID JSON.
func (s *Service) parse(_ context.Context, req micro.Request, buf []byte) ([]byte, int, error) {
	id, err := parseIDRequest(req.Data())
	if err != nil {
		return nil, 0, err
	}
	parts, err := s.src.Layout().Parse(id)
	if err != nil {
		return nil, 0, badRequest("%v", err)
	}
	if s.cfg.RegionOf == nil {
		reply, err := parts.MarshalJSON()
		return append(buf, reply...), 0, err
	}
	// parseUID's keys, and the region whose range holds the worker ID
	// (none: a worker ID no region has, say of an older generation).
	region, _ := s.cfg.RegionOf(parts.WorkerID)
	reply, err := json.Marshal(struct {
		uidcore.ParsedJSON
		Region string `json:"region,omitempty"`
	}{parts.JSON(), region})
	return append(buf, reply...), 0, err
}

// wantsBinary reports whether the request asks for binary encoding. Header
// names are matched case-insensitively because clients in other languages
// may lower-case them.
func wantsBinary(h micro.Headers) bool {
	if v := h.Get(uidclient.EncodingHeader); v != "" {
		return strings.EqualFold(v, uidclient.EncodingBinary)
	}
	for k, vs := range h {
		if strings.EqualFold(k, uidclient.EncodingHeader) && len(vs) > 0 {
			return strings.EqualFold(vs[0], uidclient.EncodingBinary)
		}
	}
	return false
}

func (s *Service) idBuffer(n int) *[]uint64 {
	if p, ok := s.idBufs.Get().(*[]uint64); ok && cap(*p) >= n {
		return p
	}
	b := make([]uint64, n)
	return &b
}

func (s *Service) replyBuffer() *[]byte {
	if p, ok := s.replyBufs.Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, 0, 64)
	return &b
}

// Readvertise adds the micro service again when the source's worker ID
// or layout no longer match its metadata (the dispenser swapped in a
// generator on a new worker claim), or the sequences served do (a name
// declared elsewhere served here for the first time), so that `nats micro
// info` tells the truth; the new one gets a new service ID, and the old
// one is stopped. Requests are served throughout: both are in the queue
// group meanwhile.
func (s *Service) Readvertise() error {
	s.mu.Lock()
	if s.stopped || s.advertised == s.current() {
		s.mu.Unlock()
		return nil
	}
	prev := s.svc
	err := s.start()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	// The server must route requests to the new subscriptions before the
	// old ones go, or a request may meet no responder in between.
	if err := s.nc.FlushTimeout(5 * time.Second); err != nil {
		s.log.Warn("readvertise: the new service's subscriptions not confirmed; stopping the old one anyway", "err", err)
	}
	return prev.Stop()
}

// ID is the micro service instance ID (as `nats micro ls` shows it). It
// changes when the service is added again.
func (s *Service) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.svc.Info().ID
}

// AsyncErrors counts async errors (such as slow consumers) on the
// service's subscriptions.
func (s *Service) AsyncErrors() uint64 { return s.asyncErrors.Load() }

// Stop leaves the queue group: the server sends no new requests here, so
// peers take the traffic. Requests already delivered are still answered;
// drain the connection afterwards (Conn.DrainAndWait) to wait for them.
func (s *Service) Stop() error {
	s.mu.Lock()
	s.stopped = true
	svc := s.svc
	s.mu.Unlock()
	err := svc.Stop()
	// Batches waiting for capacity get what the ring holds, or a 503;
	// sequence requests waiting for a segment, a 503.
	s.capacity.stop()
	s.segments.stop()
	if err != nil {
		return fmt.Errorf("natsio: stop service: %w", err)
	}
	return nil
}

// onDone runs when a micro service stops. Unless we stopped it (Stop, or
// Readvertise replacing it), the instance no longer answers: say so (it is
// the connection closing, the one other way the pinned micro stops).
func (s *Service) onDone(svc micro.Service) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || svc != s.svc {
		return
	}
	if s.nc.IsClosed() {
		s.log.Error("NATS connection closed: the service no longer answers")
		return
	}
	s.log.Error("micro service stopped: the service no longer answers")
}

// onAsyncError logs async errors on the service's subscriptions, such as
// a slow consumer (requests dropped because the handler fell behind).
// The micro service keeps running.
func (s *Service) onAsyncError(_ micro.Service, err *micro.NATSError) {
	n := s.asyncErrors.Add(1)
	if n&(n-1) == 0 { // log the 1st, 2nd, 4th, 8th... to stay readable under a storm
		s.log.Warn("async error on a service subscription", "subject", err.Subject, "err", err.Description, "count", n)
	}
}

// EndpointData is what the stats of each endpoint carry in their data
// field (`nats micro stats uid-dispenser`).
type EndpointData struct {
	Ring        RingStats `json:"ring"`
	IDs         uint64    `json:"ids"`          // IDs handed out by this endpoint
	OK          uint64    `json:"ok"`           // successful replies
	BadRequest  uint64    `json:"bad_request"`  // 400 replies
	NotFound    uint64    `json:"not_found"`    // 404 replies (unknown sequences)
	Unavailable uint64    `json:"unavailable"`  // 503 replies
	Internal    uint64    `json:"internal"`     // 500 replies
	AsyncErrors uint64    `json:"async_errors"` // slow consumers etc. on the service's subscriptions
	// Sequences is every named sequence's state (sequence endpoints only).
	Sequences []sequence.Stats `json:"sequences,omitempty"`
}

// RingStats is the ring buffer's state as the stats show it.
type RingStats struct {
	WorkerID       uint64   `json:"worker_id"`
	WorkerIDs      []uint64 `json:"worker_ids"`     // every lane's, ascending
	MaxLanes       int      `json:"max_lanes"`      // lanes it may hold
	LanesClaimed   uint64   `json:"lanes_claimed"`  // extra lanes claimed since start
	LanesReleased  uint64   `json:"lanes_released"` // extra lanes given back since start
	PerSecond      uint64   `json:"ids_per_second"` // sustained by the lanes held
	Throttled      bool     `json:"throttled"`      // demand exceeds it right now
	Target         uint64   `json:"target"`         // IDs padding keeps ready (follows demand)
	Size           uint64   `json:"size"`
	Available      uint64   `json:"available"`
	LogicalSecond  int64    `json:"logical_second"`
	SecondsAhead   int64    `json:"seconds_ahead"`
	PaddingRounds  uint64   `json:"padding_rounds"`
	PutRejections  uint64   `json:"put_rejections"`
	TakeRejections uint64   `json:"take_rejections"`
	Claim          string   `json:"claim"` // "ok" or why the worker claim is not usable
}

func (s *Service) statsData(e *micro.Endpoint) any {
	st := s.src.State()
	claim := "ok"
	if s.cfg.ClaimStatus != nil {
		if err := s.cfg.ClaimStatus(); err != nil {
			claim = err.Error()
		}
	}
	d := EndpointData{
		Ring: RingStats{
			WorkerID:       st.WorkerID,
			WorkerIDs:      st.Lanes,
			MaxLanes:       st.MaxLanes,
			LanesClaimed:   st.LanesClaimed,
			LanesReleased:  st.LanesReleased,
			PerSecond:      st.PerSecond,
			Throttled:      st.Throttled,
			Target:         st.Target,
			Size:           st.Size,
			Available:      st.Available,
			LogicalSecond:  st.LogicalSecond,
			SecondsAhead:   st.SecondsAhead,
			PaddingRounds:  st.PaddingRounds,
			PutRejections:  st.PutRejections,
			TakeRejections: st.TakeRejections,
			Claim:          claim,
		},
		AsyncErrors: s.asyncErrors.Load(),
	}
	if c := s.endpoints[e.Name]; c != nil {
		d.IDs, d.OK, d.BadRequest, d.NotFound = c.ids.Load(), c.ok.Load(), c.badRequest.Load(), c.notFound.Load()
		d.Unavailable, d.Internal = c.unavailable.Load(), c.internal.Load()
	}
	if s.cfg.Sequences != nil && (e.Name == uidclient.EndpointSeqNext || e.Name == uidclient.EndpointSeqBatch) {
		d.Sequences = s.cfg.Sequences.Stats()
	}
	return d
}
