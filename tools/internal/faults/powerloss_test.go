package faults

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// testdata/jsz-leader.json is /jsz?accounts=true&streams=true of the
// leader of an R3 KV bucket (3 puts) in a 3-node nats-server 2.15.2
// cluster, cut down to the fields around the ones read.
func TestJSZReadsEachStreamsOwnStateAndLeader(t *testing.T) {
	b, err := os.ReadFile("testdata/jsz-leader.json")
	if err != nil {
		t.Fatal(err)
	}
	var j jsz
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	ss := j.streams()
	if len(ss) != 1 {
		t.Fatalf("streams: %+v", ss)
	}
	s := ss[0]
	if s.Name != kvStream || s.LastSeq != 3 || s.Messages != 3 || s.Leader != "n1" || !slices.Equal(s.Replicas, []string{"n0", "n2"}) {
		t.Errorf("stream: %+v", s)
	}
}

// view is a node's view of the KV stream: its last sequence and the
// leader it names ("" none).
func view(node string, lastSeq uint64, leader string) nodeView {
	return nodeView{node: node, streams: map[string]streamState{kvStream: {Name: kvStream, LastSeq: lastSeq, Leader: leader}}}
}

func TestPowerLossReportReadsTheLeaderNotALaggingReplica(t *testing.T) {
	// Nothing lost: n2 restarts 158 behind and catches up, n0 lags the
	// leader by a few; the old proof read whichever node answered first
	// and could report 2030 → 1872.
	kill := observation{view("n0", 2028, "n1"), view("n1", 2030, "n1"), view("n2", 2030, "n1")}
	restart := observation{view("n0", 2028, ""), view("n1", 2030, ""), view("n2", 1872, "")}
	recovered := observation{view("n0", 2031, "n1"), view("n1", 2035, "n1"), view("n2", 2033, "n1")}
	lost, forgot, text := powerLossReport(nil, kill, restart, recovered)
	if lost != 0 || forgot != 158 {
		t.Errorf("lost %d, forgot %d: %s", lost, forgot, text)
	}
	for _, want := range []string{"acknowledged 2030 (leader n1 at the kill)", "2035 after recovery (leader n1)",
		"per node kill/restart/recovered:", "n0 2028/2028/2031, n1 2030/2030/2035, n2 2030/1872/2033 (restarted 158 short)"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q: %s", want, text)
		}
	}
	if strings.Contains(text, "lost") {
		t.Errorf("report names a loss: %s", text)
	}
}

func TestPowerLossReportCountsWhatTheLeaderLost(t *testing.T) {
	// Every node restored a copy short of the kill; the leader after
	// recovery has 40 fewer than the leader had at the kill. n2 did not
	// answer at the snapshot.
	snapshot := observation{view("n0", 118, "n0"), view("n1", 118, "n0"), {node: "n2"}}
	kill := observation{view("n0", 160, "n0"), view("n1", 159, "n0"), view("n2", 158, "n0")}
	restart := observation{view("n0", 120, "n0"), view("n1", 119, ""), view("n2", 118, "")}
	recovered := observation{view("n0", 120, "n1"), view("n1", 120, "n1"), view("n2", 120, "n1")}
	lost, forgot, text := powerLossReport(snapshot, kill, restart, recovered)
	if lost != 40 || forgot != 40+40+40 {
		t.Errorf("lost %d, forgot %d: %s", lost, forgot, text)
	}
	for _, want := range []string{"acknowledged 160 (leader n0 at the kill)", "120 after recovery (leader n1), 40 lost",
		"per node snapshot/kill/restart/recovered:", "n2 -/158/118/120 (restarted 40 short)"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q: %s", want, text)
		}
	}
}

func TestLeaderNeedsAMajority(t *testing.T) {
	// Right after a restart a node may name itself from before the kill.
	o := observation{view("n0", 10, "n0"), view("n1", 12, ""), view("n2", 12, "")}
	if name, _, ok := o.leader(kvStream); ok {
		t.Errorf("leader %s named by one node of three", name)
	}
	seq, where, ok := o.clusterSeq(kvStream)
	if !ok || seq != 12 || !strings.Contains(where, "no leader") {
		t.Errorf("without a leader: %d %q %v", seq, where, ok)
	}
	o[1] = view("n1", 12, "n0")
	if name, seq, ok := o.leader(kvStream); !ok || name != "n0" || seq != 10 {
		t.Errorf("leader named by two of three: %s %d %v", name, seq, ok)
	}
	// A majority naming a node that did not answer is no leader read.
	o = observation{view("n0", 10, "n2"), view("n1", 12, "n2"), {node: "n2"}}
	if name, _, ok := o.leader(kvStream); ok {
		t.Errorf("leader %s read without its answer", name)
	}
}
