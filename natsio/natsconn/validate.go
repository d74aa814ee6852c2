package natsconn

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// CheckURLs checks a comma-separated list of NATS URLs the way nats.go
// reads it (a URL without a scheme gets nats://) and says what is wrong,
// without quoting a URL that does not parse (it may hold a password).
func CheckURLs(list string) string {
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
