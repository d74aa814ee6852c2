package dispenser

import (
	"context"
	"errors"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// The 30-minute fault run's start-up failure: an instance whose NATS
// node sits with a minority of the JetStream cluster opened its
// worker-ID store (retried) and then exited on the sequences' first
// request (503 JetStream system temporarily unavailable). The sequences'
// start now retries the same way: it waits for the quorum, then serves;
// and a refusal no retry can cure (a declared sequence's key deleted)
// still fails at once, without a retry, however long the deadline.
func TestSequencesStartWaitsForJetStreamQuorum(t *testing.T) {
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "nats-server")
	version := testenv.NATSServerVersion(t, bin)
	nodes := testenv.NATSClusterNodes(t, bin, version, []string{"", "", "", "-"})
	jsNodes, front := nodes[:3], nodes[3]
	// Only the front node, which has no JetStream: the client stays
	// connected while the JetStream nodes go and come back.
	nc, err := nats.Connect(front.URL, nats.DontRandomize(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.NoCallbacksAfterClientClose())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)

	var logs testenv.LogBuffer
	logger := logs.JSONLogger(slog.LevelDebug)
	cfg := DefaultConfig()
	cfg.Sequences = "orders"
	cfg.WorkerKVBucket = "startretry"
	cfg.WorkerKVReplicas = 3
	cfg.StoreStartupDeadline = time.Hour // bounded by the test binary's timeout instead
	ctx := context.Background()
	kvCfg := cfg.kvConfig(cfg.workerIDConfig(logger))
	assigner, err := kvstore.NewAssigner(ctx, nc, kvCfg)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	testwait.WaitFor(t, 10*time.Second, "the bucket's stream on 3 replicas with a leader", func() bool {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, "KV_startretry")
		if err != nil {
			return false
		}
		ci := s.CachedInfo().Cluster
		return ci != nil && ci.Leader != "" && len(ci.Replicas) == 2
	})

	// Two of the three JetStream nodes gone: no quorum, for the meta
	// group nor the bucket's stream.
	jsNodes[1].Kill()
	jsNodes[2].Kill()
	d := &Dispenser{cfg: cfg, log: logger, assigner: assigner}
	opened := make(chan error, 1)
	go func() { opened <- d.openSequences(ctx) }()
	var early error
	returned := false
	testwait.WaitFor(t, 10*time.Second, "the sequences' start retrying", func() bool {
		select {
		case early = <-opened:
			returned = true
			return true
		default:
			return strings.Contains(logs.String(), `"op":"declare the sequences"`)
		}
	})
	if returned {
		t.Fatalf("the sequences' start returned without a JetStream quorum: %v", early)
	}
	jsNodes[1].Restart(t)
	jsNodes[2].Restart(t)
	if openErr := testwait.Receive(t, 30*time.Second, "the sequences' start once the quorum is back", opened); openErr != nil {
		t.Fatalf("the sequences' start failed, though the quorum came back: %v\n%s", openErr, logs.String())
	}
	t.Cleanup(d.seq.Abandon)
	if !strings.Contains(logs.String(), "store not reachable; retrying") {
		t.Fatalf("no retry logged:\n%s", logs.String())
	}
	// Numbers, increasing (a segment taken while the store's epoch changed
	// is skipped, never handed out: the first may be past 1).
	var last uint64
	for range 3 {
		got, err := d.seq.Next(ctx, "orders")
		if err != nil || got <= last {
			t.Fatalf("Next(orders): %d, %v; want a number above %d", got, err, last)
		}
		last = got
	}

	// Not transient: the declared sequence's key deleted (its numbers
	// were handed out). The start fails at once, not after the deadline.
	kv, err := js.KeyValue(ctx, "startretry")
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "seq.orders"); err != nil {
		t.Fatal(err)
	}
	var refusedLogs testenv.LogBuffer
	refused := &Dispenser{cfg: cfg, log: refusedLogs.JSONLogger(slog.LevelDebug), assigner: assigner}
	err = refused.openSequences(ctx)
	if err == nil || !strings.Contains(err.Error(), "was deleted") || errors.Is(err, workerid.ErrStoreUnavailable) {
		t.Fatalf("the start on a deleted sequence: %v; want its refusal, not a store outage", err)
	}
	if strings.Contains(refusedLogs.String(), "retrying") {
		t.Fatalf("a refusal was retried:\n%s", refusedLogs.String())
	}
}
