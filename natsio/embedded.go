package natsio

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DefaultLocalAddr is where the zero-config run looks for a NATS server
// and, when none listens there, starts the embedded one: the address the
// nats CLI and client-demo use by default.
const DefaultLocalAddr = "127.0.0.1:4222"

// EmbeddedConfig configures the embedded nats-server.
type EmbeddedConfig struct {
	Addr     string       // host:port; default DefaultLocalAddr; port 0 picks a free one
	StoreDir string       // JetStream data directory; default DefaultStoreDir()
	Logger   *slog.Logger // nil: slog.Default(); the server's notices go to Debug
}

// Embedded is a nats-server with JetStream running in this process.
type Embedded struct {
	srv *server.Server
}

// DefaultStoreDir is the embedded server's default data directory: under
// the user's cache directory, or ./data when there is none.
func DefaultStoreDir() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "uid-dispenser", "nats")
	}
	return filepath.Join("data", "nats")
}

// ErrAddrInUse is what LocalServer's error matches when it cannot bind the
// address and yet finds nothing to connect to there.
var ErrAddrInUse = errors.New("natsio: address already in use")

// startEmbedded starts a nats-server with JetStream listening on cfg.Addr.
func startEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.Addr == "" {
		cfg.Addr = DefaultLocalAddr
	}
	if cfg.StoreDir == "" {
		cfg.StoreDir = DefaultStoreDir()
	}
	host, portStr, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("natsio: embedded server address %q: %w", cfg.Addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("natsio: embedded server port %q: %w", portStr, err)
	}
	if port == 0 {
		port = -1 // nats-server's "any free port"
	} else if l, err := net.Listen("tcp", cfg.Addr); err != nil {
		// Checked here because nats-server only reports it after its
		// readiness timeout.
		return nil, fmt.Errorf("%w: %s: %v", ErrAddrInUse, cfg.Addr, err)
	} else {
		l.Close()
	}
	if err := os.MkdirAll(cfg.StoreDir, 0o750); err != nil {
		return nil, fmt.Errorf("natsio: embedded server data directory: %w", err)
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: EmbeddedServerName,
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		// fsync every write before acknowledging it: the default (every
		// 2 minutes) lets a power loss forget leases and sequence segments
		// already acknowledged (docs/operations.md, "What the guarantees
		// assume"). The embedded server's writes are few: claims, renewals,
		// segments and blocks.
		SyncAlways: true,
		NoSigs:     true,
	})
	if err != nil {
		return nil, fmt.Errorf("natsio: embedded server: %w", err)
	}
	srv.SetLoggerV2(serverLogger{cmp.Or(cfg.Logger, slog.Default())}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("natsio: embedded server on %s not ready after 10s", cfg.Addr)
	}
	return &Embedded{srv: srv}, nil
}

// ClientURL is the URL clients connect to.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// Shutdown stops the server and waits until it has stopped.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// EmbeddedServerName is the embedded server's name, as its INFO reports
// it to every client: a dispenser that finds it knows the server syncs
// every write.
const EmbeddedServerName = "uid-dispenser-embedded"

// LocalServer gives the zero-config run a NATS server: the one listening
// on cfg.Addr when there is one, else an embedded one started there (the
// returned *Embedded, nil otherwise; shut it down when done).
func LocalServer(ctx context.Context, cfg EmbeddedConfig) (url string, emb *Embedded, err error) {
	if cfg.Addr == "" {
		cfg.Addr = DefaultLocalAddr
	}
	url = "nats://" + cfg.Addr
	for attempt := 0; ; attempt++ {
		if listening(ctx, cfg.Addr) {
			return url, nil, nil
		}
		emb, err = startEmbedded(cfg)
		if err == nil {
			return emb.ClientURL(), emb, nil
		}
		// Another process may have bound the address between the check
		// and the start (two instances starting at once): look again.
		if !errors.Is(err, ErrAddrInUse) || attempt == 2 {
			return "", nil, err
		}
	}
}

func listening(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: 500 * time.Millisecond}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// serverLogger sends nats-server's log to slog. Fatalf must not exit the
// process: the server reports a failed listen that way.
type serverLogger struct{ log *slog.Logger }

func (l serverLogger) Noticef(format string, v ...any) {
	l.log.Debug("nats-server: " + fmt.Sprintf(format, v...))
}
func (l serverLogger) Warnf(format string, v ...any) {
	l.log.Warn("nats-server: " + fmt.Sprintf(format, v...))
}
func (l serverLogger) Fatalf(format string, v ...any) {
	l.log.Error("nats-server: " + fmt.Sprintf(format, v...))
}
func (l serverLogger) Errorf(format string, v ...any) {
	l.log.Error("nats-server: " + fmt.Sprintf(format, v...))
}
func (l serverLogger) Debugf(format string, v ...any) {
	l.log.Debug("nats-server: " + fmt.Sprintf(format, v...))
}
func (l serverLogger) Tracef(format string, v ...any) {
	l.log.Debug("nats-server: " + fmt.Sprintf(format, v...))
}
