package kvstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// TestKVFleetCheckReadsAtTheLeader: the fleet check after a claim
// (workerid.CheckGeneration) must read the record at the stream leader.
// A direct get may be answered by any replica, and one that lags shows
// the record unsealed after dispenser -new-generation sealed it, so an
// old instance would serve on (issue 31 §3). A spy subscribed to both
// APIs' subjects sees every request the check sends.
func TestKVFleetCheckReadsAtTheLeader(t *testing.T) {
	srv := testenv.NATS(t, nil)
	addr := strings.TrimPrefix(srv.ClientURL(), "nats://")
	cfg := kvConfig(workerid.ModeLeased)
	cfg.Bucket = "fleet_leader"
	a := newKVAssigner(t, cfg, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	joined, err := a.RecordFleet(ctx, workerid.Fleet{Generation: 1, Layout: "28/22/13@2016-05-20", WorkerMode: workerid.ModeLeased, SubjectPrefix: "uid"})
	if err != nil {
		t.Fatal(err)
	}

	spy := kvConnect(t, addr)
	var mu sync.Mutex
	var direct, leader []string
	record := func(list *[]string) nats.MsgHandler {
		return func(m *nats.Msg) {
			mu.Lock()
			defer mu.Unlock()
			*list = append(*list, m.Subject+" "+string(m.Data))
		}
	}
	for subject, list := range map[string]*[]string{"$JS.API.DIRECT.GET.>": &direct, "$JS.API.STREAM.MSG.GET.>": &leader} {
		if _, err := spy.Subscribe(subject, record(list)); err != nil {
			t.Fatal(err)
		}
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}

	if err := workerid.CheckGeneration(ctx, a, joined); err != nil {
		t.Fatalf("CheckGeneration on an unchanged record: %v", err)
	}
	// The spy's connection sees every request sent before its own flush
	// has come back: the server forwards messages in order.
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(direct) > 0 {
		t.Errorf("the fleet check sent %d direct get(s), which any replica may answer: %q", len(direct), direct)
	}
	fleetAtLeader := 0
	for _, req := range leader {
		if strings.Contains(req, ".fleet") {
			fleetAtLeader++
		}
	}
	if fleetAtLeader == 0 {
		t.Errorf("the fleet check sent no message get of the fleet record to the stream leader (message gets: %q)", leader)
	}
}

var _ workerid.FleetStore = (*kvstore.Assigner)(nil)
