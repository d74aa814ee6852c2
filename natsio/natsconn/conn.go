package natsconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/internal/retry"
)

// Config says how to reach and authenticate to NATS. Secrets in it
// (password, token, URL user info) never appear in logs or errors.
type Config struct {
	URL  string // one URL or a comma-separated list; default nats.DefaultURL
	Name string // connection name the server shows

	User, Password string
	Token          string
	NKeySeedFile   string
	CredsFile      string // JWT + seed (.creds)
	TLSCAFile      string
	TLSCertFile    string // client certificate; needs TLSKeyFile
	TLSKeyFile     string

	ConnectTimeout time.Duration // per server, default 2s
	ReconnectWait  time.Duration // default 500ms (with jitter)
	DrainTimeout   time.Duration // default 10s
	// PingInterval is how often the client pings its server; a link
	// that dies silently is noticed after MaxPingsOut unanswered pings.
	// Default 5s: nats.go's own 2 minutes kept an instance on a node cut
	// off from its cluster for up to 4 minutes (found by the fault
	// harness), answering nobody while its queue-group peers could.
	PingInterval time.Duration
	Logger       *slog.Logger // default slog.Default()
	// SettingName, when set, is how error messages name a field of
	// Config other than the one in error (a program's own name for the
	// setting, such as its environment variable).
	SettingName func(field string) string
}

// DefaultPingInterval and MaxPingsOut bound how long a silently dead
// link goes unnoticed: about DefaultPingInterval × (MaxPingsOut + 1).
const (
	DefaultPingInterval = 5 * time.Second
	MaxPingsOut         = 2
)

// Conn is a NATS connection that reconnects forever (an instance keeps its
// worker ID across reconnects) and tells when it has closed.
type Conn struct {
	*nats.Conn
	closed   chan struct{}
	redacted string
}

// Connect connects to NATS. It fails fast, with a message that names the
// (redacted) URL, when no server answers or the credentials are refused:
// a misconfigured instance should not start. Once connected it reconnects
// for ever.
func Connect(ctx context.Context, cfg Config) (*Conn, error) {
	if err := cfg.checkSettings(); err != nil {
		return nil, fmt.Errorf("natsconn: %w", err)
	}
	if cfg.URL == "" {
		cfg.URL = nats.DefaultURL
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 2 * time.Second
	}
	if cfg.ReconnectWait == 0 {
		cfg.ReconnectWait = 500 * time.Millisecond
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = 10 * time.Second
	}
	if cfg.PingInterval == 0 {
		cfg.PingInterval = DefaultPingInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Conn{closed: make(chan struct{}), redacted: RedactURL(cfg.URL)}
	var closeOnce sync.Once
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.Timeout(cfg.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(cfg.ReconnectWait),
		nats.ReconnectJitter(cfg.ReconnectWait/2, cfg.ReconnectWait),
		nats.DrainTimeout(cfg.DrainTimeout),
		nats.PingInterval(cfg.PingInterval),
		nats.MaxPingsOutstanding(MaxPingsOut),
		// Set before any micro service is added: micro wraps these.
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS reconnected", "url", RedactURL(nc.ConnectedUrl()))
		}),
		nats.ClosedHandler(func(*nats.Conn) { closeOnce.Do(func() { close(c.closed) }) }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Warn("NATS async error", "subject", subject, "err", err)
		}),
	}
	auth, err := cfg.authOptions()
	if err != nil {
		return nil, err
	}
	opts = append(opts, auth...)

	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(cfg.URL, opts...)
		done <- result{nc, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("natsconn: connect to %s: %w", c.redacted, withoutURL(r.err))
		}
		c.Conn = r.nc
		return c, nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, fmt.Errorf("natsconn: connect to %s: %w", c.redacted, ctx.Err())
	}
}

// withoutURL replaces a *url.Error, which quotes the URL it could not
// parse (user info and all) and whose reason may quote part of a
// password, by a message that quotes nothing.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return errors.New("the URL does not parse; want nats://[user:password@]host:port (tls://, ws://, wss:// also)")
	}
	return err
}

func (cfg Config) authOptions() ([]nats.Option, error) {
	var opts []nats.Option
	if cfg.User != "" || cfg.Password != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.NKeySeedFile != "" {
		opt, err := nats.NkeyOptionFromSeed(cfg.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("natsconn: nkey seed file %s: %w", cfg.NKeySeedFile, err)
		}
		opts = append(opts, opt)
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCAFile))
	}
	if cfg.TLSCertFile != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCertFile, cfg.TLSKeyFile))
	}
	return opts, nil
}

// Closed is closed when the connection has closed for good (after Close
// or a finished drain).
func (c *Conn) Closed() <-chan struct{} { return c.closed }

// RedactedURL is the URL it was asked to connect to, with secrets hidden.
func (c *Conn) RedactedURL() string { return c.redacted }

// DrainAndWait drains the connection: its subscriptions stop receiving,
// the messages already delivered are handled, pending replies are flushed,
// then it closes. It waits for that until ctx is done, then closes the
// connection at once and returns ctx's error.
func (c *Conn) DrainAndWait(ctx context.Context) error {
	if err := c.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		c.Close()
		return fmt.Errorf("natsconn: drain: %w", err)
	}
	select {
	case <-c.closed:
		return nil
	case <-ctx.Done():
		c.Close()
		return fmt.Errorf("natsconn: drain: %w", ctx.Err())
	}
}

// RedactURL hides the secrets of a NATS URL (or comma-separated list): a
// password becomes "xxxxx", and user info without a password, which NATS
// reads as a token, is hidden whole.
func RedactURL(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if !strings.Contains(p, "@") {
			parts[i] = p
			continue
		}
		u, err := url.Parse(p)
		// An unescaped ? or # in a password moves its tail out of the user
		// info, into the query or fragment: hide the lot as unparseable.
		if err != nil || u.User == nil || u.RawQuery != "" || u.Fragment != "" || strings.Contains(u.Path, "@") {
			// Unparseable but has user info: hide everything before the @.
			parts[i] = "xxxxx" + p[strings.LastIndex(p, "@"):]
			continue
		}
		if _, hasPassword := u.User.Password(); hasPassword {
			parts[i] = u.Redacted()
		} else {
			u.User = url.User("xxxxx")
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}

// ConnectWaiting connects like Connect, but while no server answers (none
// listening yet: a container that starts before NATS) it tries again with
// back-off until ctx ends, logging each failed attempt once at info. A
// server that answers and refuses (credentials, TLS) fails at once: that
// does not get better by waiting.
func ConnectWaiting(ctx context.Context, cfg Config) (*Conn, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	began := time.Now()
	var pauses retry.Backoff
	var last error // the last "no servers" failure
	giveUp := func(attempts int, err error) error {
		if last == nil {
			return err
		}
		return fmt.Errorf("%w (%d attempts in %s)", last, attempts, time.Since(began).Round(time.Millisecond))
	}
	for attempt := 1; ; attempt++ {
		c, err := Connect(ctx, cfg)
		switch {
		case err == nil:
			return c, nil
		case ctx.Err() != nil:
			return nil, giveUp(attempt-1, err)
		case !errors.Is(err, nats.ErrNoServers):
			return nil, err
		}
		last = err
		wait := pauses.Next()
		if deadline, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(deadline))
		}
		if wait <= 0 {
			return nil, giveUp(attempt, err)
		}
		log.Info("NATS not reachable yet; retrying", "url", RedactURL(cfg.URL), "attempt", attempt, "err", nats.ErrNoServers, "in", wait)
		if retry.Sleep(ctx, wait) != nil {
			return nil, giveUp(attempt, err)
		}
	}
}
