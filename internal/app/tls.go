package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llm-router/llm-router/internal/config"
)

// certCheckEvery bounds how often the certificate files are stat'ed: a
// handshake costs at most one stat pair a second.
const certCheckEvery = time.Second

// certSource serves the TLS listeners' certificate: from files, reloaded
// when they change (cert-manager rotates them in place), or self-signed at
// start when no files are configured, as the reference endpoint picker
// does. A failed reload keeps the certificate already loaded.
type certSource struct {
	certFile, keyFile string
	log               *zap.Logger
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string // the files' sizes and times when cert was loaded
	checked time.Time
}

func newCertSource(cfg config.TLS, log *zap.Logger) (*certSource, error) {
	c := &certSource{certFile: cfg.CertFile, keyFile: cfg.KeyFile, log: log, now: time.Now}
	if c.certFile == "" {
		cert, err := selfSigned(c.now())
		if err != nil {
			return nil, fmt.Errorf("self-signed certificate: %w", err)
		}
		c.cert = cert
		log.Info("tls: serving a self-signed certificate (set tls.cert_file and tls.key_file to serve your own)")
		return c, nil
	}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// tlsConfig is the server config the listeners use.
func (c *certSource) tlsConfig(alpn ...string) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get, NextProtos: alpn}
}

func (c *certSource) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.certFile != "" && c.now().Sub(c.checked) >= certCheckEvery {
		c.checked = c.now()
		if stamp, err := fileStamp(c.certFile, c.keyFile); err == nil && stamp != c.stamp {
			if err := c.reloadLocked(); err != nil {
				c.log.Warn("tls: reload certificate; keeping the one loaded", zap.Error(err))
			}
		}
	}
	return c.cert, nil
}

func (c *certSource) reload() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reloadLocked()
}

func (c *certSource) reloadLocked() error {
	stamp, err := fileStamp(c.certFile, c.keyFile)
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("tls.cert_file/tls.key_file: %w", err)
	}
	c.cert, c.stamp, c.checked = &cert, stamp, c.now()
	c.log.Info("tls: certificate loaded", zap.String("cert_file", c.certFile))
	return nil
}

func fileStamp(paths ...string) (string, error) {
	var s string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		s += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return s, nil
}

// selfSigned makes a one-year P-256 certificate for this host's names.
func selfSigned(now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	names := []string{"localhost"}
	if h, err := os.Hostname(); err == nil && h != "" {
		names = append(names, h)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"llm-router"}, CommonName: "llm-router"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
