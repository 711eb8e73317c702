package app

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llm-router/llm-router/internal/config"
)

func writePair(t *testing.T, dir string, mtime time.Time) *x509.Certificate {
	t.Helper()
	c, err := selfSigned(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{certPath, keyPath} {
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

func serial(t *testing.T, c *tls.Certificate) string {
	t.Helper()
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber.String()
}

// Certificate files are served and reloaded when they change, at most one
// check a second; a broken rewrite keeps the certificate already loaded.
func TestCertificateFilesReload(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now().Add(-time.Hour)
	first := writePair(t, dir, t0)
	src, err := newCertSource(config.TLS{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	src.now = func() time.Time { return now }
	get := func() string {
		c, err := src.get(nil)
		if err != nil {
			t.Fatal(err)
		}
		return serial(t, c)
	}
	if got := get(); got != first.SerialNumber.String() {
		t.Fatalf("serving %s, want the file's %s", got, first.SerialNumber)
	}
	second := writePair(t, dir, t0.Add(time.Minute))
	if got := get(); got != first.SerialNumber.String() {
		t.Fatal("files checked more than once a second")
	}
	now = now.Add(certCheckEvery)
	if got := get(); got != second.SerialNumber.String() {
		t.Fatalf("serving %s after the files changed, want %s", got, second.SerialNumber)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(certCheckEvery)
	if got := get(); got != second.SerialNumber.String() {
		t.Fatal("a broken certificate file replaced the loaded one")
	}
}

// Without files, a self-signed certificate for the loopback addresses.
func TestSelfSignedCertificate(t *testing.T) {
	src, err := newCertSource(config.TLS{}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	c, err := src.get(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}); err != nil {
		t.Fatalf("self-signed certificate does not cover 127.0.0.1: %v", err)
	}
}
