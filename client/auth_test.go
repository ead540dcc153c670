package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/fence"
)

// TestAPIKeyOnEveryRequest checks the key and the User-Agent go with every kind of request,
// to a server that requires a key: lease operations, reads, the watch stream a lease
// follows, and the reports of the client's Reporter.
func TestAPIKeyOnEveryRequest(t *testing.T) {
	p := newProxy(t, newServer(t))
	var mu sync.Mutex
	seen := map[string][2]string{} // path -> Authorization, User-Agent
	p.before = func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := seen[r.URL.Path]; ok && prev != [2]string{r.Header.Get("Authorization"), r.UserAgent()} {
			seen[r.URL.Path] = [2]string{"differs between requests", ""}
			return
		}
		seen[r.URL.Path] = [2]string{r.Header.Get("Authorization"), r.UserAgent()}
	}
	c := newClient(t, p.URL, client.WithUserAgent("billing/1.0")) // with the server's key
	ctx := context.Background()
	l, err := c.Acquire(ctx, "job", client.AcquireOptions{TTL: time.Minute})
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	eventually(t, 5*time.Second, "the lease to follow its name", func() bool { return len(p.requests("/v1/leases/job")) > 0 })
	if err := c.Reporter().Report(ctx, fence.Rejection{Resource: "ledger", PresentedToken: 1, CurrentFence: 2}); err != nil {
		t.Fatalf("Report = %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release = %v", err)
	}
	want := [2]string{"Bearer " + keyOf(p.URL), "billing/1.0"}
	mu.Lock()
	defer mu.Unlock()
	for _, path := range []string{"/v1/leases/job/acquire", "/v1/watch", "/v1/leases/job", "/v1/rejections", "/v1/leases/job/release"} {
		if diff := cmp.Diff(want, seen[path]); diff != "" {
			t.Errorf("%s: Authorization and User-Agent (-want +got):\n%s", path, diff)
		}
	}
}

func TestAPIKeyRejected(t *testing.T) {
	for _, key := range []string{"", "two words", "line\nbreak"} {
		if _, err := client.New("http://127.0.0.1:1", client.WithAPIKey(key)); err == nil {
			t.Errorf("New(WithAPIKey(%q)) = nil error, want one", key)
		}
	}
}

// TestTLS talks to a server with a self-signed certificate, trusted through WithCAFile or
// WithTLSConfig, and refused without either.
func TestTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"type":"about:blank","title":"Not found","status":404,"code":"not_found"}`))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	tests := []struct {
		name string
		opts []client.Option
		want error
	}{
		{"OKCAFile", []client.Option{client.WithCAFile(caFile)}, client.ErrNotFound},
		{"OKTLSConfig", []client.Option{client.WithTLSConfig(&tls.Config{RootCAs: pool})}, client.ErrNotFound},
		{"ErrUntrusted", nil, client.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, srv.URL, tt.opts...)
			if _, err := c.Get(context.Background(), "job"); !errors.Is(err, tt.want) {
				t.Errorf("Get = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := client.New(srv.URL, client.WithCAFile(filepath.Join(t.TempDir(), "missing.pem"))); err == nil {
		t.Error("New(WithCAFile(missing)) = nil error, want one")
	}
}
