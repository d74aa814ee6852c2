package natsio

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
)

// writePEM writes a certificate signed by parent (self-signed when nil)
// and its key; it returns the paths, the certificate and the key.
func writePEM(t *testing.T, dir, name string, tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (certFile, keyFile string, cert *x509.Certificate, key *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert, key
}

func TestConnectWithTLSClientCertificate(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	caFile, _, ca, caKey := writePEM(t, dir, "ca", &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}, nil, nil)
	serverCert, serverKey, _, _ := writePEM(t, dir, "server", &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}, ca, caKey)
	clientCert, clientKey, _, _ := writePEM(t, dir, "client", &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "dispenser"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}, ca, caKey)

	tlsConfig, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: serverCert, KeyFile: serverKey, CaFile: caFile, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	url := startNATS(t, &server.Options{TLS: true, TLSVerify: true, TLSConfig: tlsConfig, TLSTimeout: 2})
	url = strings.Replace(url, "nats://", "tls://", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	conn, err := Connect(ctx, ConnConfig{URL: url, TLSCAFile: caFile, TLSCertFile: clientCert, TLSKeyFile: clientKey, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("with CA and client certificate: %v", err)
	}
	if _, err := conn.TLSConnectionState(); err != nil {
		t.Fatalf("not on TLS: %v", err)
	}
	conn.Close()
	if _, err := Connect(ctx, ConnConfig{URL: url, TLSCAFile: caFile, Logger: quietLogger()}); err == nil {
		t.Fatal("connected without the client certificate the server requires")
	}
	if _, err := Connect(ctx, ConnConfig{URL: url, TLSCAFile: filepath.Join(dir, "missing.pem"), Logger: quietLogger()}); err == nil || !strings.Contains(err.Error(), "missing.pem") {
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
	client := NewClient(nc.Conn, ClientOptions{AttemptTimeout: 500 * time.Millisecond})
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
	if inst.svc.ID() != serviceID || inst.svc.Restarts() != 0 {
		t.Fatalf("service re-added across a reconnect: id %s→%s, restarts %d", serviceID, inst.svc.ID(), inst.svc.Restarts())
	}
}

func startNATSServer(t *testing.T, port int) *server.Server {
	t.Helper()
	return testenv.NATS(t, &server.Options{Port: port})
}
