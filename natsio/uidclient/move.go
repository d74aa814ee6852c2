package uidclient

import (
	"errors"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
)

// The move off a server cut off from its cluster (docs/protocol.md,
// "Moving off a cut-off server"; every client keeps the same rule).
const (
	// DefaultMoveAfter is how many attempts in a row, on one connection,
	// must end in no responders before the client moves to another
	// server: one such attempt is a fleet restarting as often as a cut
	// server, two in a row with no reply between them seldom are.
	DefaultMoveAfter = 2
	// DefaultMoveEvery is the least time between two moves: a fleet with
	// no instance at all gets no responders on every server, and its
	// clients then move at most this often instead of after every two
	// attempts.
	DefaultMoveEvery = 5 * time.Second
)

// MoveConfig configures a Mover. Zero values take defaults.
type MoveConfig struct {
	// After: the consecutive attempts ended in no responders that make
	// the connection move (default DefaultMoveAfter).
	// Negative: never move; the connection is then left alone.
	After int
	// Every: the least time between two moves, on the monotonic clock
	// (default DefaultMoveEvery).
	Every time.Duration
	// Logger logs each move (default slog.Default()).
	Logger *slog.Logger
}

// Mover moves a connection off a NATS server cut off from its cluster.
//
// NATS never does so on its own: the connection to that server is
// healthy, only the server has lost its routes, so every request sent
// there gets no responders until the cut heals, however many servers the
// connection knows. A Mover watches the outcome of each request on the
// connection (Observe) and counts the attempts in a row that ended in no
// responders; any reply, an error status such as a 503 too, resets the
// count, and a timeout neither counts nor resets (Observe). When the
// count reaches After, the connection's server pool holds more than one
// server and the last move was at least Every ago (a reconnect the Mover
// did not make, such as another Mover's move on the same connection,
// counts as a move and resets the count), it forces the connection to
// reconnect (nats.Conn.ForceReconnect), which takes the next server of
// the pool, and resets the count. Requests in flight on the connection
// then fail with nats.ErrDisconnected; a request is retried as before. A connection
// made not to reconnect (nats.NoReconnect, MaxReconnects(0)) is never
// moved.
//
// The connection stays its owner's: a Mover only ever forces it to
// reconnect, never closes it or changes its options. It is safe for
// concurrent use.
type Mover struct {
	nc    *nats.Conn
	after int64 // 0: never
	every time.Duration
	log   *slog.Logger

	failures atomic.Int64 // attempts in a row without a reply
	moves    atomic.Uint64

	mu       sync.Mutex // serialises the moves
	lastMove time.Time  // with its monotonic reading
	// reconnects is the connection's reconnect count the Mover expects:
	// as it last saw it, plus one for its own move. Another count is a
	// reconnect it did not make (another Mover's move on the connection,
	// nats.go's own), see reconnected.
	reconnects uint64
}

// NewMover returns a Mover for nc.
func NewMover(nc *nats.Conn, cfg MoveConfig) *Mover {
	if cfg.After == 0 {
		cfg.After = DefaultMoveAfter
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultMoveEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Mover{nc: nc, after: int64(max(cfg.After, 0)), every: cfg.Every, log: cfg.Logger, reconnects: nc.Stats().Reconnects}
}

// Observe takes the outcome of one request on the connection: err nil
// for any reply (an error status is a reply), else the request's error.
// No responders counts; other errors (a timeout, a cancelled request, a
// connection lost) neither count nor reset. It tells whether it moved the
// connection.
func (m *Mover) Observe(err error) bool {
	switch {
	case m.after == 0:
		return false
	case err == nil:
		// A read before the write: the replies of a busy connection
		// do not all write the same cache line.
		if m.failures.Load() != 0 {
			m.failures.Store(0)
		}
		return false
	case errors.Is(err, nats.ErrNoResponders):
		// Timeouts are not counted (docs/protocol.md): a server that
		// times out requests may be stopped, and nats.go holds the
		// connection's lock while it reconnects (its flush to the
		// server left, the next server's handshake), so a move off a
		// stopped server held the calls on the connection past their
		// deadline (the soak's paused node). A server cut off from its
		// cluster answers no responders once its routes time out.
		if m.failures.Add(1) < m.after {
			return false
		}
		return m.move()
	}
	return false
}

// Moves is how many times the Mover decided to move the connection: the
// move itself runs after (see move), and one from a server that then
// fails its ping is counted though nats.go's ping check makes it.
func (m *Mover) Moves() uint64 { return m.moves.Load() }

func (m *Mover) move() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	failures := m.failures.Load()
	switch {
	case failures < m.after: // a reply, or another caller's move, came first
		return false
	case m.reconnected():
		return false
	case !m.lastMove.IsZero() && time.Since(m.lastMove) < m.every:
		return false
	case m.nc.Status() != nats.CONNECTED: // reconnecting already
		return false
	case !m.nc.Opts.AllowReconnect || m.nc.Opts.MaxReconnect == 0:
		// ForceReconnect would reconnect it all the same, and a server
		// it then fails to reach drops out of its pool, or closes it:
		// its owner chose that it never reconnects.
		return false
	case len(m.nc.Servers()) < 2:
		return false
	}
	left, name := serverOnly(m.nc.ConnectedUrl()), m.nc.ConnectedServerName()
	m.lastMove = time.Now()
	m.failures.Store(0)
	m.moves.Add(1)
	m.reconnects++
	// ForceReconnect flushes what is buffered to the server it leaves,
	// holding the connection's lock: a server that stopped reading (a
	// paused process, whose requests time out) holds that write, and
	// every request on the connection behind it, for as long as the
	// socket's buffers stay full (the soak caught calls returning 1 s
	// past their deadline). So the move is made off the caller's
	// goroutine, and only from a server that still answers a ping: one
	// that does not is the library's own stale-connection detection's
	// to leave (PingInterval, MaxPingsOutstanding), which closes the
	// socket without flushing to it.
	go func() {
		if err := m.nc.FlushTimeout(movePing); err != nil {
			m.log.Debug("uidclient: not moving: the server does not answer a ping; the connection's own ping check will leave it",
				event.AttrServer, left, "server_name", name, "err", err)
			return
		}
		if err := m.nc.ForceReconnect(); err != nil {
			return // closed meanwhile
		}
		m.log.Warn("uidclient: no dispenser answers through this NATS server; moving to another server of the connection's pool",
			event.Key, event.ClientMoved, event.AttrServer, left, "server_name", name, "failed_attempts", failures)
	}()
	return true
}

// reconnected tells whether the connection reconnected without this
// Mover's move since it last looked, and if so takes that reconnect for a
// move: the count so far was of attempts on the server the connection
// left, and Every runs from now. Two clients of two fleets sharing a
// connection each have a Mover (the fault harness: one Mover's move,
// then the other's on the no responders counted before it, moved the
// connection twice within milliseconds, off the server it had just
// reached).
func (m *Mover) reconnected() bool {
	r := m.nc.Stats().Reconnects
	if r == m.reconnects {
		return false
	}
	m.reconnects = r
	m.lastMove = time.Now()
	m.failures.Store(0)
	return true
}

// movePing bounds the ping a move makes first: a server cut off from its
// cluster answers at once, a stopped one never.
const movePing = 250 * time.Millisecond

// serverOnly is a server URL without its user information: a password
// or a token may sit there.
func serverOnly(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparseable URL)"
	}
	return u.Scheme + "://" + u.Host
}
