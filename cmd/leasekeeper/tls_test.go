package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned makes a certificate for 127.0.0.1 that is its own authority, writes it and its
// key to certFile and keyFile, and returns the certificate's PEM.
func selfSigned(t *testing.T, certFile, keyFile string, serial int64) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: "leasekeeper test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	// Written beside and renamed into place, as certificate tools do.
	for file, data := range map[string][]byte{certFile: certPEM, keyFile: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})} {
		if err := os.WriteFile(file+".new", data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(file+".new", file); err != nil {
			t.Fatal(err)
		}
	}
	return certPEM
}

// trusting returns an HTTP client that trusts only the given certificates, and opens a new
// connection for every request.
func trusting(t *testing.T, certs ...[]byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	for _, c := range certs {
		if !pool.AppendCertsFromPEM(c) {
			t.Fatal("bad PEM")
		}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true, DisableKeepAlives: true}}
}

// TestServeTLS serves HTTPS with a certificate made here, checks that HTTP/2 is negotiated,
// replaces the certificate files and checks that the new certificate is served without a
// restart, and that the command line client reaches the server with --ca-file.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := selfSigned(t, certFile, keyFile, 1)
	s := serveInProcess(t, map[string]string{"LEASEKEEPER_TLS_KEY": keyFile},
		"--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "lk.db"), "--tls-cert", certFile)
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("serve printed %s, want an https:// address", s.url)
	}
	serial := func(hc *http.Client) int64 {
		t.Helper()
		resp, err := hc.Get(s.url + "/healthz")
		if err != nil {
			t.Fatalf("GET /healthz: %v", err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 || resp.TLS.NegotiatedProtocol != "h2" {
			t.Errorf("GET /healthz = %d over %s (ALPN %q), want 200 over HTTP/2", resp.StatusCode, resp.Proto, resp.TLS.NegotiatedProtocol)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	if got := serial(trusting(t, first)); got != 1 {
		t.Errorf("serial of the served certificate = %d, want 1", got)
	}
	// HSTS over TLS; on TLS 1.2 only AEAD suites: a client offering CBC suites alone is refused.
	tls12 := func(suites ...uint16) *http.Client {
		hc := trusting(t, first)
		tr := hc.Transport.(*http.Transport)
		tr.TLSClientConfig.MaxVersion, tr.TLSClientConfig.CipherSuites = tls.VersionTLS12, suites
		return hc
	}
	if resp, err := tls12().Get(s.url + "/healthz"); err != nil {
		t.Errorf("GET /healthz over TLS 1.2 = %v", err)
	} else {
		resp.Body.Close()
		if hsts := resp.Header.Get("Strict-Transport-Security"); !strings.HasPrefix(hsts, "max-age=") {
			t.Errorf("GET /healthz over TLS: Strict-Transport-Security %q, want max-age=…", hsts)
		}
	}
	cbc := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, tls.TLS_RSA_WITH_AES_128_CBC_SHA}
	if resp, err := tls12(cbc...).Get(s.url + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("a TLS 1.2 client offering only CBC suites got %s; want the handshake refused", tls.CipherSuiteName(resp.TLS.CipherSuite))
	}
	if _, err := trusting(t).Get(s.url + "/healthz"); err == nil {
		t.Errorf("GET /healthz trusting no certificate succeeded, want a verification error")
	}

	second := selfSigned(t, certFile, keyFile, 2)
	both := trusting(t, first, second)
	deadline := time.Now().Add(5 * time.Second) // files are looked at once a second
	for serial(both) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the replaced certificate was not served within 5 s")
		}
		time.Sleep(100 * time.Millisecond)
	}

	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, second, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := cli(t, s.url, "acquire", "--ca-file", caFile, "--ttl", "1m", "job"); code != 0 {
		t.Errorf("acquire --ca-file over HTTPS: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := cli(t, s.url, "get", "job"); code == 0 || !strings.Contains(errOut, "certificate") {
		t.Errorf("get without --ca-file over HTTPS: exit %d, %q; want a certificate error", code, errOut)
	}
}

func TestParseServeTLS(t *testing.T) {
	for _, tt := range []struct {
		name      string
		env       map[string]string
		args      []string
		cert, key string
		wantUsage bool
	}{
		{"OK/Neither", nil, nil, "", "", false},
		{"OK/Flags", nil, []string{"--tls-cert", "c.pem", "--tls-key", "k.pem"}, "c.pem", "k.pem", false},
		{"OK/Env", map[string]string{"LEASEKEEPER_TLS_CERT": "c.pem", "LEASEKEEPER_TLS_KEY": "k.pem"}, nil, "c.pem", "k.pem", false},
		{"OK/FlagWins", map[string]string{"LEASEKEEPER_TLS_CERT": "c.pem", "LEASEKEEPER_TLS_KEY": "k.pem"}, []string{"--tls-cert", "d.pem"}, "d.pem", "k.pem", false},
		{"ErrUsage/KeyWithoutCert", nil, []string{"--tls-key", "k.pem"}, "", "", true},
		{"ErrUsage/CertWithoutKey", map[string]string{"LEASEKEEPER_TLS_CERT": "c.pem"}, nil, "", "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseServe(tt.args, func(k string) string { return tt.env[k] }, io.Discard, io.Discard)
			if tt.wantUsage {
				if exitCode(err) != 2 || err == nil {
					t.Errorf("parseServe(%q) with env %v = %v, want a usage error (exit 2)", tt.args, tt.env, err)
				}
				return
			}
			if err != nil || c.tlsCert != tt.cert || c.tlsKey != tt.key {
				t.Errorf("parseServe(%q) with env %v = cert %q key %q, %v; want %q %q", tt.args, tt.env, c.tlsCert, c.tlsKey, err, tt.cert, tt.key)
			}
		})
	}
}

// TestServeTLSBadPair: a key that is not the certificate's stops serve at start-up.
func TestServeTLSBadPair(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	selfSigned(t, certFile, keyFile, 1)
	selfSigned(t, filepath.Join(dir, "other.pem"), keyFile, 2) // keyFile now belongs to other.pem
	err := run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "lk.db"),
		"--tls-cert", certFile, "--tls-key", keyFile}, func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "TLS certificate") {
		t.Errorf("serve with a key that is not the certificate's = %v, want an error about the certificate", err)
	}
}

// TestCertReloaderKeepsServing: a certificate replaced before its key (or not at all) leaves
// the previous certificate in service; once the pair matches again, it is served.
func TestCertReloaderKeepsServing(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	selfSigned(t, certFile, keyFile, 1)
	r, err := newCertReloader(certFile, keyFile, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	served := func() int64 {
		t.Helper()
		r.mu.Lock()
		r.checked = time.Time{} // as if a second had passed
		r.mu.Unlock()
		c, err := r.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.SerialNumber.Int64()
	}
	newCert, newKey := filepath.Join(dir, "new-cert.pem"), filepath.Join(dir, "new-key.pem")
	selfSigned(t, newCert, newKey, 2)
	if err := os.Rename(newCert, certFile); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != 1 {
		t.Errorf("serial with the new certificate and the old key = %d, want the old certificate (1)", got)
	}
	if err := os.Rename(newKey, keyFile); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != 2 {
		t.Errorf("serial with the new pair = %d, want 2", got)
	}
}

// TestServerTLSSuites checks serve's TLS 1.2 suites: a list of its own (Go's defaults may
// change with the toolchain), each forward-secret and AEAD.
func TestServerTLSSuites(t *testing.T) {
	c := serverTLS(nil)
	if c.MinVersion != tls.VersionTLS12 || len(c.CipherSuites) == 0 {
		t.Fatalf("serverTLS: MinVersion %x, %d suites; want TLS 1.2 and a list", c.MinVersion, len(c.CipherSuites))
	}
	for _, id := range c.CipherSuites {
		name := tls.CipherSuiteName(id)
		if !strings.HasPrefix(name, "TLS_ECDHE_") || !(strings.Contains(name, "_GCM_") || strings.Contains(name, "CHACHA20_POLY1305")) {
			t.Errorf("serverTLS offers %s, want only ECDHE with AES-GCM or ChaCha20-Poly1305", name)
		}
	}
}
