package uidclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/retry"
	"github.com/uid-dispenser/uid-dispenser/natsio/internal/problemlog"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
)

// ErrBlockSourceClosed is returned by a BlockSource after Close.
var ErrBlockSourceClosed = errors.New("uidclient: block source closed")

// BlockSourceConfig configures a BlockSource. Zero values take defaults.
type BlockSourceConfig struct {
	Stream   string // default protocol.DefaultBlocksStream
	Consumer string // durable pull consumer shared by all sources, default DefaultBlocksConsumer
	// AckWait is the consumer's ack wait: a block not acknowledged within
	// it is redelivered (and then terminated by whoever gets it). Default
	// DefaultBlocksAckWait. Every source sharing the consumer should use
	// the same value: each one updates the consumer to its own.
	AckWait time.Duration
	// FetchWait is how long one pull waits for a block before it asks
	// again (default DefaultBlocksFetchWait).
	FetchWait time.Duration
	// LowWater: when no block is fetched ahead and fewer IDs than this
	// remain in the block in use, the next block is fetched in the
	// background. Default: the largest block received so far, at least
	// DefaultBlocksLowWater (a whole default block), so the next block
	// is fetched as soon as the last one at hand comes into use,
	// whatever size the dispensers publish.
	LowWater int
	// LossWindow is W, the longest window of acknowledged writes the
	// blocks stream's servers may forget (the dispensers'
	// DISPENSER_STORE_LOSS_WINDOW; default DefaultBlocksLossWindow): a
	// block is used only after it was claimed, W waited and the claim
	// read back (blocks_claims.go), so a block's IDs come W after it was
	// fetched: the source claims ahead by LowWater, doubled (once per W)
	// while takers wait; set LowWater to the IDs taken in W to skip that
	// ramp. Negative: none, no claims, only for servers that sync every
	// write (sync_interval: always).
	LossWindow time.Duration
	Logger     *slog.Logger // default slog.Default()
}

// BlockSourceStats count what a BlockSource did since it started.
type BlockSourceStats struct {
	BlocksUsed  uint64 // blocks delivered for the first time and acknowledged: their IDs are handed out
	Redelivered uint64 // blocks terminated because this was not their first delivery
	AckFailed   uint64 // blocks terminated because the double ack failed
	Malformed   uint64 // blocks terminated because they did not decode
	// ConsumerChanged counts blocks acknowledged but given up because the
	// consumer was deleted or re-created (or could not be checked)
	// between the bind and the ack: another source may have the block too.
	ConsumerChanged uint64
	IDsUsed         uint64 // IDs of the used blocks
	// ClaimRefused counts blocks refused because another source had
	// claimed them (the stream forgot that they were used), or because
	// the claim read back after the loss window was not this source's.
	ClaimRefused uint64
	// ClaimFailed counts blocks given up because the claims bucket did
	// not answer (the claim, or its read back, failed).
	ClaimFailed uint64
	// ClaimAhead is how many IDs the source keeps at hand and claimed
	// ahead with a loss window: LowWater, doubled each time takers found
	// none at hand (up to 1,024 LowWaters).
	ClaimAhead uint64
}

// BlockSource hands out IDs from prefilled blocks, each used by exactly
// one source (how: docs/blocks.md). It is safe for concurrent use.
type BlockSource struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg BlockSourceConfig
	log *slog.Logger

	// chain holds the IDs at hand, as runs: takers take from it without
	// a lock; one goroutine alone appends checked blocks to it: the
	// checker (settle), or with a loss window the mature loop.
	chain rangeChain

	mu sync.Mutex // guards the fields below
	// Blocks acknowledged and awaiting the consumer check: toCheck are
	// not taken by the checker yet, checking counts those and the ones
	// it is checking.
	toCheck  []heldBlock
	checking int

	checkWake chan struct{} // wakes the checker (capacity 1)
	rebind    atomic.Bool   // the consumer changed (the checker) or an ack met no responder (claim): bind again

	want   chan struct{} // wakes the fetcher (capacity 1): the chain's wake
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	blocksUsed, redelivered, ackFailed, malformed, idsUsed, consumerChanged atomic.Uint64

	// Claims (blocks_claims.go), with a loss window only: the blocks
	// claimed and waiting it out (guarded by mu), in claim order. The
	// mature loop, not the checker, then hands blocks to the takers.
	lossWindow   time.Duration
	claimsBucket string
	token        string
	maturing     []blockClaim
	maturingIDs  uint64
	claimDepth   uint64    // the IDs to keep at hand and claimed ahead (claimAhead)
	takerWaits   uint64    // the chain's waits at the last doubling
	deepened     time.Time // the last doubling
	matureWake   chan struct{}
	waitLoss     func(ctx context.Context, d time.Duration) error // retry.Sleep; tests replace it
	claimProblem problemlog.Log

	claims, claimRefused, claimFailed atomic.Uint64
	// lowWater is the low-water mark in effect: cfg.LowWater, raised to
	// the largest block received when followBlocks (LowWater left 0).
	lowWater     atomic.Uint64
	followBlocks bool

	// beforeAck, when set (tests), runs after a block is fetched and
	// before it is acknowledged.
	beforeAck func(meta *jetstream.MsgMetadata, ids []uint64)
	// fetcherIdle, when set (tests), runs each time the fetcher, its last
	// pull ended, waits to be woken: until then it asks for no block.
	fetcherIdle func()
}

// NewBlockSource starts a block source on nc. It binds (creating or
// updating) the durable consumer in the background, retrying while the
// stream does not exist yet, so a service may start before the
// dispensers; Next waits for the first block. Close it when done.
func NewBlockSource(nc *nats.Conn, cfg BlockSourceConfig) (*BlockSource, error) {
	return newBlockSource(nc, cfg, sourceHooks{})
}

// sourceHooks are the tests' hooks: beforeAck and fetcherIdle (see the
// fields), and waitLoss, the wait of the loss window before a claim is
// read back (a clock; nil: retry.Sleep).
type sourceHooks struct {
	beforeAck   func(*jetstream.MsgMetadata, []uint64)
	fetcherIdle func()
	waitLoss    func(ctx context.Context, d time.Duration) error
}

// newBlockSource is NewBlockSource with hooks for tests.
func newBlockSource(nc *nats.Conn, cfg BlockSourceConfig, hooks sourceHooks) (*BlockSource, error) {
	if cfg.Stream == "" {
		cfg.Stream = protocol.DefaultBlocksStream
	}
	if cfg.Consumer == "" {
		cfg.Consumer = DefaultBlocksConsumer
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = DefaultBlocksAckWait
	}
	if cfg.FetchWait == 0 {
		cfg.FetchWait = DefaultBlocksFetchWait
	}
	followBlocks := cfg.LowWater == 0
	if followBlocks {
		cfg.LowWater = DefaultBlocksLowWater
	}
	if cfg.LossWindow == 0 {
		cfg.LossWindow = DefaultBlocksLossWindow
	}
	switch {
	case !streamNamePattern.MatchString(cfg.Stream):
		return nil, fmt.Errorf("uidclient: BlockSource: %q is not a valid stream name", cfg.Stream)
	case !streamNamePattern.MatchString(cfg.Consumer):
		return nil, fmt.Errorf("uidclient: BlockSource: %q is not a valid consumer name", cfg.Consumer)
	case cfg.AckWait < 10*time.Millisecond || cfg.FetchWait < 10*time.Millisecond:
		return nil, errors.New("uidclient: BlockSource: AckWait and FetchWait must be at least 10ms")
	case cfg.LowWater < 0:
		return nil, errors.New("uidclient: BlockSource: LowWater must not be negative")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("uidclient: BlockSource: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &BlockSource{
		nc:        nc,
		js:        js,
		cfg:       cfg,
		log:       cfg.Logger.With("stream", cfg.Stream, "consumer", cfg.Consumer),
		want:      make(chan struct{}, 1),
		checkWake: make(chan struct{}, 1),
		cancel:    cancel,
		done:      make(chan struct{}),
		beforeAck: hooks.beforeAck,

		fetcherIdle: hooks.fetcherIdle,

		lossWindow:   max(cfg.LossWindow, 0),
		claimDepth:   uint64(cfg.LowWater),
		claimsBucket: protocol.BlockClaimsBucket(cfg.Stream),
		token:        newClaimToken(),
		matureWake:   make(chan struct{}, 1),
		waitLoss:     hooks.waitLoss,

		followBlocks: followBlocks,
	}
	s.lowWater.Store(uint64(cfg.LowWater))
	if s.waitLoss == nil {
		s.waitLoss = retry.Sleep
	}
	s.claimProblem = problemlog.Log{Log: s.log, What: "blocks: claim (bucket " + s.claimsBucket + ")"}
	s.chain.init(s.want)
	go s.run(ctx)
	return s, nil
}

// Next returns one ID, waiting (until ctx is done) for a block when none
// is at hand. A take is one atomic add on the run in use (rangeChain).
func (s *BlockSource) Next(ctx context.Context) (uint64, error) {
	if id, ok := s.chain.take(); ok {
		return id, nil
	}
	id, err := s.chain.next(ctx)
	return id, s.takeErr(err)
}

// NextN fills dst with IDs, spanning blocks as needed, waiting (until ctx
// is done) for blocks when none is at hand. With an error it returns how
// many IDs it did put in dst; those are valid.
func (s *BlockSource) NextN(ctx context.Context, dst []uint64) (int, error) {
	n, err := s.chain.nextN(ctx, dst)
	return n, s.takeErr(err)
}

func (s *BlockSource) takeErr(err error) error {
	if errors.Is(err, errChainClosed) {
		return ErrBlockSourceClosed
	}
	return err
}

func (s *BlockSource) wakeFetcher() { s.chain.wakeProducer() }

// maxChecking is the most blocks a source has awaiting the consumer
// check before it stops pulling: two pulls' worth lets the next pull run
// while the last one's blocks are checked, so that the check costs the
// fetching no round trip.
const maxChecking = 2 * pullBatch

// needsBlock tells whether the fetcher should fetch: room for a pull's
// blocks among the maxChecking being checked, and, without claims,
// nothing fetched ahead and fewer IDs than the low-water mark left in the
// block in use (a source then holds at most 1+maxChecking blocks); with
// claims, fewer IDs at hand and waiting out W than the claim depth.
func (s *BlockSource) needsBlock() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.checking+pullBatch > maxChecking {
		return false
	}
	if s.lossWindow > 0 {
		// Blocks waiting out W count as at hand: a block becomes usable
		// only W after its claim (blocks_claims.go).
		return s.chain.available()+s.maturingIDs < s.claimDepth
	}
	return s.chain.pushesAhead() == 0 && s.chain.available() < s.lowWater.Load()
}

// Stats returns the source's counters.
func (s *BlockSource) Stats() BlockSourceStats {
	return BlockSourceStats{
		BlocksUsed:  s.blocksUsed.Load(),
		Redelivered: s.redelivered.Load(),
		AckFailed:   s.ackFailed.Load(),
		Malformed:   s.malformed.Load(),
		IDsUsed:     s.idsUsed.Load(),

		ConsumerChanged: s.consumerChanged.Load(),
		ClaimRefused:    s.claimRefused.Load(),
		ClaimFailed:     s.claimFailed.Load(),
		ClaimAhead:      s.claimAheadIDs(),
	}
}

// Close stops the source and waits for its fetcher to end. The IDs not
// handed out yet are discarded (never used by anyone). Next and NextN
// then fail with ErrBlockSourceClosed.
func (s *BlockSource) Close() error {
	s.once.Do(func() {
		s.chain.close()
		s.cancel()
		<-s.done
		s.mu.Lock()
		s.toCheck, s.maturing = nil, nil
		s.mu.Unlock()
	})
	return nil
}

// run runs the fetcher and the checker until ctx is done.
func (s *BlockSource) run(ctx context.Context) {
	defer close(s.done)
	var wg sync.WaitGroup
	wg.Go(func() { s.checkLoop(ctx) })
	if s.lossWindow > 0 {
		wg.Go(func() { s.matureLoop(ctx) })
	}
	s.fetchLoop(ctx)
	wg.Wait()
}

func (s *BlockSource) fetchLoop(ctx context.Context) {
	var cons jetstream.Consumer
	var created time.Time // the bound consumer instance's
	bindProblem := problemlog.Log{Log: s.log, What: "blocks: bind consumer"}
	fetchProblem := problemlog.Log{Log: s.log, What: "blocks: fetch"}
	var pauses retry.Backoff
	pause := func() bool { return retry.Sleep(ctx, pauses.Next()) == nil }
	for {
		if !s.needsBlock() {
			if s.fetcherIdle != nil {
				s.fetcherIdle()
			}
			select {
			case <-s.want:
				continue
			case <-ctx.Done():
				return
			}
		}
		if s.rebind.Swap(false) {
			cons = nil
		}
		if cons == nil {
			var err error
			cons, created, err = s.bind(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				bindProblem.Fail(err)
				if !pause() {
					return
				}
				continue
			}
			bindProblem.OK()
		}
		msgs, err := s.pull(ctx, cons)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
			// No block within FetchWait. Pulls to a consumer deleted
			// meanwhile may never be answered: nats-server 2.9 sends
			// them no "no responders" and tells only the pulls pending
			// at the delete. So an idle wait checks that the instance
			// bound is still there before it asks again.
			if s.boundConsumerGone(ctx, created) {
				s.log.Info("blocks: the consumer bound is gone (deleted or re-created while idle); binding again")
				cons = nil
			}
			continue
		case errors.Is(err, jetstream.ErrConsumerNotFound), errors.Is(err, jetstream.ErrConsumerDeleted),
			errors.Is(err, jetstream.ErrStreamNotFound),
			// Nobody serves the pull: the consumer (or its stream) is
			// gone, and a fetch sent after the delete gets no 409. Bind
			// again, which creates it, or nobody ever would.
			errors.Is(err, nats.ErrNoResponders):
			cons = nil
			fetchProblem.Fail(err)
			if !pause() {
				return
			}
			continue
		default:
			fetchProblem.Fail(err)
			if !pause() {
				return
			}
			continue
		}
		fetchProblem.OK()
		pauses.Reset()
		var held []heldBlock
		for _, msg := range msgs {
			if runs := s.claim(ctx, msg); runs != nil {
				held = append(held, heldBlock{runs: runs, created: created})
			}
		}
		s.check(held)
	}
}

// boundConsumerGone tells whether the consumer instance created at
// created is gone (deleted, or replaced by one created later): the
// fetcher must bind again. An unanswered check says no; the next idle
// wait checks again.
func (s *BlockSource) boundConsumerGone(ctx context.Context, created time.Time) bool {
	current, err := s.consumerCreated(ctx)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound), errors.Is(err, jetstream.ErrStreamNotFound):
		return true
	case err != nil:
		return false
	}
	return !current.Equal(created)
}

// pullBatch is the most blocks one pull takes. A consumer check covers
// the blocks of a pull together, so pulling two at a time halves the
// checks (and the pulls) when the stream has blocks waiting.
const pullBatch = 2

// pull fetches the blocks the stream has at once, up to pullBatch, in
// one request; when it has none, it waits up to FetchWait for one.
func (s *BlockSource) pull(ctx context.Context, cons jetstream.Consumer) ([]jetstream.Msg, error) {
	batch, err := cons.FetchNoWait(pullBatch)
	if err != nil {
		return nil, err
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) > 0 {
		return msgs, nil
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return nil, err
	}
	fctx, cancel := context.WithTimeout(ctx, s.cfg.FetchWait)
	defer cancel()
	msg, err := cons.Next(jetstream.FetchContext(fctx))
	if err != nil {
		return nil, err
	}
	return []jetstream.Msg{msg}, nil
}

// bind creates the shared durable consumer or updates it to this
// source's settings, and returns the Created time of the instance bound.
func (s *BlockSource) bind(ctx context.Context) (jetstream.Consumer, time.Time, error) {
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cons, err := s.js.CreateOrUpdateConsumer(bctx, s.cfg.Stream, BlocksConsumerConfig(s.cfg.Consumer, s.cfg.AckWait))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("uidclient: blocks: consumer %s on stream %s: %w", s.cfg.Consumer, s.cfg.Stream, err)
	}
	if err := s.checkClaimsBucket(bctx); err != nil {
		return nil, time.Time{}, err
	}
	return cons, cons.CachedInfo().Created, nil
}

// claim applies the exactly-once rule to a fetched block: it returns the
// block's IDs when this is the first delivery, the block decodes and the
// server confirmed the ack; otherwise it terminates the block and returns
// nil.
func (s *BlockSource) claim(ctx context.Context, msg jetstream.Msg) []Run {
	meta, err := msg.Metadata()
	if err != nil {
		s.malformed.Add(1)
		s.log.Warn("blocks: message without JetStream metadata", "err", err)
		_ = msg.Term()
		return nil
	}
	if meta.NumDelivered != 1 {
		// Whoever got an earlier delivery may still ack and use it.
		s.redelivered.Add(1)
		s.log.Debug("blocks: terminating a redelivered block", "stream_seq", meta.Sequence.Stream, "delivered", meta.NumDelivered)
		_ = msg.Term()
		return nil
	}
	runs, err := protocol.DecodeBlockRuns(msg.Data(), msg.Headers())
	if err != nil {
		s.malformed.Add(1)
		s.log.Warn("blocks: terminating a malformed block", "stream_seq", meta.Sequence.Stream, "err", err)
		_ = msg.Term()
		return nil
	}
	if s.beforeAck != nil {
		s.beforeAck(meta, protocol.AppendIDs(nil, runs))
	}
	actx, cancel := context.WithTimeout(ctx, min(s.cfg.AckWait, 5*time.Second))
	err = msg.DoubleAck(actx)
	cancel()
	if err != nil {
		// The ack may or may not have reached the server: give the block
		// up (terminating an acknowledged block changes nothing).
		s.ackFailed.Add(1)
		if ctx.Err() == nil {
			s.log.Warn("blocks: ack not confirmed, block given up", "stream_seq", meta.Sequence.Stream, "err", err)
		}
		if errors.Is(err, nats.ErrNoResponders) {
			// No consumer of that name: pulls to the one bound would go
			// unanswered (see fetchLoop), bind again at once.
			s.rebind.Store(true)
		}
		_ = msg.Term()
		return nil
	}
	return runs
}

// heldBlock is a block acknowledged under the consumer instance created
// at created, awaiting the check that the instance is still there.
type heldBlock struct {
	runs    []Run // the block's IDs
	created time.Time
}

// check hands the acknowledged blocks of a pull to the checker.
func (s *BlockSource) check(blocks []heldBlock) {
	if len(blocks) == 0 {
		return
	}
	s.mu.Lock()
	s.toCheck = append(s.toCheck, blocks...)
	s.checking += len(blocks)
	s.mu.Unlock()
	select {
	case s.checkWake <- struct{}{}:
	default:
	}
}

// checkLoop checks the acknowledged blocks, all those waiting with one
// consumer info request, and delivers those certain to be this source's.
func (s *BlockSource) checkLoop(ctx context.Context) {
	problem := problemlog.Log{Log: s.log, What: "blocks: consumer check"}
	for {
		select {
		case <-s.checkWake:
		case <-ctx.Done():
			return
		}
		for {
			s.mu.Lock()
			batch := s.toCheck
			s.toCheck = nil
			s.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			created, err := s.consumerCreated(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				problem.Fail(err)
			} else {
				problem.OK()
			}
			s.settle(ctx, batch, created, err)
		}
	}
}

// consumerCreated asks for the consumer's Created time. Any answer after
// the ack will do, so a failed request is tried again, for a while.
func (s *BlockSource) consumerCreated(ctx context.Context) (time.Time, error) {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			t := time.NewTimer(time.Duration(attempt) * 100 * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return time.Time{}, ctx.Err()
			}
		}
		ictx, cancel := context.WithTimeout(ctx, min(s.cfg.AckWait, 5*time.Second))
		var created time.Time
		created, err = s.requestCreated(ictx)
		cancel()
		switch {
		case err == nil:
			return created, nil
		case errors.Is(err, jetstream.ErrConsumerNotFound), errors.Is(err, jetstream.ErrStreamNotFound), ctx.Err() != nil:
			return time.Time{}, err
		}
	}
	return time.Time{}, err
}

// requestCreated is one consumer info request, of which only the Created
// time is decoded: it runs once a block or so, and decoding the whole
// ConsumerInfo (jetstream.Consumer.Info) cost a third of the request.
func (s *BlockSource) requestCreated(ctx context.Context) (time.Time, error) {
	msg, err := s.nc.RequestWithContext(ctx, "$JS.API.CONSUMER.INFO."+s.cfg.Stream+"."+s.cfg.Consumer, nil)
	if err != nil {
		return time.Time{}, err
	}
	var resp struct {
		Created time.Time           `json:"created"`
		Error   *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return time.Time{}, fmt.Errorf("uidclient: blocks: consumer info: %w", err)
	}
	switch {
	case resp.Error == nil && !resp.Created.IsZero():
		return resp.Created, nil
	case resp.Error == nil:
		return time.Time{}, errors.New("uidclient: blocks: consumer info without a creation time")
	case resp.Error.ErrorCode == jetstream.JSErrCodeConsumerNotFound:
		return time.Time{}, jetstream.ErrConsumerNotFound
	case resp.Error.ErrorCode == jetstream.JSErrCodeStreamNotFound:
		return time.Time{}, jetstream.ErrStreamNotFound
	}
	return time.Time{}, resp.Error
}

// settle delivers the blocks of batch acknowledged under the instance
// created at created (checkErr nil) and gives up the others.
func (s *BlockSource) settle(ctx context.Context, batch []heldBlock, created time.Time, checkErr error) {
	var good [][]Run
	lost := len(batch)
	for _, b := range batch {
		if checkErr == nil && b.created.Equal(created) {
			lost--
			n := protocol.CountOf(b.runs)
			if s.followBlocks && n > s.lowWater.Load() {
				s.lowWater.Store(n) // the checker alone stores it
			}
			if s.lossWindow > 0 {
				s.claimBlock(ctx, b.runs) // used W later, if still its own
				continue
			}
			good = append(good, b.runs)
			s.blocksUsed.Add(1)
			s.idsUsed.Add(n)
		}
	}
	if lost > 0 {
		s.consumerChanged.Add(uint64(lost))
		s.rebind.Store(true)
		why := "blocks: consumer re-created while blocks were in flight, blocks given up"
		switch {
		case errors.Is(checkErr, jetstream.ErrConsumerNotFound), errors.Is(checkErr, jetstream.ErrStreamNotFound):
			why = "blocks: consumer deleted while blocks were in flight, blocks given up"
		case checkErr != nil:
			why = "blocks: consumer not checked, blocks acknowledged before the check given up"
		}
		s.log.Warn(why, "blocks", lost, "err", checkErr)
	}
	// The IDs go to the takers before the fetcher learns that fewer
	// blocks are being checked, so it never sees both uncounted.
	if s.lossWindow == 0 { // else the mature loop alone pushes
		for _, runs := range good {
			s.chain.push(runs, s.lowWater.Load(), nil, false)
		}
	}
	s.mu.Lock()
	s.checking -= len(batch)
	s.mu.Unlock()
	s.wakeFetcher() // fewer blocks being checked: the fetcher may fetch
}
