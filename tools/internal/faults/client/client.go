// Package client is the fault harness's client: a process, run inside a
// host of its own, whose workers call uid.batch and
// uid.seq.<name>.batch over plain nats.go request-reply (the wire
// protocol, not the product's client library) and record every call in a
// history. Of the product's client it takes the retry rules (below) and
// the move off a server cut off from its cluster (uidclient.Mover, one
// per fleet as one uidclient.Client per subject prefix has), so that its
// calls fail where the product's would.
package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/history"
)

// Config is a client process's work.
type Config struct {
	Name      string   // the process's name in the history, e.g. c0
	URLs      string   // NATS URLs, comma-separated
	History   string   // the history file to write
	Workers   int      // concurrent callers
	Sequences []string // sequence names to ask for beside IDs
	Prefixes  []string // the fleets' subject prefixes, each call one of them (default uid)
	MaxCount  int      // each call asks for 1..MaxCount values
	Pause     time.Duration
	Timeout   time.Duration // a call not answered within it is unknown
	// NoRetry makes each call one request. Otherwise a call asks again
	// within its Timeout, as the product's clients do (uidclient: 2 ms
	// doubling to 250 ms, a reply's Uid-Retry-After-Ms as a floor), after
	// a certain failure (no responders, a 503: nothing was handed out) and
	// after an uncertain one (an attempt timed out, or the connection was
	// lost with the request in flight): values handed out to an attempt
	// whose reply never came are only lost, never repeated, so the
	// product's clients ask again, and a call whose last attempt was
	// uncertain stays unknown.
	NoRetry bool
	// AttemptTimeout bounds one request (default uidclient's,
	// uidclient.DefaultAttemptTimeout).
	AttemptTimeout time.Duration
	// MoveAfter is the move off a server cut off from its cluster, as
	// the product's clients make it (uidclient.Mover, docs/protocol.md):
	// 0 the default (after 2 attempts in a row ended in no responders,
	// at most every 5 s), negative never.
	MoveAfter int
}

// Run calls until ctx is done, then waits for the calls in flight and
// closes the history.
func Run(ctx context.Context, cfg Config) error {
	w, err := history.Create(cfg.History)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(cfg.URLs, nats.Name("faults-"+cfg.Name), nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond), nats.RetryOnFailedConnect(true),
		nats.PingInterval(2*time.Second), nats.MaxPingsOutstanding(2))
	if err != nil {
		w.Close()
		return fmt.Errorf("client: %w", err)
	}
	defer nc.Close()
	movers := newMovers(nc, cfg.prefixes(), cfg.MoveAfter, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	flushDone := make(chan struct{})
	go func() {
		defer close(flushDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = w.Flush()
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range cfg.Workers {
		wg.Go(func() { work(ctx, nc, movers, w, cfg, i) })
	}
	wg.Wait()
	<-flushDone
	return w.Close()
}

// newMovers returns a Mover per fleet (subject prefix), all on nc: an
// application of both fleets has a uidclient.Client for each, and each
// Client its own Mover. One Mover for both would let the replies of a
// fleet that answers reset the count of one that gets no responders, so
// that the connection never moved off a server cut off from that fleet's
// members.
func newMovers(nc *nats.Conn, prefixes []string, moveAfter int, log *slog.Logger) map[string]*uidclient.Mover {
	movers := make(map[string]*uidclient.Mover, len(prefixes))
	for _, p := range prefixes {
		movers[p] = uidclient.NewMover(nc, uidclient.MoveConfig{After: moveAfter, Logger: log})
	}
	return movers
}

// prefixes are the fleets' subject prefixes the calls pick from.
func (cfg Config) prefixes() []string {
	if len(cfg.Prefixes) == 0 {
		return []string{"uid"}
	}
	return cfg.Prefixes
}

func work(ctx context.Context, nc *nats.Conn, movers map[string]*uidclient.Mover, w *history.Writer, cfg Config, index int) {
	process := fmt.Sprintf("%s/%d", cfg.Name, index)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(index)))
	prefixes := cfg.prefixes()
	var call int64
	for ctx.Err() == nil {
		call++
		n := 1 + rng.IntN(max(1, cfg.MaxCount))
		prefix := prefixes[rng.IntN(len(prefixes))]
		op := history.Op{Process: process, Call: call, Func: history.FuncIDs, Fleet: prefix, Count: n}
		subject := prefix + ".batch"
		if k := rng.IntN(len(cfg.Sequences) + 2); k < len(cfg.Sequences) {
			op.Func, op.Name = history.FuncSeq, cfg.Sequences[k]
			subject = prefix + ".seq." + op.Name + ".batch"
		}
		op.Type, op.Time = history.Invoke, time.Now().UnixNano()
		_ = w.Write(op)
		done := request(nc, movers[prefix], subject, op, cfg.Timeout, cfg.attemptTimeout(), !cfg.NoRetry)
		done.Time = time.Now().UnixNano()
		_ = w.Write(done)
		if cfg.Pause > 0 {
			t := time.NewTimer(cfg.Pause)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
}

func (cfg Config) attemptTimeout() time.Duration {
	if cfg.AttemptTimeout > 0 {
		return cfg.AttemptTimeout
	}
	return uidclient.DefaultAttemptTimeout
}

// request makes one call and returns its completion: one request, or
// with retry more until one is answered, fails in a way no request
// cures, or the timeout leaves no time for another. A call one of whose
// attempts may have been served and that got no values is unknown.
func request(nc *nats.Conn, mover *uidclient.Mover, subject string, op history.Op, timeout, attemptTimeout time.Duration, retry bool) history.Op {
	// Not bound to the run's context: a call in flight at the end runs to
	// its answer or its timeout, so that no invocation stays open.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pause := minPause
	uncertain := ""
	for {
		op.Attempts++
		done, again, retryAfter := attempt(ctx, nc, mover, subject, op, attemptTimeout)
		if done.Type == history.Unknown {
			uncertain = done.Error
		} else if done.Type == history.Fail && uncertain != "" {
			done.Type, done.Error = history.Unknown, uncertain+" (then "+done.Error+")"
		}
		if !retry || !again {
			return done
		}
		wait := max(pause, retryAfter)
		wait += rand.N(wait/2 + 1) // jitter, as the retry policy
		pause = min(2*pause, maxPause)
		// Another request only with a quarter of the timeout left for it:
		// one cut short by the timeout would turn a call that certainly
		// failed into an unknown one.
		if deadline, _ := ctx.Deadline(); time.Until(deadline)-wait < timeout/4 {
			return done
		}
		t := time.NewTimer(wait)
		<-t.C
	}
}

// The pauses between a call's requests: uidclient's defaults.
const (
	minPause = 2 * time.Millisecond
	maxPause = 250 * time.Millisecond
)

// attempt sends one request, bounded by attemptTimeout within ctx, and
// returns its completion; for a failure that another request may cure,
// again and the reply's retry hint. The mover sees every outcome.
func attempt(ctx context.Context, nc *nats.Conn, mover *uidclient.Mover, subject string, op history.Op, attemptTimeout time.Duration) (_ history.Op, again bool, retryAfter time.Duration) {
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	msg, err := nc.RequestWithContext(actx, subject, []byte(strconv.Itoa(op.Count)))
	mover.Observe(err)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		op.Type, op.Error = history.Fail, "no responders"
		return op, true, 0
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrConnectionReconnecting):
		// The request may have been served: unknown, but asked again
		// as uidclient does (its retryable).
		op.Type, op.Error = history.Unknown, err.Error()
		return op, true, 0
	case err != nil:
		op.Type, op.Error = history.Unknown, err.Error()
		return op, false, 0
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		op.Type, op.Error = history.Fail, code+" "+msg.Header.Get("Nats-Service-Error")
		ms, _ := strconv.Atoi(msg.Header.Get("Uid-Retry-After-Ms"))
		return op, code == "503", time.Duration(ms) * time.Millisecond
	}
	op.Replier = msg.Header.Get("Uid-Instance")
	values, perr := parse(msg.Data)
	if perr != nil {
		// A reply that is neither an error nor values: recorded as ok
		// with none, and the reason; the checker counts its values lost.
		op.Type, op.Error = history.OK, perr.Error()
		return op, false, 0
	}
	op.Type, op.Values = history.OK, values
	return op, false, 0
}

// parse reads a decimal reply: values separated by newlines.
func parse(data []byte) ([]uint64, error) {
	text := strings.TrimSpace(string(data))
	if text == "" {
		return nil, errors.New("empty reply")
	}
	fields := strings.Split(text, "\n")
	out := make([]uint64, 0, len(fields))
	for _, f := range fields {
		v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("reply value %q: %w", f, err)
		}
		out = append(out, v)
	}
	return out, nil
}
