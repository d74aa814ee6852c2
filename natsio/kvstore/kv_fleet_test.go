package kvstore_test

import (
	"context"
	"strings"
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
	directSub, err := spy.SubscribeSync("$JS.API.DIRECT.GET.>")
	if err != nil {
		t.Fatal(err)
	}
	leaderSub, err := spy.SubscribeSync("$JS.API.STREAM.MSG.GET.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}

	if err := workerid.CheckGeneration(ctx, a, joined); err != nil {
		t.Fatalf("CheckGeneration on an unchanged record: %v", err)
	}
	// The check's requests were routed to the spy before their replies
	// came back, so the spy's flush returns after they are queued on its
	// subscriptions (synchronous ones: an async handler may not have run
	// yet when the flush returns, and under load it had not).
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	queued := func(sub *nats.Subscription) []string {
		n, _, err := sub.Pending()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for range n {
			m, err := sub.NextMsg(time.Second) // queued: returns at once
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, m.Subject+" "+string(m.Data))
		}
		return got
	}
	direct, leader := queued(directSub), queued(leaderSub)
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
