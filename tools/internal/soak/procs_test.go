package soak

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/dispenser"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
)

// A dispenser holds a worker ID, as far as the soak can tell from its log,
// from the lease until it releases it, loses it, or gives its lane back:
// a lane given back while its release cannot reach the store (a
// partition) no longer issues, and a later owner of it is no takeover
// (the 60-minute run reported 14 such false zombies).
func TestHoldsFollowsTheLog(t *testing.T) {
	p := &dispenserProc{slot: &dispenserSlot{events: newEvents(), fleet: kvFleet}, holds: map[int64]bool{}}
	line := func(name string, worker int) string {
		return fmt.Sprintf(`{"msg":"any wording","%s":%q,"%s":%d,"%s":0}`, event.Key, name, event.AttrWorker, worker, event.AttrAfter)
	}
	for _, l := range []string{
		line(event.LeaseAcquired, 3),
		line(event.LeaseAcquired, 4),
		line(event.LeaseAcquired, 5),
		line(event.LeaseAcquired, 6),
		line(event.LaneReturned, 3),
		line(event.LeaseReleased, 4),
		line(event.LeaseLost, 6),
	} {
		p.handleLine([]byte(l))
	}
	for w, want := range map[int64]bool{3: false, 4: false, 5: true, 6: false} {
		if got := p.Holds(w); got != want {
			t.Errorf("Holds(%d) = %v, want %v", w, got, want)
		}
	}
}

// The soak reads what a real dispenser logs: started on a KV store, its
// JSON log tells the soak that it serves and under which worker ID, that
// it holds that worker ID's lease (and from which second), and after its
// shutdown that it holds it no more. A reworded message cannot break this:
// the soak matches the events of package event, and this test runs the
// real code that logs them.
func TestProcReadsARealDispensersLog(t *testing.T) {
	cfg := dispenser.DefaultConfig()
	cfg.NATSURL = testenv.NATS(t, nil).ClientURL()
	cfg.ShutdownTimeout = 5 * time.Second
	// A temporary server: no loss window (the default keeps the instance
	// out for 2 minutes before its first reservation is durable).
	cfg.StoreLossWindow = 0
	var logs testenv.LogBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := dispenser.Start(ctx, cfg, dispenser.WithLogger(logs.JSONLogger(slog.LevelDebug)))
	if err != nil {
		t.Fatal(err)
	}
	p := &dispenserProc{slot: &dispenserSlot{events: newEvents(), fleet: kvFleet}, holds: map[int64]bool{}, workerID: -1, serving: make(chan struct{})}
	read := 0
	feed := func() {
		lines := strings.SplitAfter(logs.String(), "\n")
		for _, l := range lines[read:] {
			if strings.HasSuffix(l, "\n") {
				p.handleLine([]byte(strings.TrimSuffix(l, "\n")))
				read++
			}
		}
	}
	feed()
	w := int64(d.WorkerID())
	select {
	case <-p.serving:
	default:
		t.Fatalf("the soak did not see the dispenser serve; log:\n%s", logs.String())
	}
	if p.WorkerID() != w || !p.Holds(w) {
		t.Fatalf("the soak read worker ID %d (holds %d: %v), the dispenser serves under %d; log:\n%s", p.WorkerID(), w, p.Holds(w), w, logs.String())
	}
	if afters := p.slot.events.afters[kvFleet.name][uint64(w)]; len(afters) != 1 {
		t.Fatalf("the soak read %d claims of worker ID %d, want 1", len(afters), w)
	}
	if err := d.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	feed()
	if p.Holds(w) {
		t.Fatalf("after the shutdown the soak still sees worker ID %d held; log:\n%s", w, logs.String())
	}
}
