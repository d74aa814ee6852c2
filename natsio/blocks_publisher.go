package natsio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/natsio/internal/problemlog"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// BlockIDSource is where a BlockPublisher takes the IDs of its blocks:
// *uidcore.CachedGenerator's batch take, or the dispenser's source that
// swaps in a new generator when it claims a new worker ID. The IDs NextN
// has put in dst count as issued even with an error.
type BlockIDSource interface {
	NextN(ctx context.Context, dst []uint64) (int, error)
	Layout() uidcore.Layout
}

// jsErrCodeStoreFailed is the JetStream API error a publish gets when the
// stream refuses to store it; with the description "maximum messages
// exceeded" it means a capped discard-new stream is full, with "maximum
// bytes exceeded" that it holds its MaxBytes.
const jsErrCodeStoreFailed jetstream.ErrorCode = 10077

// The JetStream API errors (nats-server 2.15, server/errors.json) a
// publish gets when there is no room for it beyond the stream's own
// message cap: the server's store at max_file_store or max_memory_store
// (10023 "insufficient resources"), the account's JetStream limits (10002
// "resource limits exceeded for account"), and 10047 and 10028, their
// storage and memory kinds. Like the full stream's refusal they are the
// server's definitive answer: the block is not stored.
const (
	jsErrCodeInsufficientResources jetstream.ErrorCode = 10023
	jsErrCodeAccountResources      jetstream.ErrorCode = 10002
	jsErrCodeStorageResources      jetstream.ErrorCode = 10047
	jsErrCodeMemoryResources       jetstream.ErrorCode = 10028
)

// maxPressureBackoff bounds the wait between rounds while the store is at
// its limits: room comes back only as consumers take blocks (or the
// limits are raised), and a round then costs one depth check and at most
// one refused block.
const maxPressureBackoff = time.Second

// publishWindow is the most blocks a publisher has in flight at once.
// When several publishers see the same shortfall, together they overshoot
// the cap (those blocks are refused and their IDs discarded); each
// publisher therefore halves its window after a refusal and widens it by
// one block after a round without, so the publishers share the shortfall
// instead of racing for it.
const publishWindow = 8

// publishAckTimeout bounds the wait for a block's ack, stopping or not:
// past it the publish failed (its outcome unknown, never published again).
const publishAckTimeout = 5 * time.Second

// minBlocksPoll is the first wait before the depth is checked again after
// the stream was found short and topped up: at ten million IDs per
// second, consumers drain 64 default blocks in 26ms.
const minBlocksPoll = time.Millisecond

// maxBlockAge bounds how old a refused block may be when it is published
// again: the first of its IDs carries a second that began less than this
// long ago. A block taken fresh from the ring is within it already (the
// generator's MaxLag keeps IDs of the current second or the one before),
// so a block published late is no older than one published at once.
const maxBlockAge = 2 * time.Second

// BlockPublisherStats count what a BlockPublisher did since it started.
type BlockPublisherStats struct {
	Published uint64 // blocks stored in the stream (a republished block counts once)
	// Refused counts publishes the full stream refused (the normal stop
	// signal). A refused block is not stored: the publisher keeps it and
	// publishes it again, first thing, once there is room.
	Refused uint64
	// Pressure counts publishes refused because JetStream had no room:
	// the stream's MaxBytes, the server's store or the account's limits.
	// Those blocks are kept too.
	Pressure uint64
	Failed   uint64 // blocks given up after errors (outcome unknown: never published again)
	// Expired counts blocks given up because their first ID was older
	// than maxBlockAge (2 s) when they were to go out (refused blocks
	// held until then, or new ones from a starved machine), or were still
	// held when the publisher stopped.
	Expired      uint64
	IDsPublished uint64 // IDs in the published blocks
	IDsDiscarded uint64 // IDs of failed and expired blocks: issued, never handed out
	Depth        uint64 // blocks in the stream at the last check
	// MaxAge is the oldest a stored block's first ID was when it was
	// published: the time since its second began.
	MaxAge time.Duration
	// MaxAhead is the furthest the second of a stored block's last ID
	// ran ahead of the clock when it was published (0: none did).
	MaxAhead time.Duration
}

// BlockPublisher keeps a block stream at its target depth with blocks of
// IDs from a BlockIDSource: it checks the stream's depth, publishes as
// many blocks as are missing, and checks again at once while consumers
// drain it; once the stream is full it checks after 1ms, then twice as
// long each time up to the poll interval while it stays full. A publish refused
// because the stream is full ends the round quietly; the refused block is
// held and published again, unchanged, in the next round with room (or
// given up once older than maxBlockAge), so that publishers racing for
// the same room throw no IDs away. A block whose outcome is unknown is
// never published again.
// Blocks in the stream stay valid after the publisher stops: they are IDs
// its claim issued, which a later claim on the same worker ID never
// repeats.
type BlockPublisher struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	cfg    BlocksConfig
	log    *slog.Logger
	src    BlockIDSource
	ids    []uint64      // the run goroutine's take buffer (binary blocks, or a source without runs)
	runs   []uidcore.Run // the run goroutine's reservation buffer

	published, refused, pressure, failed, expired, idsPublished, idsDiscarded, depth atomic.Uint64
	maxAge, maxAhead                                                                 atomic.Int64 // nanoseconds

	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once

	otel producerTelemetry

	// Owned by the run goroutine.
	window int // blocks per round, up to publishWindow
	// held are blocks refused for lack of room, oldest first: published
	// again before any new IDs are taken.
	held                                        []*outBlock
	depthProblem, sourceProblem, publishProblem problemlog.Log
	pressureProblem                             problemlog.Log // the store at its limits: one warning an episode
}

// NewBlockPublisher creates or updates the block stream (idempotent:
// several dispensers may start at once) and starts topping it up from
// src. Zero values of cfg take the defaults. Stop it before closing src.
func NewBlockPublisher(ctx context.Context, nc *nats.Conn, src BlockIDSource, cfg BlocksConfig) (*BlockPublisher, error) {
	if src == nil {
		return nil, errors.New("natsio: NewBlockPublisher: nil BlockIDSource")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults().regional()
	// 8 bytes per ID plus room for the headers (runs take a few dozen).
	if need := int64(cfg.BlockSize)*8 + 1024; cfg.BinaryBlocks && need > nc.MaxPayload() {
		return nil, &setting.Error{Field: "BlockSize",
			Reason: fmt.Sprintf("a block of %d IDs needs %d bytes; the server allows %d", cfg.BlockSize, need, nc.MaxPayload())}
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(2*publishWindow),
		jetstream.WithPublishAsyncTimeout(publishAckTimeout))
	if err != nil {
		return nil, fmt.Errorf("natsio: blocks: %w", err)
	}
	// A block is handed to one consumer by the stream's acknowledgement
	// bookkeeping, replicated like a KV update: not on a server whose
	// replicated streams cannot be trusted with it.
	if err := natsconn.CheckReplicated(nc, cfg.Replicas, "blocks stream "+cfg.Stream, "Replicas"); err != nil {
		return nil, fmt.Errorf("natsio: blocks: %w", err)
	}
	stream, err := ensureBlockStream(ctx, js, cfg.streamConfig())
	if err != nil {
		return nil, err
	}
	if err := ensureClaimsBucket(ctx, js, cfg); err != nil {
		return nil, err
	}
	if info := stream.CachedInfo(); info != nil && info.Cluster != nil {
		// Where the blocks are, for the operator of a supercluster.
		cfg.Logger.Info("natsio: blocks stream ready", "stream", cfg.Stream, "subject", cfg.Subject, "cluster", info.Cluster.Name)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	p := &BlockPublisher{
		js:     js,
		stream: stream,
		cfg:    cfg,
		log:    cfg.Logger.With("stream", cfg.Stream),
		src:    src,
		window: publishWindow,
		cancel: cancel,
		done:   make(chan struct{}),
		otel:   newProducerTelemetry(cfg.TracerProvider),
	}
	p.depthProblem = problemlog.Log{Log: p.log, What: "blocks: stream depth check"}
	p.sourceProblem = problemlog.Log{Log: p.log, What: "blocks: taking IDs"}
	p.publishProblem = problemlog.Log{Log: p.log, What: "blocks: publish"}
	p.pressureProblem = problemlog.Log{Log: p.log, What: "blocks: publish (JetStream store at its limits, backing off)"}
	go p.run(runCtx)
	return p, nil
}

// streamAttemptTimeout bounds one create-or-update of the block stream.
const streamAttemptTimeout = 2 * time.Second

// ensureBlockStream creates the stream or brings an existing one to cfg.
// Two publishers creating it at the same moment race; the loser updates.
// On a cluster the meta leader may leave a concurrent create of a
// replicated stream unanswered (three dispensers starting at once all
// timed out and exited, found by the soak): each attempt is bounded and a
// timed-out attempt is retried, which is safe since it is idempotent.
func ensureBlockStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	var err error
	for range 5 {
		var s jetstream.Stream
		actx, cancel := context.WithTimeout(ctx, streamAttemptTimeout)
		s, err = js.CreateOrUpdateStream(actx, cfg)
		cancel()
		if err == nil {
			return s, nil
		}
		if ctx.Err() != nil || !(errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) || errors.Is(err, context.DeadlineExceeded)) {
			break
		}
	}
	return nil, fmt.Errorf("natsio: blocks: create or update stream %s: %w", cfg.Name, err)
}

// Stats returns the publisher's counters.
func (p *BlockPublisher) Stats() BlockPublisherStats {
	return BlockPublisherStats{
		Published:    p.published.Load(),
		Refused:      p.refused.Load(),
		Pressure:     p.pressure.Load(),
		Failed:       p.failed.Load(),
		Expired:      p.expired.Load(),
		IDsPublished: p.idsPublished.Load(),
		IDsDiscarded: p.idsDiscarded.Load(),
		Depth:        p.depth.Load(),
		MaxAge:       time.Duration(p.maxAge.Load()),
		MaxAhead:     time.Duration(p.maxAhead.Load()),
	}
}

// Stop stops publishing and waits, until ctx is done, for the publishing
// goroutine to end; after it returns without error the source is no
// longer used. Blocks whose publish was still unconfirmed may or may not
// be in the stream; either way their IDs are never used twice.
//
// The connection keeps the subscription for the publishes' acks, and
// nats.go's goroutine that watches it for reconnects, until it closes.
// jetstream's CleanupPublisher would remove both, but when it runs
// before that goroutine, started by the first publish, has read its
// status channel, the goroutine reads nil and waits forever (nats.go
// v1.55.0): a publisher stopped soon after its first publish, as a
// benchmark's first short run does, leaked it.
func (p *BlockPublisher) Stop(ctx context.Context) error {
	p.stopOnce.Do(p.cancel)
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("natsio: blocks: stop publisher: %w", ctx.Err())
	}
}

func (p *BlockPublisher) run(ctx context.Context) {
	defer close(p.done)
	defer p.expire(p.held) // stopping: what is held is never published
	timer := time.NewTimer(0)
	defer timer.Stop()
	poll := p.cfg.PollInterval
	var wait time.Duration
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		result := p.topUp(ctx)
		if ctx.Err() != nil {
			return
		}
		switch result {
		case roundStreamFailed:
			// Back off (up to 5s) while the stream cannot be checked.
			wait = min(max(2*wait, poll), max(5*time.Second, poll))
		case roundPressure:
			// No room in the store: back off until consumers make some.
			wait = min(max(2*wait, poll), max(maxPressureBackoff, poll))
		case roundSourceFailed:
			// The ring ran dry (consumers outrun the generator) or the
			// generator is being replaced: give it a poll interval.
			wait = poll
		case roundShort:
			wait = 0
		default:
			// Full. Consumers that just drained it may drain it again
			// soon: check again quickly, then slow down to the poll
			// interval while it stays full.
			wait = min(max(2*wait, minBlocksPoll), poll)
		}
		timer.Reset(wait)
	}
}

// outBlock is a block taken from the source, encoded, on its way to the
// stream: published, or held after a refusal to be published again.
type outBlock struct {
	msg         *nats.Msg
	ids         int
	first, last time.Time // the seconds of its first and last IDs
}

// pendingBlock is a block whose publish awaits its acknowledgement.
type pendingBlock struct {
	future jetstream.PubAckFuture
	*outBlock
	sent time.Time
	span trace.Span
}

// roundResult is how a top-up round ended.
type roundResult int

const (
	roundFull         roundResult = iota // nothing missing, or a block was refused
	roundShort                           // published all it meant to: the stream may still be short
	roundStreamFailed                    // the depth could not be checked
	roundSourceFailed                    // the source gave fewer IDs than asked
	roundPressure                        // a block was refused for lack of room in the store
)

// topUp publishes up to a window of the blocks the stream is short of.
func (p *BlockPublisher) topUp(ctx context.Context) roundResult {
	info, err := p.stream.Info(ctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// Deleted under us (by an operator, or the soak): create it
		// again. Its blocks went with it, so nothing here is used twice.
		var s jetstream.Stream
		if s, err = ensureBlockStream(ctx, p.js, p.cfg.streamConfig()); err == nil {
			p.log.Warn("blocks: stream was deleted, created again")
			p.stream = s
			info, err = s.Info(ctx)
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			p.depthProblem.Fail(err)
		}
		return roundStreamFailed
	}
	p.depthProblem.OK()
	p.depth.Store(info.State.Msgs)
	missing := int64(p.cfg.TargetDepth) - int64(info.State.Msgs)
	if missing <= 0 {
		return roundFull
	}
	want := int(min(missing, int64(p.window)))
	pending := make([]pendingBlock, 0, want)
	var srcErr error
	for range want {
		// Held blocks first: room found is room for them, and new IDs are
		// taken only for room no held block fills.
		blk, sent, err := p.nextBlock(ctx)
		if blk != nil {
			span := p.otel.start(ctx, blk.msg, blk.ids)
			f, perr := p.js.PublishMsgAsync(blk.msg, jetstream.WithExpectStream(p.cfg.Stream))
			if perr != nil {
				p.otel.end(span, "failed", perr)
				p.giveUp(blk.ids, perr)
				break
			}
			pending = append(pending, pendingBlock{future: f, outBlock: blk, sent: sent, span: span})
		}
		if err != nil {
			srcErr = err
			break
		}
	}
	stored := 0
	full, pressed := false, false
	for _, pb := range pending {
		switch outcome := p.await(pb); outcome {
		case blockStored:
			stored++
			p.otel.end(pb.span, "stored", nil)
		case blockRefused:
			full = true
			p.otel.end(pb.span, "refused", nil) // the stream is full: back-pressure, not an error
		case blockPressure:
			full, pressed = true, true
			p.otel.end(pb.span, "refused", errStorePressure)
		default:
			p.otel.end(pb.span, "failed", errBlockNotStored)
		}
	}
	if full {
		p.window = max(p.window/2, 1)
	} else {
		p.window = min(p.window+1, publishWindow)
	}
	if srcErr != nil {
		if ctx.Err() == nil {
			p.sourceProblem.Fail(srcErr)
		}
		return roundSourceFailed
	}
	p.sourceProblem.OK()
	if pressed {
		return roundPressure
	}
	if full || stored < want {
		return roundFull
	}
	return roundShort
}

// nextBlock is the oldest held block still young enough to publish
// (maxBlockAge, checked as it goes out: the time returned), else a new
// one from the source. A new block already that old (the machine starved
// the ring's lag check or this goroutine) is given up as well: no block
// goes out with IDs more than 2 s behind the clock. It returns a nil
// block when the source gave no IDs, with the source's error.
func (p *BlockPublisher) nextBlock(ctx context.Context) (*outBlock, time.Time, error) {
	for len(p.held) > 0 {
		blk := p.held[0]
		p.held[0] = nil
		p.held = p.held[1:]
		if now := time.Now(); now.Sub(blk.first) < maxBlockAge {
			return blk, now, nil
		}
		p.expire([]*outBlock{blk})
	}
	blk, err := p.takeBlock(ctx)
	now := time.Now()
	if blk != nil && now.Sub(blk.first) >= maxBlockAge {
		p.expire([]*outBlock{blk})
		blk = nil
	}
	return blk, now, err
}

// takeBlock takes up to a block of IDs from the source and encodes them:
// as runs reserved without the ring when the source can (RunSource), as
// runs of the IDs it took otherwise, or in the binary form. It returns a
// nil block when it got none, and the source's error.
func (p *BlockPublisher) takeBlock(ctx context.Context) (*outBlock, error) {
	src := p.src
	var (
		runs []protocol.Run
		ids  []uint64
		err  error
	)
	if rs, ok := src.(RunSource); ok && !p.cfg.BinaryBlocks {
		// Waits for capacity until a second after the wall clock's next
		// second begins, no longer: a block reserved over a longer wait
		// would start old. At the ahead bound the lanes allow the next
		// second's IDs only once it begins, and a wait of one second from
		// now ended a few milliseconds after that (a take just after a
		// second's start), before a loaded machine's padding answered: the
		// take failed where it should have waited for the next second.
		rctx, cancel := context.WithDeadline(ctx, time.Now().Truncate(time.Second).Add(2*time.Second))
		var reserved []uidcore.Run
		reserved, _, err = rs.ReserveRuns(rctx, p.runs[:0], uint64(p.cfg.BlockSize), true)
		cancel()
		p.runs = reserved
		runs = make([]protocol.Run, len(reserved))
		for i, r := range reserved {
			runs[i] = protocol.Run(r)
		}
	} else {
		if cap(p.ids) < p.cfg.BlockSize {
			p.ids = make([]uint64, p.cfg.BlockSize)
		}
		var n int
		n, err = src.NextN(ctx, p.ids[:p.cfg.BlockSize])
		ids = p.ids[:n]
		runs = protocol.RunsOf(nil, ids)
	}
	if len(runs) == 0 {
		if err == nil {
			err = errors.New("natsio: blocks: source gave no IDs")
		}
		return nil, err
	}
	n := protocol.CountOf(runs)
	layout := src.Layout()
	first, perr := layout.Parse(runs[0].First)
	var last uidcore.Parts
	if perr == nil {
		last, perr = layout.Parse(runs[len(runs)-1].Last())
	}
	if perr != nil {
		// Not an ID of any valid layout: never publish it.
		p.idsDiscarded.Add(n)
		return nil, fmt.Errorf("natsio: blocks: %w", perr)
	}
	var msg *nats.Msg
	if p.cfg.BinaryBlocks {
		msg = protocol.EncodeBlock(p.cfg.Subject, first.WorkerID, ids)
	} else {
		msg = protocol.EncodeBlockRuns(p.cfg.Subject, first.WorkerID, runs)
	}
	return &outBlock{msg: msg, ids: int(n), first: first.Time, last: last.Time}, err
}

// expire gives up held blocks: their IDs are discarded.
func (p *BlockPublisher) expire(blocks []*outBlock) {
	for _, b := range blocks {
		p.expired.Add(1)
		p.idsDiscarded.Add(uint64(b.ids))
	}
}

type blockOutcome int

// errBlockNotStored marks the producer span of a block whose publish
// failed (the failure itself is logged by await).
var errBlockNotStored = errors.New("natsio: blocks: block not stored")

// errStorePressure marks the producer span of a block refused for lack
// of room in the JetStream store.
var errStorePressure = errors.New("natsio: blocks: JetStream store at its limits")

const (
	blockStored blockOutcome = iota
	blockRefused
	blockPressure
	blockFailed
)

// await waits for a block's acknowledgement. A publish whose outcome is
// unknown (no acknowledgement, connection trouble) may have been stored,
// and its block used: it is never published again, its IDs are given up.
// A retry with the same Nats-Msg-Id would be stored once only while the
// stream remembers that ID: a stream deleted and created again meanwhile
// does not, and stores the block a second time, for a second source to
// use (verify/blocks.pml -DPUBLISHER_RETRY).
//
// A refusal (the stream full, or JetStream without room) is the server's
// definite answer that the block is not stored: the block is held and
// published again as it is, same message ID, once there is room, so its
// IDs are not thrown away (verify/blocks.pml, the publisher's refusal).
func (p *BlockPublisher) await(pb pendingBlock) blockOutcome {
	var err error
	select {
	case ack := <-pb.future.Ok():
		if ack != nil && ack.Duplicate {
			// The stream knew the message ID: this publish stored
			// nothing. Its IDs are where the first one put them, or
			// nowhere; never use them here.
			p.giveUp(pb.ids, errors.New("natsio: blocks: the stream took the block for a duplicate"))
			return blockFailed
		}
		p.stored(pb)
		return blockStored
	case err = <-pb.future.Err():
		// Stopping does not cut the wait: the block went out, and its ack
		// (or the publish ack timeout, publishAckTimeout) tells whether it
		// is stored, for the sources, or not; counting it discarded
		// unawaited miscounted blocks stored and in use, and broke
		// IDsDiscarded's sum of failed and expired blocks.
	}
	switch {
	case isStreamFull(err):
		p.refused.Add(1)
		p.held = append(p.held, pb.outBlock)
		p.log.Debug("blocks: stream full, block refused and held", "ids", pb.ids)
		return blockRefused
	case isStorePressure(err):
		p.pressure.Add(1)
		p.held = append(p.held, pb.outBlock)
		p.pressureProblem.Fail(err)
		return blockPressure
	}
	p.giveUp(pb.ids, err)
	return blockFailed
}

func (p *BlockPublisher) stored(pb pendingBlock) {
	p.published.Add(1)
	p.idsPublished.Add(uint64(pb.ids))
	raiseTo(&p.maxAge, int64(pb.sent.Sub(pb.first)))
	raiseTo(&p.maxAhead, int64(pb.last.Sub(pb.sent)))
	p.publishProblem.OK()
	p.pressureProblem.OK()
}

// raiseTo sets v to d if d is greater.
func raiseTo(v *atomic.Int64, d int64) {
	for {
		cur := v.Load()
		if d <= cur || v.CompareAndSwap(cur, d) {
			return
		}
	}
}

func (p *BlockPublisher) giveUp(ids int, err error) {
	p.failed.Add(1)
	p.idsDiscarded.Add(uint64(ids))
	p.publishProblem.Fail(err)
}

// isStreamFull tells whether err is a capped discard-new stream refusing
// a message because it holds its maximum.
func isStreamFull(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrCodeStoreFailed &&
		strings.Contains(apiErr.Description, "maximum messages")
}

// isStorePressure tells whether err is JetStream refusing a message for
// lack of room: the stream at its MaxBytes, the server's store or the
// account at its limits.
func isStorePressure(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case jsErrCodeInsufficientResources, jsErrCodeAccountResources, jsErrCodeStorageResources, jsErrCodeMemoryResources:
		return true
	case jsErrCodeStoreFailed:
		return strings.Contains(apiErr.Description, "maximum bytes")
	}
	return false
}
