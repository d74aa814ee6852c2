package natsio

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// firstTake is a block source that says when the publisher first takes
// IDs, that is just before its first publish.
type firstTake struct {
	BlockIDSource
	once  sync.Once
	taken chan struct{}
}

func (s *firstTake) NextN(ctx context.Context, dst []uint64) (int, error) {
	n, err := s.BlockIDSource.NextN(ctx, dst)
	s.once.Do(func() { close(s.taken) })
	return n, err
}

// TestPublishersStoppedAtOnceLeaveNoGoroutine: publishers stopped right
// after their first publish leave nothing running once their connection
// closes. (jetstream's CleanupPublisher, run at Stop, stranded nats.go's
// reconnect watcher when it ran before the watcher's first read: the
// watcher then waits on a nil channel for ever.)
func TestPublishersStoppedAtOnceLeaveNoGoroutine(t *testing.T) {
	srv := startNATS(t, nil)
	inst := startInstance(t, srv, 12, instanceOpts{})
	nc, err := nats.Connect(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := BlocksConfig{BlockSize: 16, TargetDepth: 64, Logger: quietLogger()}
	for i := range 100 {
		// A stream of its own each: an earlier publisher's blocks would
		// fill a shared one, and a full stream is never published to.
		cfg.Stream, cfg.Subject = fmt.Sprintf("STOPPED_%d", i), fmt.Sprintf("stopped.%d", i)
		src := &firstTake{BlockIDSource: inst.gen, taken: make(chan struct{})}
		p, err := NewBlockPublisher(ctx, nc, src, cfg)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-src.taken:
		case <-ctx.Done():
			t.Fatalf("publisher %d never took IDs", i)
		}
		if err := p.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		// Stopped right after its first take, the publisher mostly has a
		// block in flight: its outcome is awaited, so the block is counted
		// published, failed or expired, never discarded uncounted.
		if st := p.Stats(); st.IDsDiscarded > (st.Failed+st.Expired)*uint64(cfg.BlockSize) {
			t.Errorf("publisher %d: %d IDs discarded with %d blocks failed and %d expired (%+v): a block in flight at the stop was discarded uncounted", i, st.IDsDiscarded, st.Failed, st.Expired, st)
		}
	}
	nc.Close()
	// The server's goroutines for the streams stay (the server does), so
	// only nats.go's watcher is looked for.
	const watcher = "jetstream.(*jetStream).resetPendingAcksOnReconnect"
	var n int
	buf := make([]byte, 1<<22)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n = strings.Count(string(buf[:runtime.Stack(buf, true)]), watcher); n == 0 {
			return
		}
	}
	t.Fatalf("%d of nats.go's reconnect watchers still run after 100 publishers stopped and their connection closed", n)
}
