package natsconn

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
)

// A URL that does not parse must not come back quoted in Connect's error:
// its user info holds a password or token (Config's promise).
func TestConnectErrorNeverQuotesAnUnparseableURL(t *testing.T) {
	u, err := url.Parse(testenv.NATS(t, nil).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	host := u.Host
	for _, tc := range []struct{ url, secret string }{
		{"nats://svc:s3cr%zzet@" + host, "s3cr"},     // a bad escape in the password
		{"nats://svc:s3cr#et@" + host, "s3cr"},       // a # cuts the password into the fragment
		{"nats://t0k3n%zz@" + host, "t0k3n"},         // a token with a bad escape
		{"nats://svc:s3cret@" + host + ":x", "s3cr"}, // a bad port after valid user info
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := Connect(ctx, Config{URL: tc.url, Logger: quietLogger()})
		cancel()
		if err == nil {
			conn.Close()
			t.Errorf("%s: connected", RedactURL(tc.url))
			continue
		}
		if strings.Contains(err.Error(), tc.secret) {
			t.Errorf("the error quotes the secret: %v", err)
		}
		if !strings.Contains(err.Error(), "does not parse") {
			t.Errorf("the error does not say what is wrong: %v", err)
		}
	}
}
