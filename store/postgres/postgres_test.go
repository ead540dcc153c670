package postgres_test

import (
	"context"
	"testing"

	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/postgres"
	"github.com/leasekeeper/leasekeeper/store/storetest"
)

var srv = new(pgtest.Server)

func TestMain(m *testing.M) { pgtest.Main(m, srv) }

// open opens a store on url, closed when t ends; clock nil decides by the database's clock.
func open(t *testing.T, url string, clock lease.Clock, opts postgres.Options) *postgres.Store {
	t.Helper()
	opts.TestClock = clock
	s, err := postgres.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newDB(t *testing.T) storetest.Opener {
	url := srv.NewDatabase(t)
	return func(clock lease.Clock) store.Store { return open(t, url, clock, postgres.Options{}) }
}

func TestConformance(t *testing.T) { storetest.Run(t, newDB, storetest.DatabaseClock()) }
