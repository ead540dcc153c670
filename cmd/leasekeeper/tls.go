package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"
)

// certReloader serves the certificate of a certificate file and a key file, and reads them
// again when either changes (another file renamed into place, or a new modification time or
// size; looked at most once a second), so that a renewed certificate is served without a
// restart. A pair that does not load (say, the
// certificate is replaced but not yet its key) leaves the previous certificate in service.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	loaded  pairStamp // of the files cert was read from
	failed  pairStamp // of the files that last failed to load, so that is said once
	checked time.Time
}

// pairStamp tells whether a certificate file or its key file changed.
type pairStamp struct{ cert, key os.FileInfo }

func stampOf(certFile, keyFile string) (pairStamp, error) {
	c, err := os.Stat(certFile)
	if err != nil {
		return pairStamp{}, err
	}
	k, err := os.Stat(keyFile)
	if err != nil {
		return pairStamp{}, err
	}
	return pairStamp{cert: c, key: k}, nil
}

// same reports whether both files are as they were: the same files (a renewal renamed into
// place is another one, even with the same size in the same clock tick), unmodified.
func (p pairStamp) same(q pairStamp) bool {
	unchanged := func(a, b os.FileInfo) bool {
		return a != nil && b != nil && os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
	}
	return unchanged(p.cert, q.cert) && unchanged(p.key, q.key)
}

// newCertReloader loads the pair once: a server does not start with a certificate it cannot
// serve.
func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log, checked: time.Now()}
	st, err := stampOf(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s with key %s: %w", certFile, keyFile, err)
	}
	r.cert, r.loaded = &cert, st
	return r, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= time.Second {
		r.checked = now
		r.reload()
	}
	return r.cert, nil
}

// reload reads the pair again if it changed. r.mu must be held.
func (r *certReloader) reload() {
	st, err := stampOf(r.certFile, r.keyFile)
	if err != nil || st.same(r.loaded) || st.same(r.failed) {
		return
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		r.failed = st
		r.log.Warn("TLS certificate changed but does not load; still serving the previous one", "cert", r.certFile, "key", r.keyFile, "err", err)
		return
	}
	r.cert, r.loaded = &cert, st
	r.log.Info("TLS certificate reloaded", "cert", r.certFile, "not_after", cert.Leaf.NotAfter)
}

// serverTLS is the TLS configuration of serve: the certificate from r, TLS 1.2 at least, and
// on TLS 1.2 only forward-secret AEAD suites (no CBC, no SHA-1 MAC; TLS 1.3's are all AEAD).
// http.Server.ServeTLS adds HTTP/2 to it.
func serverTLS(r *certReloader) *tls.Config {
	return &tls.Config{GetCertificate: r.GetCertificate, MinVersion: tls.VersionTLS12, CipherSuites: aeadSuites}
}

// aeadSuites are the TLS 1.2 cipher suites serve offers.
var aeadSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// caClient returns an HTTP client that trusts the certificates in the PEM file caFile (and no
// others), for a server whose certificate is not signed by a public authority.
func caClient(caFile string) (*http.Client, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-file %s: %w", caFile, errors.New("no PEM certificate in it"))
	}
	t := http.DefaultTransport.(*http.Transport).Clone() // proxies, timeouts and HTTP/2 as usual
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: t}, nil
}
