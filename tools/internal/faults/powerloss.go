package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// A power loss's proof reads every node's own store (its /jsz) at each
// step, not the first node that answers: after a restart a replica not
// yet caught up answers with less than the cluster has, and a loss read
// from it is the replica's lag, not the cluster's (docs/faults.md: 2030 →
// 1872 on nodes that sync always, read so).

// nodeView is one node's /jsz at one moment: each stream's state in the
// node's own store and the leader the node names (streams nil: the node
// did not answer).
type nodeView struct {
	node    string
	streams map[string]streamState
}

// observation is every node's view at one moment, in the cluster's order.
type observation []nodeView

// observe reads every node's /jsz at once.
func (c *cluster) observe(ctx context.Context) observation {
	out := make(observation, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		out[i].node = n.name
		wg.Add(1)
		go func() {
			defer wg.Done()
			ss, err := n.streams(ctx)
			if err != nil {
				return
			}
			out[i].streams = map[string]streamState{}
			for _, s := range ss {
				out[i].streams[s.Name] = s
			}
		}()
	}
	wg.Wait()
	return out
}

// firstViews reads each node as soon as it answers with every one of the
// streams after its restart: what its own store kept, read before the
// cluster elects a leader and anything new is written (a node lists its
// streams, recovered from its store, before any election).
func (c *cluster) firstViews(ctx context.Context, within time.Duration, streams []string) observation {
	first := make(observation, len(c.nodes))
	for i, n := range c.nodes {
		first[i].node = n.name
	}
	_ = waitFor(ctx, within, func() bool {
		done := true
		for i, v := range c.observe(ctx) {
			if first[i].streams == nil && v.hasAll(streams) {
				first[i] = v
			}
			done = done && first[i].streams != nil
		}
		return done
	})
	return first
}

func (v nodeView) hasAll(streams []string) bool {
	if v.streams == nil {
		return false
	}
	for _, s := range streams {
		if _, ok := v.streams[s]; !ok {
			return false
		}
	}
	return true
}

// streamNames are the streams any node reported, sorted.
func (o observation) streamNames() []string {
	seen := map[string]uint64{}
	for _, v := range o {
		for name := range v.streams {
			seen[name] = 0
		}
	}
	return sortedKeys(seen)
}

// leader is the stream's leader by a majority of the cluster's nodes: one
// that names itself and that more than half of the nodes name. A node
// just restarted may name itself from before (seen with nats-server
// 2.15.2), so one node's word is not enough.
func (o observation) leader(stream string) (name string, lastSeq uint64, ok bool) {
	votes := map[string]int{}
	for _, v := range o {
		if s, has := v.streams[stream]; has && s.Leader != "" {
			votes[s.Leader]++
		}
	}
	for _, v := range o {
		s, has := v.streams[stream]
		if has && s.Leader == v.node && 2*votes[v.node] > len(o) {
			return v.node, s.LastSeq, true
		}
	}
	return "", 0, false
}

// highest is the highest last sequence of the stream any node reports.
func (o observation) highest(stream string) (lastSeq uint64, ok bool) {
	for _, v := range o {
		if s, has := v.streams[stream]; has {
			lastSeq, ok = max(lastSeq, s.LastSeq), true
		}
	}
	return lastSeq, ok
}

// at is the stream's last sequence in the named node's store.
func (o observation) at(node, stream string) (uint64, bool) {
	for _, v := range o {
		if v.node == node {
			s, ok := v.streams[stream]
			return s.LastSeq, ok
		}
	}
	return 0, false
}

// clusterSeq is the stream's last sequence at its leader, or, with no
// leader agreed, the highest any node has; where says which.
func (o observation) clusterSeq(stream string) (seq uint64, where string, ok bool) {
	if name, seq, ok := o.leader(stream); ok {
		return seq, "leader " + name, true
	}
	if seq, ok := o.highest(stream); ok {
		return seq, "no leader agreed: the highest node", true
	}
	return 0, "", false
}

// powerLossReport compares the readings of a power loss: snapshot (the
// stores copied; nil when nothing was copied: sync always), kill (just
// before every node was killed), restart (each node's first answer after
// it), recovered (the cluster healthy again). lost is what the cluster's
// leader has after recovery short of what its leader had acknowledged at
// the kill, summed over the streams; forgot is what the nodes' own stores
// restarted with short of what each had at the kill, summed over nodes
// and streams. The text gives every figure, per stream and node.
func powerLossReport(snapshot, kill, restart, recovered observation) (lost, forgot uint64, text string) {
	var parts []string
	for _, stream := range kill.streamNames() {
		acked, ackedAt, _ := kill.clusterSeq(stream)
		after, afterAt, ok := recovered.clusterSeq(stream)
		var b strings.Builder
		fmt.Fprintf(&b, "%s: acknowledged %d (%s at the kill), ", stream, acked, ackedAt)
		if ok {
			fmt.Fprintf(&b, "%d after recovery (%s)", after, afterAt)
			if after < acked {
				lost += acked - after
				fmt.Fprintf(&b, ", %d lost", acked-after)
			}
		} else {
			b.WriteString("no node had it after recovery")
		}
		readings := []observation{kill, restart, recovered}
		columns := "kill/restart/recovered"
		if snapshot != nil {
			readings = append([]observation{snapshot}, readings...)
			columns = "snapshot/" + columns
		}
		var nodes []string
		for _, v := range kill {
			var seqs []string
			for _, o := range readings {
				if seq, ok := o.at(v.node, stream); ok {
					seqs = append(seqs, fmt.Sprint(seq))
				} else {
					seqs = append(seqs, "-")
				}
			}
			k, okK := kill.at(v.node, stream)
			r, okR := restart.at(v.node, stream)
			short := ""
			if okK && okR && r < k {
				forgot += k - r
				short = fmt.Sprintf(" (restarted %d short)", k-r)
			}
			nodes = append(nodes, v.node+" "+strings.Join(seqs, "/")+short)
		}
		fmt.Fprintf(&b, "; per node %s: %s", columns, strings.Join(nodes, ", "))
		parts = append(parts, b.String())
	}
	return lost, forgot, strings.Join(parts, "; ")
}
