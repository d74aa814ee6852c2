package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// slowCalls writes down, for a request/reply call whose first attempt
// has timed out (uidclient's attempt timeout, 1 s) and for a call that
// failed, which node the client's connection was on before and after,
// and, once per snapshotEvery, what every node's monitoring said then
// (connections and their subscriptions, routes and the subscriptions
// they carry): what is needed to tell a reply lost on its way back from
// a request sent to a subscriber that is not there.
type slowCalls struct {
	s   *soak
	dir string

	mu       sync.Mutex
	lastSnap time.Time
	snaps    int
	// mismatches counts the interest mismatches auditInterest logged.
	mismatches int
}

// snapshotEvery bounds the snapshots' cost on a loaded machine.
const snapshotEvery = 2 * time.Second

// maxSnapshots bounds their number in a run.
const maxSnapshots = 200

func newSlowCalls(s *soak, dir string) *slowCalls { return &slowCalls{s: s, dir: dir} }

// slowAfter is how long a call runs before it counts as slow: past one
// attempt's timeout, so an attempt got no answer.
const slowAfter = 1100 * time.Millisecond

// slow is told of a call still running slowAfter after start (an
// attempt timed out, or several got a 503 after a wait).
func (sc *slowCalls) slow(c *soakClient, start time.Time, serverBefore string) {
	file := sc.snapshot()
	sc.s.log.Warn("soak call slow",
		"client", c.log.id, "kind", c.log.kind.String(), "fleet", c.log.fleet,
		"start_s", fmt.Sprintf("%.3f", start.Sub(sc.s.origin).Seconds()),
		"server_before", serverBefore, "server_now", c.conn.ConnectedServerName(), "url_now", c.conn.ConnectedUrl(),
		"snapshot", file)
}

// done is told of a call that failed or had attempts time out
// (timedOut, from the client's counters: for a prefetcher, its refills
// in the meantime too).
func (sc *slowCalls) done(c *soakClient, start time.Time, elapsed time.Duration, serverBefore string, timedOut uint64, err error) {
	msg := "soak call had attempts time out"
	if err != nil {
		msg = "soak call failed"
	}
	sc.s.log.Warn(msg,
		"client", c.log.id, "kind", c.log.kind.String(), "fleet", c.log.fleet,
		"start_s", fmt.Sprintf("%.3f", start.Sub(sc.s.origin).Seconds()), "elapsed", elapsed.Round(time.Millisecond),
		"timed_out", timedOut,
		"server_before", serverBefore, "server_after", c.conn.ConnectedServerName(), "url_after", c.conn.ConnectedUrl(),
		"err", err)
}

// snapshot writes every node's connz (with subscriptions) and routez
// (with subscriptions) to a file of its own and returns its name, or ""
// when one was taken less than snapshotEvery ago.
func (sc *slowCalls) snapshot() string {
	sc.mu.Lock()
	if time.Since(sc.lastSnap) < snapshotEvery || sc.snaps >= maxSnapshots {
		sc.mu.Unlock()
		return ""
	}
	sc.lastSnap = time.Now()
	sc.snaps++
	n := sc.snaps
	sc.mu.Unlock()
	at := sc.s.since()
	out := map[string]any{"at_s": at.Seconds()}
	for _, node := range sc.s.cluster.nodes {
		one := map[string]any{}
		for _, path := range []string{"/connz?subs=detail", "/routez?subs=detail"} {
			var v any
			if _, err := node.monitor(context.Background(), path, &v); err != nil {
				v = err.Error()
			}
			one[path] = v
		}
		out[node.name] = one
	}
	name := filepath.Join(sc.dir, fmt.Sprintf("slow-%03d-%.1fs.json", n, at.Seconds()))
	data, err := json.Marshal(out)
	if err == nil {
		err = os.WriteFile(name, data, 0o640)
	}
	if err != nil {
		sc.s.log.Warn("soak: slow-call snapshot", "err", err)
		return ""
	}
	return filepath.Base(name)
}

// sampleConns writes, every second until ctx is done, a line per node
// and connection that serves or asks for IDs (a dispenser's service
// connection, with its fleet and micro instance ID, or a soak client):
// its message counts, pending bytes and RTT as the node sees them, to
// conns.tsv. A dispenser whose counts stop while its clients' requests
// go on (or a connection a node still lists after its peer moved) shows
// there, second by second.
func (sc *slowCalls) sampleConns(ctx context.Context) {
	f, err := os.Create(filepath.Join(sc.dir, "conns.tsv"))
	if err != nil {
		sc.s.log.Warn("soak: conns.tsv", "err", err)
		return
	}
	defer f.Close()
	fmt.Fprintln(f, "t_s\tnode\tcid\twho\tin_msgs\tout_msgs\tpending_bytes\trtt\tidle_ms")
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		at := sc.s.since().Seconds()
		for _, node := range sc.s.cluster.nodes {
			var cz struct {
				Now   time.Time `json:"now"`
				Conns []struct {
					CID          uint64    `json:"cid"`
					Name         string    `json:"name"`
					InMsgs       int64     `json:"in_msgs"`
					OutMsgs      int64     `json:"out_msgs"`
					Pending      int       `json:"pending_bytes"`
					RTT          string    `json:"rtt"`
					LastActivity time.Time `json:"last_activity"`
					Subs         []string  `json:"subscriptions_list"`
				} `json:"connections"`
			}
			if _, err := node.monitor(ctx, "/connz?subs=1", &cz); err != nil {
				fmt.Fprintf(f, "%.1f\t%s\t-\tunreachable: %v\t\t\t\t\t\n", at, node.name, err)
				continue
			}
			for _, c := range cz.Conns {
				who := connRole(c.Name, c.Subs)
				if who == "" {
					continue
				}
				fmt.Fprintf(f, "%.1f\t%s\t%d\t%s\t%d\t%d\t%d\t%s\t%d\n", at, node.name, c.CID, who, c.InMsgs, c.OutMsgs, c.Pending, c.RTT, cz.Now.Sub(c.LastActivity).Milliseconds())
			}
		}
	}
}

// connRole names a connection sampleConns follows: "uidkv-svc <id>" for
// a dispenser's service connection (by its fleet's next subscription
// and its micro instance's ping subject), the client's name for a soak
// client, "" for the others.
func connRole(name string, subs []string) string {
	if strings.HasPrefix(name, "uid-soak client") {
		return name
	}
	fleet, id := "", ""
	for _, s := range subs {
		for _, f := range fleets {
			if s == f.name+".next" {
				fleet = f.name
			}
		}
		// $SRV.PING.<service>.<instance id>
		if rest, ok := strings.CutPrefix(s, "$SRV.PING."); ok {
			if i := strings.LastIndexByte(rest, '.'); i >= 0 {
				id = rest[i+1:]
			}
		}
	}
	if fleet == "" {
		return ""
	}
	return fleet + "-svc " + id
}

// auditInterest checks, every auditEvery until ctx is done, that every
// node knows the client subscriptions of every other node over its
// routes, no more and no less: a subscription a node lacks (a reply
// inbox, a dispenser's queue subscription) loses the messages meant for
// it, one it holds after its owner went (stale) sends requests nowhere.
// Each mismatch seen twice in a row (once may be a snapshot taken while
// a subscription is on its way) is logged with how long it has lasted,
// and counted.
func (sc *slowCalls) auditInterest(ctx context.Context) {
	t := time.NewTicker(auditEvery)
	defer t.Stop()
	since := map[string]time.Duration{} // mismatch → first seen
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		at := sc.s.since()
		found, ok := sc.interestMismatches(ctx)
		if !ok {
			continue // a node is down or paused: nothing to compare
		}
		seen := map[string]time.Duration{}
		for _, m := range found {
			first, again := since[m]
			if !again {
				first = at
			}
			seen[m] = first
			if again {
				sc.s.log.Warn("soak: interest mismatch", "what", m, "first_s", fmt.Sprintf("%.1f", first.Seconds()), "lasting", (at - first).Round(100*time.Millisecond))
				sc.mu.Lock()
				sc.mismatches++
				sc.mu.Unlock()
			}
		}
		since = seen
	}
}

const auditEvery = 2 * time.Second

// interestKey is a subscription as the audit compares it.
type interestKey struct{ subject, queue string }

// interestMismatches compares every node's client subscriptions with
// what the other nodes hold from it over their routes; ok is false when
// a node did not answer.
func (sc *slowCalls) interestMismatches(ctx context.Context) (found []string, ok bool) {
	local, remote, ok := sc.gatherInterest(ctx)
	if !ok {
		return nil, false
	}
	var names []string
	for _, n := range sc.s.cluster.nodes {
		names = append(names, n.name)
	}
	return compareInterest(names, local, remote), true
}

// gatherInterest reads every node's client subscriptions (local) and
// what it holds from each other node over its routes (remote, by
// [holder, from]); ok is false when a node did not answer.
func (sc *slowCalls) gatherInterest(ctx context.Context) (local map[string]map[interestKey]bool, remote map[[2]string]map[interestKey]bool, ok bool) {
	type subs = map[interestKey]bool
	local = map[string]subs{}
	remote = map[[2]string]subs{}
	for _, node := range sc.s.cluster.nodes {
		var cz struct {
			Conns []struct {
				Subs []struct {
					Subject string `json:"subject"`
					Queue   string `json:"qgroup"`
				} `json:"subscriptions_list_detail"`
			} `json:"connections"`
		}
		var rz struct {
			Routes []struct {
				Remote string `json:"remote_name"`
				Subs   []struct {
					Account string `json:"account"`
					Subject string `json:"subject"`
					Queue   string `json:"qgroup"`
				} `json:"subscriptions_list_detail"`
			} `json:"routes"`
		}
		if _, err := node.monitor(ctx, "/connz?subs=detail&limit=4096", &cz); err != nil {
			return nil, nil, false
		}
		if _, err := node.monitor(ctx, "/routez?subs=detail", &rz); err != nil {
			return nil, nil, false
		}
		l := subs{}
		for _, c := range cz.Conns {
			for _, s := range c.Subs {
				if clientInterest(s.Subject) {
					l[interestKey{s.Subject, s.Queue}] = true
				}
			}
		}
		local[node.name] = l
		for _, r := range rz.Routes {
			k := [2]string{node.name, r.Remote}
			if remote[k] == nil {
				remote[k] = subs{}
			}
			for _, s := range r.Subs {
				if (s.Account == "" || s.Account == "$G") && clientInterest(s.Subject) {
					remote[k][interestKey{s.Subject, s.Queue}] = true
				}
			}
		}
	}
	return local, remote, true
}

// compareInterest lists what each node (holder) lacks or holds stale of
// every other node's (from's) client subscriptions: local is each node's
// own, remote what each holder has from each from over its routes.
func compareInterest(nodes []string, local map[string]map[interestKey]bool, remote map[[2]string]map[interestKey]bool) (found []string) {
	for _, from := range nodes {
		for _, holder := range nodes {
			if from == holder {
				continue
			}
			got, has := remote[[2]string{holder, from}]
			if !has {
				found = append(found, fmt.Sprintf("%s has no route from %s", holder, from))
				continue
			}
			for k := range local[from] {
				if !got[k] {
					found = append(found, fmt.Sprintf("%s lacks %s's subscription %s %s", holder, from, k.subject, k.queue))
				}
			}
			for k := range got {
				if !local[from][k] {
					found = append(found, fmt.Sprintf("%s holds a stale subscription of %s: %s %s", holder, from, k.subject, k.queue))
				}
			}
		}
	}
	slices.Sort(found)
	return found
}

// clientInterest tells the subjects of the clients' own subscriptions
// from the servers' internal ones ($JS…, $SYS…, the _R_ reply mappings of
// service imports) and the streams' subjects, which routes carry too.
func clientInterest(subject string) bool {
	if strings.HasPrefix(subject, "$") || strings.HasPrefix(subject, "_R_.") {
		return false
	}
	for _, f := range fleets {
		if subject == f.blocksSubject {
			return false
		}
	}
	return true
}
