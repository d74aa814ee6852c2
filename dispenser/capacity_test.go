package dispenser

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
)

// DISPENSER_TAKE_WAIT bounds how long a bulk batch waits at the
// instance's capacity (the service's capacity queue) as it bounds the
// generator's waits: a batch the instance cannot fill gets its 503 after
// about the configured wait, not after the service's own default.
func TestTakeWaitBoundsBulkBatchesAtCapacity(t *testing.T) {
	url := testenv.NATS(t, nil).ClientURL()
	cfg := testConfig(url, "")
	// 1,024 IDs a second on one worker ID, at most 2s ahead of the clock.
	cfg.TimeBits, cfg.WorkerBits, cfg.SeqBits, cfg.MaxLanes = 31, 22, 10, 1
	cfg.TakeWait = 2 * time.Second
	start(t, cfg)
	nc := testConn(t, url).Conn
	if _, err := nc.Request("uid.batch", []byte("100"), 5*time.Second); err != nil {
		t.Fatalf("a batch within capacity: %v", err)
	}
	begin := time.Now()
	msg, err := nc.Request("uid.batch", []byte("20000"), 10*time.Second)
	waited := time.Since(begin)
	if err != nil {
		t.Fatal(err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "503" {
		t.Fatalf("a batch of 20,000 at 1,024 IDs/s: code %q %q, want a 503", code, msg.Header.Get(micro.ErrorHeader))
	}
	// Not before the configured wait (the service's own default is 800
	// ms); a batch that waited for all 20,000 IDs (20 s) would pass the
	// request's 10 s timeout instead. No upper bound on speed.
	if waited < cfg.TakeWait*3/4 {
		t.Fatalf("the 503 came after %s, want about DISPENSER_TAKE_WAIT=%s", waited, cfg.TakeWait)
	}
}
