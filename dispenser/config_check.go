package dispenser

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
)

// checkReachability checks the settings that say how to reach NATS and
// where to listen, which Validate would otherwise let through to fail
// later in start-up with messages that do not name the variable: URLs,
// the choice of one authentication method, the credentials and TLS files,
// listen addresses and the embedded server's directory. Its errors never
// quote a password, token or file content.
func (c Config) checkReachability() error {
	bad := func(name, format string, args ...any) error {
		return &ConfigError{Var: EnvPrefix + "_" + name, Reason: fmt.Sprintf(format, args...)}
	}
	if c.NATSURL != "" {
		if reason := checkNATSURLs(c.NATSURL); reason != "" {
			return bad("NATS_URL", "%s", reason)
		}
	}
	if c.NATSPassword != "" && c.NATSUser == "" {
		return bad("NATS_PASSWORD", "set without DISPENSER_NATS_USER")
	}
	var methods []string
	for _, m := range []struct {
		set  bool
		vars string
	}{
		{c.NATSUser != "", "DISPENSER_NATS_USER"},
		{c.NATSToken != "", "DISPENSER_NATS_TOKEN"},
		{c.NATSNKeySeedFile != "", "DISPENSER_NATS_NKEY_SEED_FILE"},
		{c.NATSCredsFile != "", "DISPENSER_NATS_CREDS_FILE"},
	} {
		if m.set {
			methods = append(methods, m.vars)
		}
	}
	if len(methods) > 1 {
		return &ConfigError{Var: methods[1], Reason: fmt.Sprintf("set together with %s: use one NATS authentication method (TLS client certificates combine with any)", strings.Join(methods[:1], ", "))}
	}
	if err := c.connConfig("", "", nil).CheckFiles(); err != nil {
		var fe *natsconn.FileError
		if !errors.As(err, &fe) {
			return err
		}
		return &ConfigError{Var: settingVar[natsconn.Config](fe.Field), Reason: err.Error()}
	}
	if reason := checkListenAddr(c.EmbeddedAddr); reason != "" {
		return bad("EMBEDDED_ADDR", "%q %s", c.EmbeddedAddr, reason)
	}
	if c.MetricsAddr != "" {
		if reason := checkListenAddr(c.MetricsAddr); reason != "" {
			return bad("METRICS_ADDR", "%q %s", c.MetricsAddr, reason)
		}
	}
	if c.EmbeddedDataDir != "" {
		if reason := checkDirectoryPath(c.EmbeddedDataDir); reason != "" {
			return bad("EMBEDDED_DATA_DIR", "%s", reason)
		}
	}
	return nil
}

// checkNATSURLs checks a comma-separated list of NATS URLs the way nats.go
// reads it (a URL without a scheme gets nats://) and says what is wrong,
// without quoting a URL that does not parse (it may hold a password).
func checkNATSURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		which := "the URL"
		if len(parts) > 1 {
			which = fmt.Sprintf("URL %d of %d", i+1, len(parts))
		}
		p = strings.TrimSpace(p)
		if p == "" {
			return which + " is empty"
		}
		if !strings.Contains(p, "://") {
			p = "nats://" + p
		}
		u, err := url.Parse(p)
		if err != nil {
			return which + " does not parse; want nats://[user:password@]host:port (tls://, ws://, wss:// also)"
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Sprintf("%s, %s, has the scheme %q; want nats, tls, ws or wss", which, natsconn.RedactURL(p), u.Scheme)
		}
		if u.Hostname() == "" {
			return fmt.Sprintf("%s, %s, has no host", which, natsconn.RedactURL(p))
		}
		if port := u.Port(); port != "" {
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				return fmt.Sprintf("%s, %s, has the port %q; want 1..65535", which, natsconn.RedactURL(p), port)
			}
		}
	}
	return ""
}

// checkListenAddr says what is wrong with a host:port to listen on.
func checkListenAddr(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "is not host:port"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "has no port number 0..65535"
	}
	return ""
}

// checkDirectoryPath says why dir cannot be (or become, by MkdirAll) a
// directory: the nearest part of it that exists must be one.
func checkDirectoryPath(dir string) string {
	for p := filepath.Clean(dir); ; {
		info, err := os.Stat(p)
		switch {
		case err == nil && !info.IsDir():
			return fmt.Sprintf("%s is not a directory", p)
		case err == nil:
			return ""
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Sprintf("%s: %v", p, errors.Unwrap(err))
		}
		parent := filepath.Dir(p)
		if parent == p {
			return ""
		}
		p = parent
	}
}
