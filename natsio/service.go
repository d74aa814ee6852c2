package natsio

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/uid-dispenser/uid-dispenser/internal/retry"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// IDSource is where a Service takes its IDs. *uidcore.CachedGenerator
// implements it, and so does the dispenser's source that swaps in a new
// generator when a worker claim is lost for good (the service then calls
// Readvertise so that its metadata follows the worker ID).
type IDSource interface {
	NextN(ctx context.Context, dst []uint64) (int, error)
	// TryNextN takes what is ready without waiting (see
	// uidcore.CachedGenerator.TryNextN).
	TryNextN(dst []uint64) (int, error)
	Layout() uidcore.Layout
	WorkerID() uint64
	State() uidcore.State
}

// RunSource is an IDSource that answers bulk takes with runs of
// consecutive IDs reserved from its lanes, without putting each ID
// through the ring (uidcore.CachedGenerator.ReserveRuns): the service
// answers ranges batches of more than uidcore.SmallTake IDs from it.
type RunSource interface {
	ReserveRuns(ctx context.Context, dst []uidcore.Run, n uint64, wait bool) ([]uidcore.Run, uint64, error)
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
	// <prefix>.seq.<name>.next and .batch (protocol.SeqSubject).
	Sequences SequenceSource
	// SequenceHomes, in a fleet of regions, is the home region of every
	// sequence of the fleet (non-nil, even empty, with Region set). The
	// instance then subscribes next and batch only of the sequences homed
	// in Region, one endpoint per name, so that NATS routes the others'
	// requests to their home regions through the gateways; and it answers
	// <prefix>.seq.*.home for every sequence (protocol.EndpointSeqHome).
	// Nil: one wildcard endpoint each serves every name (no regions).
	SequenceHomes map[string]string

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
// when its connection is closed (a test holds the pinned version to it).
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
	advertised advertised // what svc's metadata and endpoints say
	stopped    bool
	notIssuing bool // SetIssuing(false): the ID endpoints are out of the queue group
	// notServingSequences: SetSequencesServing(false), the sequences'
	// next and batch are out of the queue group.
	notServingSequences bool
}

// advertised is what the micro metadata shows of the source and of the
// sequences, and whether the ID endpoints and the sequences' are
// subscribed.
type advertised struct {
	workerID         uint64
	layout           uidcore.Layout
	sequences        string // comma-separated, sorted (Sequences.Stats' order)
	issuing          bool
	servingSequences bool
}

// current is what the metadata should show now. s.mu must be held.
func (s *Service) current() advertised {
	a := advertised{workerID: s.src.WorkerID(), layout: s.src.Layout(), issuing: !s.notIssuing, servingSequences: !s.notServingSequences}
	if s.cfg.Sequences != nil && s.cfg.SequenceHomes != nil {
		a.sequences = strings.Join(s.homedHere(), ",") // fixed by the configuration
	} else if s.cfg.Sequences != nil {
		var names []string
		for _, st := range s.cfg.Sequences.Stats() {
			names = append(names, st.Name)
		}
		a.sequences = strings.Join(names, ",")
	}
	return a
}

// NewService adds the micro service to nc and starts serving src. Set nc's
// closed and error handlers before (Connect does): micro wraps them.
func NewService(nc *nats.Conn, src IDSource, cfg ServiceConfig) (*Service, error) {
	if src == nil {
		return nil, errors.New("natsio: NewService: nil IDSource")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("natsio: %w", err)
	}
	if cfg.QueueGroup == "" {
		cfg.QueueGroup = protocol.DefaultQueueGroup
	}
	if cfg.SubjectPrefix == "" {
		cfg.SubjectPrefix = protocol.DefaultSubjectPrefix
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = DefaultMaxBatch
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
			cfg.Description += "; named sequences: " + protocol.SeqSubject(cfg.SubjectPrefix, "<name>", "{next,batch}")
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Service{
		nc:        nc,
		cfg:       cfg,
		log:       cfg.Logger,
		src:       src,
		endpoints: map[string]*endpointCounters{},
		otel:      newServerTelemetry(cfg.QueueGroup, cfg.TracerProvider, cfg.MeterProvider),
	}
	for _, name := range []string{protocol.EndpointNext, protocol.EndpointBatch, protocol.EndpointParse} {
		s.endpoints[protocol.Subject(cfg.SubjectPrefix, name)] = &endpointCounters{}
	}
	for _, e := range s.sequenceEndpoints() {
		s.endpoints[e.subject] = &endpointCounters{}
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
	if err := flushAcrossReconnects(nc, 10*time.Second); err != nil {
		_ = s.svc.Stop()
		s.capacity.stop()
		s.segments.stop()
		return nil, fmt.Errorf("natsio: subscribe the service endpoints: %w", err)
	}
	return s, nil
}

// flushAcrossReconnects is a round trip to the server within timeout,
// asked again when a reconnect ends it: nats.go fails the flushes pending
// at a disconnect with nats.ErrConnectionClosed though the connection
// lives on, and it sends the subscriptions again on the reconnect, so a
// round trip after it confirms them. (A dispenser whose NATS server was
// paused just as it joined its queue group exited 1 on that error: the
// fault harness.)
func flushAcrossReconnects(nc *nats.Conn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var pauses retry.Backoff
	for {
		err := nc.FlushWithContext(ctx)
		if err == nil || !errors.Is(err, nats.ErrConnectionClosed) || nc.IsClosed() {
			return err
		}
		if werr := retry.Sleep(ctx, pauses.Next()); werr != nil {
			return fmt.Errorf("%w (reconnecting: %w)", err, werr)
		}
	}
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
	if !shown.issuing {
		metadata["issuing"] = "false" // next and batch are not subscribed: SetIssuing
	}
	if s.cfg.Sequences != nil {
		// The sequences known at start and, readvertised, those served
		// since (`nats micro info`); in a fleet of regions those homed
		// here, and every sequence's home.
		metadata["sequences"] = shown.sequences
		if s.cfg.SequenceHomes != nil {
			metadata["sequence_homes"] = s.homesText()
		}
		if !shown.servingSequences {
			metadata["serving_sequences"] = "false" // their next and batch are not subscribed: SetSequencesServing
		}
	}
	svc, err := micro.AddService(s.nc, micro.Config{
		Name:         protocol.ServiceName,
		Version:      cmp.Or(s.cfg.Version, protocol.ServiceVersion),
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
	type endpoint struct {
		name string
		fn   handlerFunc
		meta map[string]string
	}
	endpoints := []endpoint{
		{protocol.EndpointNext, s.next, map[string]string{"reply": "one decimal ID"}},
		{protocol.EndpointBatch, s.batch, map[string]string{
			"reply":            "newline-separated decimal IDs, or 8-byte big-endian IDs with header " + protocol.EncodingHeader + ": " + protocol.EncodingBinary + ", or runs of consecutive IDs (first, count: 16 bytes) with " + protocol.EncodingRanges,
			"max_batch_binary": strconv.Itoa(maxBatchFor(s.cfg.MaxBatch, maxPayload, protocol.Binary)),
			"max_batch_text":   strconv.Itoa(maxBatchFor(s.cfg.MaxBatch, maxPayload, protocol.Decimal)),
			"max_batch_ranges": strconv.Itoa(s.idBatchLimit(protocol.Ranges)),
		}},
		{protocol.EndpointParse, s.parse, map[string]string{"reply": "JSON {UID, timestamp, workerId, sequence}"}},
	}
	for _, e := range endpoints {
		if !shown.issuing && (e.name == protocol.EndpointNext || e.name == protocol.EndpointBatch) {
			continue // not subscribed while out of the queue group (SetIssuing(false))
		}
		err := group.AddEndpoint(e.name, s.handle(e.name, protocol.Subject(s.cfg.SubjectPrefix, e.name), e.fn, nil), limits, micro.WithEndpointMetadata(e.meta))
		if err != nil {
			_ = svc.Stop()
			return fmt.Errorf("natsio: add endpoint %s: %w", protocol.Subject(s.cfg.SubjectPrefix, e.name), err)
		}
	}
	if err := s.addSequenceEndpoints(svc, limits, maxPayload, shown.servingSequences); err != nil {
		_ = svc.Stop()
		return err
	}
	s.svc, s.advertised = svc, shown
	return nil
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
	if err := flushAcrossReconnects(s.nc, 5*time.Second); err != nil {
		s.log.Warn("readvertise: the new service's subscriptions not confirmed; stopping the old one anyway", "err", err)
	}
	if err := prev.Stop(); err != nil {
		return err
	}
	// Stop sent the old subscriptions' unsubscribes; once the server has
	// processed them (the flush's PONG), nothing reaches the old service
	// (a PING right after Readvertise met it, and its old worker ID).
	if err := flushAcrossReconnects(s.nc, 5*time.Second); err != nil {
		s.log.Warn("readvertise: the old service's unsubscribes not confirmed", "err", err)
	}
	return nil
}

// SetIssuing puts the ID endpoints (next and batch) in the queue group
// (true, the default) or takes them out (false); parse and the sequences'
// endpoints stay. An instance that cannot issue IDs for a while (its
// worker claim lost, a new one not durable yet) leaves, so that the
// group's other members get the requests instead of it answering 503s;
// a lone instance's callers then get no responders, which clients retry.
// The micro service is added again as by Readvertise (a new service ID,
// no gap for the endpoints that stay); requests already delivered are
// still answered.
func (s *Service) SetIssuing(on bool) error { return s.setInGroup(&s.notIssuing, on) }

// SetSequencesServing puts the sequences' next and batch endpoints in
// the queue group (true, the default) or takes them out (false); the ID
// endpoints, parse and the sequences' home stay. An instance whose
// sequence store is out of reach leaves, so that the group's other
// members answer the sequences instead of its 503s; when every member
// left, callers get no responders, which clients retry. As SetIssuing,
// it adds the micro service again, and requests already delivered are
// still answered.
func (s *Service) SetSequencesServing(on bool) error {
	return s.setInGroup(&s.notServingSequences, on)
}

// setInGroup sets out, a flag of endpoints out of the queue group, to
// !in and has the service follow it.
func (s *Service) setInGroup(out *bool, in bool) error {
	s.mu.Lock()
	*out = !in
	s.mu.Unlock()
	return s.Readvertise()
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
