package uidclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/retry"
	"github.com/uid-dispenser/uid-dispenser/natsio/internal/leaderget"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
)

// Block claims (issue 31's D6, verify/blocks.pml): a blocks stream that
// forgets the removal of a used block (a power loss under lazy fsync)
// delivers it again, as a first delivery, to another source, and rules 1
// to 3 all pass. So with a loss window W a source uses a block only
// after it has
//
//  1. claimed it: a KV Create of protocol.BlockClaimKey in the stream's
//     claims bucket, which fails when the key exists (another source, or
//     this one, claimed the block before: refused);
//  2. waited W since the Create was acknowledged, so that the store has
//     made the claim durable since, or lost it;
//  3. read the claim back at the stream leader and found its own token:
//     a claim lost within W and replaced by another source's (or gone) is
//     refused.
//
// A claim older than W is never forgotten, so a block that comes back is
// refused at step 1 or 3. Each block costs one Create and one read, and
// becomes usable W after its claim: the source fetches ahead by counting
// the IDs of the blocks waiting out W as at hand (LowWater). With W = 0
// (a stream that syncs every write) nothing is claimed.

// blockClaim is a block claimed by this source, waiting out W.
type blockClaim struct {
	runs  []Run
	first uint64
	count uint64
	value string    // the claim's value: the source's token and the claim's number
	due   time.Time // W after the Create's acknowledgement
}

// newClaimToken is a source's token, random, so that no two sources (or
// restarts) share one; a claim's value adds the claim's number, so that
// a block this source claims twice (the stream forgot its removal and the
// first claim, and delivered it to this source again) is refused once.
func newClaimToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// checkClaimsBucket fails, with a loss window, while the claims bucket
// does not answer: the source does not pull (a block acknowledged and
// then not claimable would be given up, its IDs lost) until a publisher
// has created it.
func (s *BlockSource) checkClaimsBucket(ctx context.Context) error {
	if s.lossWindow == 0 {
		return nil
	}
	if _, err := leaderget.Last(ctx, s.nc, "KV_"+s.claimsBucket, "$KV."+s.claimsBucket+".block.0"); err != nil {
		return fmt.Errorf("uidclient: blocks: the claims bucket %s (created by the publishers: dispensers of this version): %w", s.claimsBucket, err)
	}
	return nil
}

// claimBlock claims the block of runs (step 1) and queues it to wait out
// W; a block claimed before, or whose claim the store did not confirm, is
// given up (its IDs never used by this source).
func (s *BlockSource) claimBlock(ctx context.Context, runs []Run) {
	first, count := runs[0].First, protocol.CountOf(runs)
	msg := nats.NewMsg("$KV." + s.claimsBucket + "." + protocol.BlockClaimKey(first))
	value := s.token + "/" + strconv.FormatUint(s.claims.Add(1), 10)
	msg.Data = []byte(value)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := s.js.PublishMsg(cctx, msg, jetstream.WithExpectLastSequencePerSubject(0))
	cancel()
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		s.claimProblem.OK()
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
		s.claimRefused.Add(1)
		s.log.Error("blocks: a block delivered for the first time was claimed before: the stream forgot that it was used; block refused",
			"first", first, "ids", count, "bucket", s.claimsBucket)
		return
	default:
		s.claimFailed.Add(1)
		if ctx.Err() == nil {
			s.claimProblem.Fail(err)
		}
		return
	}
	s.mu.Lock()
	s.maturing = append(s.maturing, blockClaim{runs: runs, first: first, count: count, value: value, due: time.Now().Add(s.lossWindow)})
	s.maturingIDs += count
	s.mu.Unlock()
	select {
	case s.matureWake <- struct{}{}:
	default:
	}
}

// matureLoop waits out W for each claimed block in turn (steps 2 and 3)
// and hands the blocks whose claim it reads back as its own to the
// takers.
func (s *BlockSource) matureLoop(ctx context.Context) {
	for {
		s.mu.Lock()
		if len(s.maturing) == 0 {
			s.mu.Unlock()
			select {
			case <-s.matureWake:
				continue
			case <-ctx.Done():
				return
			}
		}
		b := s.maturing[0]
		s.mu.Unlock()
		if err := s.waitLoss(ctx, time.Until(b.due)); err != nil {
			return
		}
		ours := s.claimOurs(ctx, b)
		if ctx.Err() != nil {
			return
		}
		s.claimAhead()
		if ours {
			s.blocksUsed.Add(1)
			s.idsUsed.Add(b.count)
			s.chain.push(b.runs, s.lowWater.Load(), nil, false)
		}
		s.mu.Lock()
		s.maturing = s.maturing[1:]
		s.maturingIDs -= b.count
		s.mu.Unlock()
		s.wakeFetcher()
	}
}

// maxClaimDepth bounds claimAhead's doubling, in LowWaters.
const maxClaimDepth = 1024

// claimAhead doubles the IDs the source keeps at hand and claimed ahead
// (from LowWater, up to maxClaimDepth of them) when takers found none at
// hand since the last doubling, at most once per W: a block's IDs come W
// after it is fetched, so a source delivers at most that depth per W,
// and one whose takers wait needs more ahead. Setting LowWater to the IDs
// taken in W avoids the ramp.
func (s *BlockSource) claimAhead() {
	waits := s.chain.waits.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	if waits == s.takerWaits || time.Since(s.deepened) < s.lossWindow {
		return
	}
	s.takerWaits, s.deepened = waits, time.Now()
	if limit := uint64(s.cfg.LowWater) * maxClaimDepth; s.claimDepth < limit {
		s.claimDepth = min(2*s.claimDepth, limit)
		s.log.Debug("blocks: takers waited; claiming further ahead", "ids", s.claimDepth, "loss_window", s.lossWindow)
	}
}

func (s *BlockSource) claimAheadIDs() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lossWindow == 0 {
		return 0
	}
	return s.claimDepth
}

// claimOurs reads b's claim back at the claims stream's leader: true when
// it is this source's. A read that fails three times gives the block up.
func (s *BlockSource) claimOurs(ctx context.Context, b blockClaim) bool {
	var err error
	for attempt := range 3 {
		if attempt > 0 && retry.Sleep(ctx, time.Duration(attempt)*200*time.Millisecond) != nil {
			return false
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var e leaderget.Entry
		e, err = leaderget.Last(rctx, s.nc, "KV_"+s.claimsBucket, "$KV."+s.claimsBucket+"."+protocol.BlockClaimKey(b.first))
		cancel()
		if err == nil {
			if e.Found && string(e.Value) == b.value {
				return true
			}
			s.claimRefused.Add(1)
			s.log.Error("blocks: a block's claim read back after the loss window is not this source's: the store forgot it and another source claimed the block; block refused",
				"first", b.first, "ids", b.count, "bucket", s.claimsBucket, "claimed", e.Found)
			return false
		}
	}
	s.claimFailed.Add(1)
	if ctx.Err() == nil {
		s.claimProblem.Fail(err)
	}
	return false
}
