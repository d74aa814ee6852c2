package natsconn

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
	"github.com/uid-dispenser/uid-dispenser/internal/setting"
)

// maxConnFile bounds what CheckFiles reads: credentials, keys and CA
// bundles are a few KiB.
const maxConnFile = 1 << 20

// CheckFiles reads every file cfg names and checks it holds what it
// should: a user NKey seed, a credentials file (user JWT and seed), PEM
// CA certificates, a certificate with its matching key. Connect would
// find the same problems only when it connects, with messages that do not
// say which setting is wrong; start-up calls this first. The first problem
// comes back as a *setting.Error naming the field ("NKeySeedFile",
// "CredsFile", "TLSCAFile", "TLSCertFile" or "TLSKeyFile"), with the path
// as its reason; it never quotes the file's content.
func (cfg Config) CheckFiles() error {
	if cfg.NKeySeedFile != "" {
		if err := checkFile(cfg.NKeySeedFile, "NKeySeedFile", checkSeed); err != nil {
			return err
		}
	}
	if cfg.CredsFile != "" {
		if err := checkFile(expandHome(cfg.CredsFile), "CredsFile", checkCreds); err != nil {
			return err
		}
	}
	if cfg.TLSCAFile != "" {
		if err := checkFile(cfg.TLSCAFile, "TLSCAFile", checkCA); err != nil {
			return err
		}
	}
	if cfg.TLSCertFile == "" || cfg.TLSKeyFile == "" {
		return nil // Connect refuses one without the other
	}
	var certPEM []byte
	if err := checkFile(cfg.TLSCertFile, "TLSCertFile", func(b []byte) error {
		certPEM = bytes.Clone(b) // b is wiped when the check returns
		return checkCert(b)
	}); err != nil {
		return err
	}
	return checkFile(cfg.TLSKeyFile, "TLSKeyFile", func(keyPEM []byte) error {
		if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
			return fmt.Errorf("not the PEM private key of the client certificate: %w", err)
		}
		return nil
	})
}

// checkFile reads path, a regular file of at most maxConnFile bytes, and
// runs check on its content, which it then wipes.
func checkFile(path, field string, check func([]byte) error) error {
	fail := func(err error) error { return &setting.Error{Field: field, Reason: path, Err: err} }
	info, err := os.Stat(path)
	if err != nil {
		return fail(errors.Unwrap(err)) // the *PathError would repeat the path
	}
	if !info.Mode().IsRegular() {
		return fail(errors.New("not a regular file"))
	}
	f, err := os.Open(path)
	if err != nil {
		return fail(errors.Unwrap(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConnFile+1))
	if err != nil {
		return fail(err)
	}
	defer clear(b)
	if len(b) > maxConnFile {
		return fail(fmt.Errorf("larger than %d bytes", maxConnFile))
	}
	if err := check(b); err != nil {
		return fail(err)
	}
	return nil
}

func checkSeed(b []byte) error {
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		return fmt.Errorf("no NKey seed: %w", err)
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return errors.New("not the seed of an NKey user (SU...)")
	}
	return nil
}

func checkCreds(b []byte) error {
	token, err := nkeys.ParseDecoratedJWT(b)
	if err == nil {
		_, err = jwt.DecodeUserClaims(token)
	}
	if err != nil {
		return fmt.Errorf("no user JWT: %w", err)
	}
	return checkSeed(b)
}

func checkCA(b []byte) error {
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return errors.New("no PEM certificate")
	}
	return nil
}

func checkCert(b []byte) error {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return errors.New("no PEM certificate")
		}
		if block.Type == "CERTIFICATE" {
			if _, err := x509.ParseCertificate(block.Bytes); err != nil {
				return fmt.Errorf("certificate does not parse: %w", err)
			}
			return nil
		}
	}
}

// expandHome resolves what nats.UserCredentials resolves in its path:
// environment variables and a leading ~.
func expandHome(p string) string {
	p = os.ExpandEnv(p)
	if !strings.HasPrefix(p, "~") {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return p
	}
	return filepath.Join(home, p[1:])
}
