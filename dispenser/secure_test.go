package dispenser

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// TestSecureConnections starts a dispenser from DISPENSER_NATS_*
// variables (LoadConfig, then Start: the real connect path, for the
// service's and the worker claim's connections) against an embedded
// server that requires each way of authenticating, then takes IDs with a
// client that authenticates the same way, and checks that a client
// without the credentials is refused. natsio's auth_test.go covers the
// refusals of a wrong NKey and of a missing client certificate at the
// connection level.
func TestSecureConnections(t *testing.T) {
	tlsFiles := testenv.TLS(t)
	operator := testenv.NewOperator(t)
	nkeyUser, _ := nkeys.CreateUser()
	nkeyPub, _ := nkeyUser.PublicKey()
	nkeySeed, _ := nkeyUser.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, nkeySeed, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		server  func() *server.Options
		scheme  string   // of the URL; nats unless TLS
		env     []string // DISPENSER_NATS_* besides the URL
		client  natsconn.Config
		refused natsconn.Config // a client the server must refuse
	}{
		{
			name:    "user and password",
			server:  func() *server.Options { return &server.Options{Username: "uids", Password: "pw-Ux7"} },
			env:     []string{"DISPENSER_NATS_USER=uids", "DISPENSER_NATS_PASSWORD=pw-Ux7"},
			client:  natsconn.Config{User: "uids", Password: "pw-Ux7"},
			refused: natsconn.Config{User: "uids", Password: "wrong"},
		},
		{
			name:    "token",
			server:  func() *server.Options { return &server.Options{Authorization: "tok-Q2w"} },
			env:     []string{"DISPENSER_NATS_TOKEN=tok-Q2w"},
			client:  natsconn.Config{Token: "tok-Q2w"},
			refused: natsconn.Config{Token: "tok-wrong"},
		},
		{
			name:    "nkey",
			server:  func() *server.Options { return &server.Options{Nkeys: []*server.NkeyUser{{Nkey: nkeyPub}}} },
			env:     []string{"DISPENSER_NATS_NKEY_SEED_FILE=" + seedFile},
			client:  natsconn.Config{NKeySeedFile: seedFile},
			refused: natsconn.Config{},
		},
		{
			name:    "credentials file (operator mode)",
			server:  operator.ServerOptions,
			env:     []string{"DISPENSER_NATS_CREDS_FILE=" + operator.UserCreds(t, "dispenser")},
			client:  natsconn.Config{CredsFile: operator.UserCreds(t, "service")},
			refused: natsconn.Config{CredsFile: testenv.NewOperator(t).UserCreds(t, "stranger")},
		},
		{
			name: "TLS",
			server: func() *server.Options {
				return &server.Options{TLS: true, TLSConfig: tlsFiles.ServerTLS(t, false), TLSTimeout: 2}
			},
			scheme:  "tls",
			env:     []string{"DISPENSER_NATS_TLS_CA=" + tlsFiles.CA},
			client:  natsconn.Config{TLSCAFile: tlsFiles.CA},
			refused: natsconn.Config{}, // the system roots do not know the test CA
		},
		{
			name: "TLS with a client certificate",
			server: func() *server.Options {
				return &server.Options{TLS: true, TLSVerify: true, TLSConfig: tlsFiles.ServerTLS(t, true), TLSTimeout: 2}
			},
			scheme:  "tls",
			env:     []string{"DISPENSER_NATS_TLS_CA=" + tlsFiles.CA, "DISPENSER_NATS_TLS_CERT=" + tlsFiles.ClientCert, "DISPENSER_NATS_TLS_KEY=" + tlsFiles.ClientKey},
			client:  natsconn.Config{TLSCAFile: tlsFiles.CA, TLSCertFile: tlsFiles.ClientCert, TLSKeyFile: tlsFiles.ClientKey},
			refused: natsconn.Config{TLSCAFile: tlsFiles.CA},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := testenv.NATS(t, tc.server()).ClientURL()
			if tc.scheme != "" {
				url = strings.Replace(url, "nats://", tc.scheme+"://", 1)
			}
			clearEnv(t)
			t.Setenv("DISPENSER_NATS_URL", url)
			t.Setenv("DISPENSER_LEASE_TTL", "3s")
			t.Setenv("DISPENSER_SHUTDOWN_TIMEOUT", "5s")
			// The test server is never power-cut (testConfig's reason):
			// with the default window the start would wait 2 minutes.
			t.Setenv("DISPENSER_STORE_LOSS_WINDOW", "0")
			for _, kv := range tc.env {
				name, value, _ := strings.Cut(kv, "=")
				t.Setenv(name, value)
			}
			cfg, err := LoadConfig()
			if err != nil {
				t.Fatal(err)
			}
			d := start(t, cfg)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			clientCfg := tc.client
			clientCfg.URL, clientCfg.Logger = url, testLogger()
			conn, err := natsconn.Connect(ctx, clientCfg)
			if err != nil {
				t.Fatalf("client: %v", err)
			}
			defer conn.Close()
			if strings.HasPrefix(url, "tls://") {
				if _, err := conn.TLSConnectionState(); err != nil {
					t.Fatalf("client not on TLS: %v", err)
				}
			}
			ids := takeIDs(ctx, t, uidclient.New(conn.Conn, uidclient.Config{}), 4, 20, 500)
			if w := workers(t, ids); len(w) != 1 || w[d.WorkerID()] != len(ids) {
				t.Fatalf("IDs by worker %v; the dispenser holds %d", w, d.WorkerID())
			}
			testenv.CheckDistinct(t, ids)

			refused := tc.refused
			refused.URL, refused.Logger = url, testLogger()
			if c, err := natsconn.Connect(ctx, refused); err == nil {
				c.Close()
				t.Fatal("a client without the credentials was let in")
			}
		})
	}
}

// takeIDs runs clients goroutines, each asking for n single IDs and one
// batch, and returns everything they got.
func takeIDs(ctx context.Context, t *testing.T, c *uidclient.Client, clients, n, batch int) []uint64 {
	t.Helper()
	var (
		mu  sync.Mutex
		all []uint64
		wg  sync.WaitGroup
	)
	errs := make(chan error, clients)
	for range clients {
		wg.Go(func() {
			var got []uint64
			for range n {
				id, err := c.Next(ctx)
				if err != nil {
					errs <- err
					return
				}
				got = append(got, id)
			}
			ids, err := c.Batch(ctx, batch)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			all = append(append(all, got...), ids...)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(all) != clients*(n+batch) {
		t.Fatalf("%d IDs, want %d", len(all), clients*(n+batch))
	}
	return all
}
