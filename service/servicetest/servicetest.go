// Package servicetest starts a whole leasekeeper for tests: service.New over SQLite in a
// temporary folder, its background loops running, served by httptest until the test ends.
package servicetest

import (
	"context"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"path/filepath"
	"sync"
	"testing"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// Start runs a server assembled as `leasekeeper serve` assembles it and returns it with its
// store. opts may set a Clock; its OnCommit is taken by the service. Unless cfg turns
// authentication off, the server gets an admin key that srv.Client(), Client() and KeyOf send.
func Start(t testing.TB, cfg service.Config, opts sqlite.Options) (*httptest.Server, *sqlite.Store) {
	t.Helper()
	srv, st, _ := StartService(t, cfg, opts)
	return srv, st
}

// StartService is Start that also returns the service, for tests that look at its parts (the
// waiting line).
func StartService(t testing.TB, cfg service.Config, opts sqlite.Options) (*httptest.Server, *sqlite.Store, *service.Service) {
	t.Helper()
	var hooks service.Hooks
	opts.OnCommit, opts.OnBatch = hooks.Publish, hooks.Batch
	if cfg.Tracer != nil {
		opts.OnBatchTrace = hooks.Trace
	}
	path := filepath.Join(t.TempDir(), "leasekeeper.db")
	st, err := sqlite.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("sqlite.Open(%s) = %v", path, err)
	}
	t.Cleanup(func() { st.Close() })
	srv, svc := serve(t, st, &hooks, cfg)
	return srv, st, svc
}

// Serve runs a server assembled as `leasekeeper serve` assembles it over st, an open store
// whose commit hook is hooks.Publish, until the test ends. Unless cfg turns authentication off,
// the server gets an admin key of its own that srv.Client(), Client() and KeyOf send.
func Serve(t testing.TB, st service.Store, hooks *service.Hooks, cfg service.Config) *httptest.Server {
	t.Helper()
	srv, _ := serve(t, st, hooks, cfg)
	return srv
}

func serve(t testing.TB, st service.Store, hooks *service.Hooks, cfg service.Config) (*httptest.Server, *service.Service) {
	t.Helper()
	svc, err := service.New(st, hooks, cfg)
	if err != nil {
		t.Fatalf("service.New() = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	srv := httptest.NewServer(svc.Handler)
	if !cfg.Auth.Off {
		key := AdminKey(t, st)
		hosts.Store(srv.Listener.Addr().String(), key)
		t.Cleanup(func() { hosts.Delete(srv.Listener.Addr().String()) })
		c := srv.Client()
		c.Transport = BearerTransport{Key: key, Next: c.Transport}
	}
	// Cleanups run last-in first-out: the server closes, then the loops stop, then the store.
	t.Cleanup(func() { cancel(); <-done })
	t.Cleanup(srv.Close)
	return srv, svc
}

// AdminKey creates an admin API key in st for the test and returns the key.
func AdminKey(t testing.TB, st store.Store) string { return Key(t, st, auth.Admin) }

// Key creates an API key of role, limited to prefixes, and returns the key.
func Key(t testing.TB, st store.Store, role auth.Role, prefixes ...string) string {
	t.Helper()
	secret := auth.NewSecret()
	k := auth.Key{ID: auth.NewKeyID(), Label: "test " + string(role), Role: role, Prefixes: prefixes}
	if _, err := st.CreateKey(context.Background(), k, auth.Hash(secret), false); err != nil {
		t.Fatalf("CreateKey(%s) = %v", role, err)
	}
	return secret
}

// Bearer returns an HTTP client that sends key as "Authorization: Bearer <key>" with every
// request that has no Authorization header of its own.
func Bearer(key string) *http.Client {
	return &http.Client{Transport: BearerTransport{Key: key}}
}

// BearerTransport adds the bearer key to requests without an Authorization header.
type BearerTransport struct {
	Key  string
	Next http.RoundTripper // nil: http.DefaultTransport
}

// RoundTrip implements http.RoundTripper.
func (b BearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	next := b.Next
	if next == nil {
		next = http.DefaultTransport
	}
	if r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.Key)
	}
	return next.RoundTrip(r)
}

// hosts maps the address of each server Start runs to its admin key, so that test code
// holding only a URL can reach it with Client.
var hosts sync.Map

// KeyOf returns the admin key of a server that Start runs at url ("" for none).
func KeyOf(url string) string {
	u, err := neturl.Parse(url)
	if err != nil {
		return ""
	}
	k, _ := hosts.Load(u.Host)
	s, _ := k.(string)
	return s
}

// Client returns an HTTP client that sends each server Start runs its admin key.
func Client() *http.Client { return &http.Client{Transport: byHost{}} }

type byHost struct{}

func (byHost) RoundTrip(r *http.Request) (*http.Response, error) {
	if k, ok := hosts.Load(r.URL.Host); ok && r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+k.(string))
	}
	return http.DefaultTransport.RoundTrip(r)
}
