// Package servicetest starts a whole leasekeeper for tests: service.New over SQLite in a
// temporary folder, its background loops running, served by httptest until the test ends.
package servicetest

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// Start runs a server assembled as `leasekeeper serve` assembles it and returns it with its
// store. opts may set a Clock; its OnCommit is taken by the service.
func Start(t testing.TB, cfg service.Config, opts sqlite.Options) (*httptest.Server, *sqlite.Store) {
	t.Helper()
	var hooks service.Hooks
	opts.OnCommit = hooks.Publish
	path := filepath.Join(t.TempDir(), "leasekeeper.db")
	st, err := sqlite.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("sqlite.Open(%s) = %v", path, err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := service.New(st, &hooks, cfg)
	if err != nil {
		t.Fatalf("service.New() = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	srv := httptest.NewServer(svc.Handler)
	// Cleanups run last-in first-out: the server closes, then the loops stop, then the store.
	t.Cleanup(func() { cancel(); <-done })
	t.Cleanup(srv.Close)
	return srv, st
}
