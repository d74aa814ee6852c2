package soak

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testCluster starts the soak's cluster of nats-server processes (the
// binary built once into the user's cache) and stops it when the test
// ends.
func testCluster(t *testing.T) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs nats-server processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := NATSServerBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := startCluster(ctx, bin, t.TempDir(), numNodes, clusterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.shutdown)
	return c
}

// TestKVBucketCreationRaceOnAFreshCluster (issue 15, item 5): every
// dispenser of a fleet starts at once on a fresh 3-node cluster, so they
// all find no bucket and create the replicated one concurrently, some
// through each node. Each must open the bucket and lease a worker ID of
// its own, and the bucket must have its three replicas.
func TestKVBucketCreationRaceOnAFreshCluster(t *testing.T) {
	c := testCluster(t)
	const instances = 6 // two through each node
	cfg := kvstore.DefaultConfig()
	cfg.Bucket = "race_workers"
	cfg.Replicas = 3
	cfg.StoreStartupDeadline = 30 * time.Second
	var logs testenv.LogBuffer
	cfg.Logger = logs.Logger(slog.LevelInfo)
	layout := uidcore.DefaultLayout()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		claims = map[uint64]int{}
		errs   []error
		conns  []*nats.Conn
		leases []*workerid.Lease
	)
	start := make(chan struct{})
	for i := range instances {
		nc, err := nats.Connect(c.URL(i % numNodes))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
		wg.Go(func() {
			<-start
			a, err := kvstore.NewAssigner(ctx, nc, cfg)
			var claim uidcore.Claim
			if err == nil {
				claim, err = a.Claim(ctx, layout)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("instance %d (node %d): %w", i, i%numNodes, err))
				return
			}
			claims[claim.WorkerID()] = i
			leases = append(leases, claim.(*workerid.Lease))
		})
	}
	close(start)
	wg.Wait()
	defer func() {
		for _, l := range leases {
			_ = l.Release(context.Background())
		}
		for _, nc := range conns {
			nc.Close()
		}
	}()
	// What the race cost: attempts the instances retried.
	t.Logf("%d retried store operations", strings.Count(logs.String(), "retrying"))
	for _, err := range errs {
		t.Error(err)
	}
	if len(claims) != instances-len(errs) || len(errs) > 0 {
		t.Fatalf("%d distinct worker IDs for %d instances (%d failed): %v", len(claims), instances, len(errs), claims)
	}
	js, err := jetstream.New(conns[0])
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "KV_"+cfg.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("bucket stream: %d replicas configured, cluster %+v; want 3 (a leader and 2 peers)", info.Config.Replicas, info.Cluster)
	}
}
