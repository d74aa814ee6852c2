package natsconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
)

func TestConnectFailsFastWithClearMessage(t *testing.T) {
	// A port nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "nats://127.0.0.1:" + fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	// Fast means on its own, before the context's deadline (a safety net
	// of 30 s, not a bound on speed), which a waiting connect would reach.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err = Connect(ctx, Config{URL: deadURL, Logger: quietLogger()})
	if err == nil || !strings.Contains(err.Error(), deadURL) || ctx.Err() != nil {
		t.Fatalf("dead URL: %v after %v", err, time.Since(start))
	}

	url := startNATS(t, &server.Options{Username: "alice", Password: "right-password"})
	start = time.Now()
	_, err = Connect(ctx, Config{URL: url, User: "alice", Password: "wrong-password", Logger: quietLogger()})
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") || ctx.Err() != nil {
		t.Fatalf("wrong password: %v after %v", err, time.Since(start))
	}
	withSecret := strings.Replace(url, "nats://", "nats://alice:wrong-password@", 1)
	_, err = Connect(ctx, Config{URL: withSecret, Logger: quietLogger()})
	if err == nil || strings.Contains(err.Error(), "wrong-password") || !strings.Contains(err.Error(), "alice:xxxxx@") {
		t.Fatalf("password in URL: %v", err)
	}
	conn, err := Connect(ctx, Config{URL: url, User: "alice", Password: "right-password", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	var se *setting.Error
	if _, err := Connect(ctx, Config{URL: url, TLSCertFile: "x.pem", Logger: quietLogger()}); !errors.As(err, &se) || se.Field != "TLSCertFile" || !strings.Contains(se.Reason, "TLSKeyFile") {
		t.Fatalf("cert without key: %v, want a *setting.Error of TLSCertFile naming TLSKeyFile", err)
	}
}

func TestConnectWithToken(t *testing.T) {
	url := startNATS(t, &server.Options{Authorization: "s3cret-token"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := Connect(ctx, Config{URL: url, Token: "nope", Logger: quietLogger()}); err == nil || strings.Contains(err.Error(), "nope") {
		t.Fatalf("wrong token: %v", err)
	}
	conn, err := Connect(ctx, Config{URL: url, Token: "s3cret-token", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

func TestConnectWithTLSClientCertificate(t *testing.T) {
	files := testenv.TLS(t)
	url := startNATS(t, &server.Options{TLS: true, TLSVerify: true, TLSConfig: files.ServerTLS(t, true), TLSTimeout: 2})
	url = strings.Replace(url, "nats://", "tls://", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	conn, err := Connect(ctx, Config{URL: url, TLSCAFile: files.CA, TLSCertFile: files.ClientCert, TLSKeyFile: files.ClientKey, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("with CA and client certificate: %v", err)
	}
	if _, err := conn.TLSConnectionState(); err != nil {
		t.Fatalf("not on TLS: %v", err)
	}
	conn.Close()
	if _, err := Connect(ctx, Config{URL: url, TLSCAFile: files.CA, Logger: quietLogger()}); err == nil {
		t.Fatal("connected without the client certificate the server requires")
	}
	if _, err := Connect(ctx, Config{URL: url, TLSCAFile: filepath.Join(t.TempDir(), "missing.pem"), Logger: quietLogger()}); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Fatalf("missing CA file: %v", err)
	}
}

func TestConnectWithNKeySeedFile(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	url := startNATS(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	dir := t.TempDir()
	seedFile := filepath.Join(dir, "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	otherFile := filepath.Join(dir, "other.nk")
	if err := os.WriteFile(otherFile, otherSeed, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := Connect(ctx, Config{URL: url, NKeySeedFile: seedFile, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	_, err = Connect(ctx, Config{URL: url, NKeySeedFile: otherFile, Logger: quietLogger()})
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("unknown nkey: %v", err)
	}
	if strings.Contains(err.Error(), string(otherSeed)) {
		t.Fatal("error leaks the seed")
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                           "nats://127.0.0.1:4222",
		"nats://alice:s3cret@host:4222":                   "nats://alice:xxxxx@host:4222",
		"nats://t0ken@host:4222":                          "nats://xxxxx@host:4222",
		"nats://a:p1@h1:4222, nats://b:p2@h2:4222":        "nats://a:xxxxx@h1:4222,nats://b:xxxxx@h2:4222",
		"tls://u:p%20w@host":                              "tls://u:xxxxx@host",
		"nats://bad url with spaces:pw@host":              "xxxxx@host",
		"host:4222":                                       "host:4222",
		"nats://user:pa@ss@host:4222":                     "nats://user:xxxxx@host:4222",
		"nats://127.0.0.1:4222,nats://u:hunter2@h:4222/x": "nats://127.0.0.1:4222,nats://u:xxxxx@h:4222/x",
	} {
		got := RedactURL(in)
		if got != want {
			t.Errorf("RedactURL(%q) = %q; want %q", in, got, want)
		}
		for _, secret := range []string{"s3cret", "t0ken", "p1", "p2", "hunter2", "pa@ss", "p%20w"} {
			if strings.Contains(in, secret) && strings.Contains(got, secret) {
				t.Errorf("RedactURL(%q) = %q leaks %q", in, got, secret)
			}
		}
	}
}

// FuzzRedactURL: whatever the user name, password and host, the password
// of a NATS URL never survives RedactURL, alone or in a list. A password
// with a comma cannot be written into a URL list unencoded (nats.go splits
// the list at commas too, as RedactURL does); it must be percent-encoded.
func FuzzRedactURL(f *testing.F) {
	for _, s := range [][3]string{
		{"alice", "s3cret", "127.0.0.1:4222"},
		{"", "tok3n", "host"},
		{"u", "p@ss:w/rd", "h:1"},
		{"u", "pa ss", "h"},
		{"u", "p%41ss", "h"},
		{"a@b", "c#d?e", "h"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, user, password, host string) {
		if len(password) < 4 || strings.Contains(password, ",") || strings.Contains(user+host, password) || strings.Contains("nats://,tls://xxxxx", password) {
			t.Skip("a password this short or repeated elsewhere cannot be told apart")
		}
		// The same URL with another password of the same length: when its
		// redaction shows the password too, the characters come from the
		// user or host (escaped, say), not from the password.
		other := []byte(password)
		for i, c := range other {
			other[i] = 'a'
			if c == 'a' {
				other[i] = 'b'
			}
		}
		for _, list := range []string{"", "tls://127.0.0.1:4222, "} {
			raw := list + "nats://" + user + ":" + password + "@" + host
			got := RedactURL(raw)
			if strings.Contains(got, password) && !strings.Contains(RedactURL(list+"nats://"+user+":"+string(other)+"@"+host), password) {
				t.Fatalf("RedactURL(%q) = %q keeps the password", raw, got)
			}
		}
	})
}

// quietLogger discards the connection's logs.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// startNATS starts an embedded server; opts may be nil.
func startNATS(t testing.TB, opts *server.Options) string {
	t.Helper()
	return testenv.NATS(t, opts).ClientURL()
}
