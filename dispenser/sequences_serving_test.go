package dispenser

import (
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/internal/testwait"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
)

// An instance cut off from its sequence store (MySQL, through a proxy
// that the test cuts), while another reaches it, takes the sequences'
// next and batch out of the queue group once a request meets the cut:
// every request sent after it left goes to the other instance, none gets
// a 503 "sequence store unavailable", the instance still issues IDs and
// /readyz stays ready. Once the store is back it joins again and serves
// numbers. No number is handed out twice across it all. Before the
// change the instance stayed in the group and answered its share with
// 503s for as long as the cut lasted.
func TestSequenceStoreCutLeavesTheQueueGroup(t *testing.T) {
	url := testenv.NATS(t, nil).ClientURL()
	cfg := testConfig(url, testenv.MySQL(t))
	cfg.Sequences = "orders"
	// Small segments: the cut instance runs out of numbers at once.
	cfg.SequenceStep, cfg.SequenceMaxStep = 10, 40
	// The cut instance's lease lives in the cut store too: long enough
	// that it stays valid however slowly a loaded machine runs the test.
	cfg.LeaseTTL = 2 * time.Minute
	cfgA, proxy := throughProxy(t, cfg)
	var logA testenv.LogBuffer
	ctx := testwait.Context(t)
	a, err := Start(ctx, cfgA, WithLogger(logA.JSONLogger(slog.LevelDebug)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, a) })
	b := start(t, cfg)

	load := startSeqLoad(t, url, 4)
	testwait.WaitFor(t, 10*time.Second, "numbers from both instances", func() bool {
		return issued(t, a) >= 200 && issued(t, b) >= 200
	})
	if f := load.failedAfter(0); len(f) > 0 {
		t.Fatalf("%d requests failed before the cut, the first: %s", len(f), f[0])
	}

	proxy.Cut()
	bAtCut := issued(t, b)
	testwait.WaitFor(t, 10*time.Second, "a to leave the queue group of the sequences (or b to serve 2,000 numbers more)", func() bool {
		return hasEvent(t, &logA, event.SequencesNotServing) || issued(t, b) >= bAtCut+2000
	})
	if !hasEvent(t, &logA, event.SequencesNotServing) {
		f := load.failedAfter(0)
		t.Fatalf("a stayed in the queue group with its store cut: %d requests failed while b served 2,000 numbers, the first: %s", len(f), first(f))
	}
	left := load.started.Load() // every request after it was sent after a left
	failedBeforeLeave := len(load.failedAfter(0))
	if err := a.ready(); err != nil {
		t.Errorf("/readyz of an instance serving IDs, not sequences: %v", err)
	}
	if !a.seqOut.Load() {
		t.Error("uid_sequences_serving says a serves sequences while it is out of the queue group")
	}
	if _, err := client(t, url).Next(ctx); err != nil {
		t.Errorf("an ID while a serves no sequences: %v", err)
	}
	bAtLeave := issued(t, b)
	testwait.WaitFor(t, 10*time.Second, "b to serve 2,000 numbers while a is out", func() bool {
		return issued(t, b) >= bAtLeave+2000
	})
	if f := load.failedAfter(left); len(f) > 0 {
		t.Fatalf("%d requests sent after a left the queue group failed, the first: %s", len(f), f[0])
	}

	proxy.Restore()
	aAtRestore := issued(t, a)
	testwait.WaitFor(t, 15*time.Second, "a to join again and serve numbers", func() bool {
		return hasEvent(t, &logA, event.SequencesServing) && issued(t, a) >= aAtRestore+200
	})
	nums := load.finish()
	if a.seqOut.Load() {
		t.Error("uid_sequences_serving says a serves no sequences after it joined again")
	}
	if f := load.failedAfter(left); len(f) > 0 {
		t.Fatalf("%d requests sent after a left the queue group failed (a out, then back), the first: %s", len(f), f[0])
	}
	testenv.CheckDistinct(t, nums)
	t.Logf("%d numbers distinct; %d requests failed as a met the cut (before it left), none after", len(nums), failedBeforeLeave)
}

// issued is how many numbers of "orders" d handed out.
func issued(t *testing.T, d *Dispenser) uint64 {
	t.Helper()
	for _, s := range d.Sequences().Stats() {
		if s.Name == "orders" {
			return s.Issued
		}
	}
	return 0
}

func first(failures []string) string {
	if len(failures) == 0 {
		return "none"
	}
	return failures[0]
}

// seqLoad asks for numbers of "orders" with plain NATS requests (batches
// of 1 to 5), so that every reply is seen: the Go client would retry a
// 503 and hide it. Each request is numbered as it is sent.
type seqLoad struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	started atomic.Int64

	mu     sync.Mutex
	nums   []uint64
	failed []seqFailure
}

type seqFailure struct {
	request int64 // the request's number: sent after started read below it
	what    string
}

func startSeqLoad(t *testing.T, url string, callers int) *seqLoad {
	l := &seqLoad{stop: make(chan struct{})}
	subject := protocol.SeqSubject(protocol.DefaultSubjectPrefix, "orders", protocol.EndpointBatch)
	runCallers(t, url, callers, l.stop, &l.wg, func(nc *nats.Conn, n int) {
		request := l.started.Add(1)
		msg, err := nc.Request(subject, []byte(strconv.Itoa(1+n%5)), 10*time.Second)
		l.record(request, msg, err)
	})
	t.Cleanup(func() { l.finish() })
	return l
}

func (l *seqLoad) record(request int64, msg *nats.Msg, err error) {
	nums, err := decimalReply(msg, err)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failed = append(l.failed, seqFailure{request, fmt.Sprintf("request %d: %v", request, err)})
		return
	}
	l.nums = append(l.nums, nums...)
}

// failedAfter are the failures of the requests numbered above request.
func (l *seqLoad) failedAfter(request int64) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, f := range l.failed {
		if f.request > request {
			out = append(out, f.what)
		}
	}
	return out
}

// finish stops the load (idempotent) and returns the numbers it took.
func (l *seqLoad) finish() []uint64 {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nums
}
