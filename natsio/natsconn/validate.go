package natsconn

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
)

// Validate reports the first setting Connect could not use, as a
// *setting.Error naming its field (SettingName names the others a reason
// mentions): a URL list nats.go cannot read, a password without a user,
// two authentication methods, a client certificate without its key, a
// negative ping interval, and
// any file CheckFiles refuses. Its errors never quote a password, token
// or file content. Connect checks the same but the files, which it reads
// only as it connects.
func (cfg Config) Validate() error {
	if err := cfg.checkSettings(); err != nil {
		return err
	}
	return cfg.CheckFiles()
}

// checkSettings is Validate without the files.
func (cfg Config) checkSettings() error {
	if cfg.URL != "" {
		if reason := checkURLs(cfg.URL); reason != "" {
			return &setting.Error{Field: "URL", Reason: reason}
		}
	}
	if cfg.Password != "" && cfg.User == "" {
		return &setting.Error{Field: "Password", Reason: "set without " + cfg.name("User")}
	}
	first := ""
	for _, m := range [...]struct {
		field string
		set   bool
	}{
		{"User", cfg.User != ""},
		{"Token", cfg.Token != ""},
		{"NKeySeedFile", cfg.NKeySeedFile != ""},
		{"CredsFile", cfg.CredsFile != ""},
	} {
		switch {
		case !m.set:
		case first != "":
			return &setting.Error{Field: m.field, Reason: fmt.Sprintf("set together with %s: use one NATS authentication method (TLS client certificates combine with any)", cfg.name(first))}
		default:
			first = m.field
		}
	}
	if cfg.PingInterval < 0 {
		return &setting.Error{Field: "PingInterval", Reason: fmt.Sprintf("%s is negative (0: the default, %s)", cfg.PingInterval, DefaultPingInterval)}
	}
	if (cfg.TLSCertFile == "") != (cfg.TLSKeyFile == "") {
		return &setting.Error{Field: "TLSCertFile", Reason: fmt.Sprintf("a client certificate needs %s and %s together", cfg.name("TLSCertFile"), cfg.name("TLSKeyFile"))}
	}
	return nil
}

// name is how messages name the setting of the Config field: by
// SettingName when set, else the field name.
func (cfg Config) name(field string) string {
	if cfg.SettingName == nil {
		return field
	}
	return cfg.SettingName(field)
}

// checkURLs checks a comma-separated list of NATS URLs the way nats.go
// reads it (a URL without a scheme gets nats://) and says what is wrong,
// without quoting a URL that does not parse (it may hold a password).
func checkURLs(list string) string {
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
			return fmt.Sprintf("%s, %s, has the scheme %q; want nats, tls, ws or wss", which, RedactURL(p), u.Scheme)
		}
		if u.Hostname() == "" {
			return fmt.Sprintf("%s, %s, has no host", which, RedactURL(p))
		}
		if port := u.Port(); port != "" {
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				return fmt.Sprintf("%s, %s, has the port %q; want 1..65535", which, RedactURL(p), port)
			}
		}
	}
	return ""
}
