package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// TLSFiles are PEM files made for one test: a CA, a server certificate
// for 127.0.0.1 and localhost, and a client certificate, all signed by the
// CA and valid for an hour.
type TLSFiles struct {
	CA                    string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// TLS writes a fresh CA, server and client certificate into a temporary
// directory.
func TLS(t testing.TB) TLSFiles {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "uid-dispenser test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	var f TLSFiles
	var caKey *ecdsa.PrivateKey
	f.CA, _, ca, caKey = writeCert(t, dir, "ca", ca, nil, nil)
	f.ServerCert, f.ServerKey, _, _ = writeCert(t, dir, "server", &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}, ca, caKey)
	f.ClientCert, f.ClientKey, _, _ = writeCert(t, dir, "client", &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "dispenser"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}, ca, caKey)
	return f
}

// ServerTLS is the nats-server TLS configuration for these files; with
// verifyClients the server requires a client certificate signed by the CA.
func (f TLSFiles) ServerTLS(t testing.TB, verifyClients bool) *tls.Config {
	t.Helper()
	opts := &server.TLSConfigOpts{CertFile: f.ServerCert, KeyFile: f.ServerKey, Verify: verifyClients}
	if verifyClients {
		opts.CaFile = f.CA
	}
	cfg, err := server.GenTLSConfig(opts)
	if err != nil {
		t.Fatalf("testenv: server TLS config: %v", err)
	}
	return cfg
}

// writeCert signs tmpl by parent (self-signed when parent is nil) and
// writes the certificate and its new key.
func writeCert(t testing.TB, dir, name string, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (certFile, keyFile string, cert *x509.Certificate, key *ecdsa.PrivateKey) {
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
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return certFile, keyFile, cert, key
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Operator is a NATS operator with one JetStream-enabled account and a
// system account, for a server in operator mode (decentralised JWT
// authentication) with a memory account resolver.
type Operator struct {
	operator   *jwt.OperatorClaims
	system     string
	account    nkeys.KeyPair
	accountJWT string
	systemJWT  string
	dir        string
}

// NewOperator makes the operator and its accounts.
func NewOperator(t testing.TB) *Operator {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("testenv: operator: %v", err)
		}
	}
	okp, err := nkeys.CreateOperator()
	must(err)
	opub, err := okp.PublicKey()
	must(err)
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "uid-dispenser test operator"
	ojwt, err := oc.Encode(okp)
	must(err)
	o := &Operator{dir: t.TempDir()}
	o.operator, err = jwt.DecodeOperatorClaims(ojwt)
	must(err)

	skp, err := nkeys.CreateAccount()
	must(err)
	o.system, err = skp.PublicKey()
	must(err)
	sc := jwt.NewAccountClaims(o.system)
	sc.Name = "SYS"
	o.systemJWT, err = sc.Encode(okp)
	must(err)

	o.account, err = nkeys.CreateAccount()
	must(err)
	apub, err := o.account.PublicKey()
	must(err)
	ac := jwt.NewAccountClaims(apub)
	ac.Name = "UIDS"
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	o.accountJWT, err = ac.Encode(okp)
	must(err)
	return o
}

// ServerOptions configures a server to trust the operator and know its
// accounts.
func (o *Operator) ServerOptions() *server.Options {
	resolver := &server.MemAccResolver{}
	apub, _ := o.account.PublicKey()
	_ = resolver.Store(apub, o.accountJWT)
	_ = resolver.Store(o.system, o.systemJWT)
	return &server.Options{
		TrustedOperators: []*jwt.OperatorClaims{o.operator},
		AccountResolver:  resolver,
		SystemAccount:    o.system,
	}
}

// UserCreds issues a user of the JetStream account and writes its
// credentials file (JWT and seed).
func (o *Operator) UserCreds(t testing.TB, name string) string {
	t.Helper()
	ukp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	upub, _ := ukp.PublicKey()
	useed, _ := ukp.Seed()
	uc := jwt.NewUserClaims(upub)
	uc.Name = name
	ujwt, err := uc.Encode(o.account)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(ujwt, useed)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(o.dir, name+".creds")
	writeFile(t, path, creds)
	return path
}
