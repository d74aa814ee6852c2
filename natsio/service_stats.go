package natsio

import (
	"sync/atomic"

	"github.com/nats-io/nats.go/micro"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/sequence"
)

// What `nats micro stats` shows: every endpoint's replies by outcome
// and the ring buffer's state.

// endpointCounters count an endpoint's replies by outcome.
type endpointCounters struct {
	ok, badRequest, notFound, unavailable, internal atomic.Uint64
	ids                                             atomic.Uint64
}

func (c *endpointCounters) record(code int) {
	switch code {
	case 0:
		c.ok.Add(1)
	case protocol.CodeBadRequest:
		c.badRequest.Add(1)
	case protocol.CodeNotFound:
		c.notFound.Add(1)
	case protocol.CodeUnavailable:
		c.unavailable.Add(1)
	default:
		c.internal.Add(1)
	}
}

// EndpointData is what the stats of each endpoint carry in their data
// field (`nats micro stats uid-dispenser`, `nats micro info`). What
// belongs to the whole service is shown once, not under every endpoint:
// the ring and the async errors under next (ringEndpoint), the sequences
// under seq_next (sequencesEndpoint).
type EndpointData struct {
	// Ring is the ring buffer's state (next only; zero elsewhere).
	Ring        RingStats `json:"ring,omitzero"`
	IDs         uint64    `json:"ids"`         // IDs handed out by this endpoint
	OK          uint64    `json:"ok"`          // successful replies
	BadRequest  uint64    `json:"bad_request"` // 400 replies
	NotFound    uint64    `json:"not_found"`   // 404 replies (unknown sequences)
	Unavailable uint64    `json:"unavailable"` // 503 replies
	Internal    uint64    `json:"internal"`    // 500 replies
	// AsyncErrors counts slow consumers etc. on the service's
	// subscriptions (next only; nil elsewhere).
	AsyncErrors *uint64 `json:"async_errors,omitempty"`
	// Sequences is every named sequence's state (seq_next only; with
	// an endpoint per name, that name's).
	Sequences []sequence.Stats `json:"sequences,omitempty"`
}

// The endpoints whose stats carry the service-wide state: the first of
// the IDs' and of the sequences' (`nats micro info` lists them first).
const (
	ringEndpoint      = protocol.EndpointNext
	sequencesEndpoint = protocol.EndpointSeqNext
)

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
	var d EndpointData
	if c := s.endpoints[e.Subject]; c != nil {
		d.IDs, d.OK, d.BadRequest, d.NotFound = c.ids.Load(), c.ok.Load(), c.badRequest.Load(), c.notFound.Load()
		d.Unavailable, d.Internal = c.unavailable.Load(), c.internal.Load()
	}
	switch e.Name {
	case ringEndpoint:
		d.Ring = s.ringStats()
		async := s.asyncErrors.Load()
		d.AsyncErrors = &async
	case sequencesEndpoint:
		d.Sequences = s.sequenceStats(e.Subject)
	}
	return d
}

// ringStats is the ring buffer's state for the stats.
func (s *Service) ringStats() RingStats {
	st := s.src.State()
	claim := "ok"
	if s.cfg.ClaimStatus != nil {
		if err := s.cfg.ClaimStatus(); err != nil {
			claim = err.Error()
		}
	}
	return RingStats{
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
	}
}
