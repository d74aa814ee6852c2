package soak

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// The NATS side's faults: a stream leader's node killed, a partition of
// one dispenser from its node. (The pause of a node is cluster.pause.)

// leaderNote says which node leads each replicated stream the dispensers
// use, for a fault's record.
func (s *soak) leaderNote(ctx context.Context) string {
	streams := []string{kvStream, mysqlFleet.blocksStream, kvFleet.blocksStream}
	leaders := streamLeaders(ctx, s.admin.Conn, streams...)
	var parts []string
	for _, st := range streams {
		l := leaders[st]
		if l == "" {
			l = "?"
		}
		parts = append(parts, st+" led by "+l)
	}
	return strings.Join(parts, ", ")
}

// killLeader SIGKILLs the node leading stream (found through the
// JetStream API), keeps it down for NATSDown and starts it again on the
// same store. Without a leader to be found it kills node cycle%3 and says
// so.
func (s *soak) killLeader(ctx context.Context, stream string, cycle int) (target, note string) {
	return s.killLeaderOf(ctx, s.cluster, s.admin.Conn, stream, cycle, s.leaderNote(ctx))
}

// killLeaderOf is killLeader on cluster c, whose streams nc's JetStream
// API describes; before says which nodes led the streams before.
func (s *soak) killLeaderOf(ctx context.Context, c *cluster, nc *nats.Conn, stream string, cycle int, before string) (target, note string) {
	leader := streamLeaders(ctx, nc, stream)[stream]
	i := c.nodeByName(leader)
	if i < 0 {
		i = cycle % len(c.nodes)
		before = "no leader of " + stream + " found; " + before
	}
	target = c.nodes[i].name
	killed := time.Now()
	elected := make(chan string, 1)
	go func() { elected <- s.awaitLeader(ctx, nc, stream, target, killed) }()
	accepting, err := c.killAndRestart(ctx, i, s.cfg.NATSDown)
	if err != nil {
		s.events.violation("kill -9 and restart of NATS node %s (leader of %s): %v", target, stream, err)
	}
	// When the node took connections again and when it was healthy, on
	// the run's clock: calls failing after a restart are told apart by
	// them (which node their connection was on, how long after).
	restart := ""
	if !accepting.IsZero() {
		restart = fmt.Sprintf(", accepting at %.1fs, healthy at %.1fs", accepting.Sub(s.origin).Seconds(), s.since().Seconds())
	}
	return target, fmt.Sprintf("killed as leader of %s at %.1fs, down %s%s (%s); %s", stream, killed.Sub(s.origin).Seconds(), s.cfg.NATSDown, restart, before, <-elected)
}

// awaitLeader waits (up to 20 s) until stream has a leader other than
// old, which was killed at killed, and says who and when: the stream's
// leaderless time, which the leases must outlast.
func (s *soak) awaitLeader(ctx context.Context, nc *nats.Conn, stream, old string, killed time.Time) string {
	for time.Since(killed) < 20*time.Second && ctx.Err() == nil {
		// The killed node may win the election once it is back.
		if l := streamLeaders(ctx, nc, stream)[stream]; l != "" && (l != old || time.Since(killed) > s.cfg.NATSDown) {
			return fmt.Sprintf("new leader %s after %.1fs", l, time.Since(killed).Seconds())
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return fmt.Sprintf("no new leader within %.0fs", time.Since(killed).Seconds())
}

// partition cuts the partitioned dispenser (k0, of the KV fleet, whose
// only way to NATS is the proxy) off from its node. A short cut stays
// within its lease; a long one outlasts the lease's expiry in the store,
// and meanwhile the other KV dispenser is restarted so that its new claim
// can take the cut one's worker ID over. After the heal the cut one must
// notice a takeover and claim another worker ID; until then it may issue
// only seconds it reserved, which the claim book and the duplicate check
// hold it to.
func (s *soak) partition(ctx context.Context, long bool) (target, note string) {
	z := s.slots[partitionedSlot].current()
	if z == nil {
		return s.slots[partitionedSlot].label, "no process"
	}
	wz := z.WorkerID()
	expiries := z.Expiries()
	cut := time.Now()
	s.natsCut.Cut()
	if !long {
		sleep(ctx, s.cfg.ShortCut)
		s.natsCut.Restore()
		sleep(ctx, s.cfg.LeaseTTL/2)
		return z.name, fmt.Sprintf("cut %s, worker %d", s.cfg.ShortCut, wz)
	}
	// Past the store's expiry (a TTL after the last renewal) and past
	// what the cut one reserved beyond the clock (at most a second once
	// a TTL has passed), so a new claim takes its worker ID first.
	sleep(ctx, s.cfg.LeaseTTL+time.Second)
	takenBy := ""
	other := s.slots[partitionedSlot+1]
	// A new claim takes the lowest worker ID free or expired: that may be
	// one the fleet left free before, so restart until a claim takes one
	// of the cut dispenser's (its first worker ID or another lane); each
	// killed process's lease stays live and out of the way.
	for attempt := 0; attempt < 4 && takenBy == "" && ctx.Err() == nil; attempt++ {
		s.restartSlot(ctx, other, true)
		if p := other.current(); p != nil && z.Holds(p.WorkerID()) {
			takenBy, wz = p.name, p.WorkerID()
		}
	}
	// Its leases, renewed through NATS, must have expired: if not, it
	// reached the cluster around the proxy (a URL learnt from a node).
	if z.Expiries() == expiries {
		s.events.violation("%s kept its leases through a %s cut of its only NATS URL: it bypassed the partition", z.name, time.Since(cut).Round(time.Second))
	}
	s.natsCut.Restore()
	cutFor := time.Since(cut).Round(100 * time.Millisecond)
	if takenBy == "" {
		var w int64 = -1
		if p := other.current(); p != nil {
			w = p.WorkerID()
		}
		return z.name, fmt.Sprintf("cut %s, worker %d not taken over (%s restarted as worker %d)", cutFor, wz, other.label, w)
	}
	return z.name, fmt.Sprintf("cut %s; ", cutFor) + s.waitReclaimed(ctx, z, wz, takenBy)
}
