package natsio

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

func TestConnectWithTLSClientCertificate(t *testing.T) {
	files := testenv.TLS(t)
	url := startNATS(t, &server.Options{TLS: true, TLSVerify: true, TLSConfig: files.ServerTLS(t, true), TLSTimeout: 2})
	url = strings.Replace(url, "nats://", "tls://", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	conn, err := Connect(ctx, ConnConfig{URL: url, TLSCAFile: files.CA, TLSCertFile: files.ClientCert, TLSKeyFile: files.ClientKey, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("with CA and client certificate: %v", err)
	}
	if _, err := conn.TLSConnectionState(); err != nil {
		t.Fatalf("not on TLS: %v", err)
	}
	conn.Close()
	if _, err := Connect(ctx, ConnConfig{URL: url, TLSCAFile: files.CA, Logger: quietLogger()}); err == nil {
		t.Fatal("connected without the client certificate the server requires")
	}
	if _, err := Connect(ctx, ConnConfig{URL: url, TLSCAFile: filepath.Join(t.TempDir(), "missing.pem"), Logger: quietLogger()}); err == nil || !strings.Contains(err.Error(), "missing.pem") {
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
	conn, err := Connect(ctx, ConnConfig{URL: url, NKeySeedFile: seedFile, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	_, err = Connect(ctx, ConnConfig{URL: url, NKeySeedFile: otherFile, Logger: quietLogger()})
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("unknown nkey: %v", err)
	}
	if strings.Contains(err.Error(), string(otherSeed)) {
		t.Fatal("error leaks the seed")
	}
}

func TestReconnectKeepsWorkerAndResumes(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	srv := startNATSServer(t, port)
	url := srv.ClientURL()
	inst := startInstance(t, url, 8, instanceOpts{})
	nc := connect(t, url)
	client := uidclient.New(nc.Conn, uidclient.Config{AttemptTimeout: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	before, err := client.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	serviceID := inst.svc.ID()

	srv.Shutdown()
	srv.WaitForShutdown()
	startNATSServer(t, port) // the same address, a fresh server

	after, err := client.Next(ctx) // retries while both sides reconnect
	if err != nil {
		t.Fatal(err)
	}
	shares := workerShares([]uint64{before, after})
	if shares[8] != 2 || after <= before {
		t.Fatalf("before %d, after %d: want both from worker 8, increasing", before, after)
	}
	if inst.svc.ID() != serviceID {
		t.Fatalf("service re-added across a reconnect: id %s→%s", serviceID, inst.svc.ID())
	}
}

func startNATSServer(t *testing.T, port int) *server.Server {
	t.Helper()
	return testenv.NATS(t, &server.Options{Port: port})
}
