package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

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

// TestOnBatch: every write is reported for the commit metrics, one operation each.
func TestOnBatch(t *testing.T) {
	type batch struct {
		ops       int
		committed bool
	}
	var got []batch
	s := open(t, srv.NewDatabase(t), nil, postgres.Options{OnBatch: func(ops int, took time.Duration, committed bool) {
		if took <= 0 {
			t.Errorf("OnBatch took %v, want > 0", took)
		}
		got = append(got, batch{ops, committed})
	}})
	got = nil // the start-up sweep
	ctx := context.Background()
	if _, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w1", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w2", TTL: time.Minute}) // lease_held: decided, committed
	if want := []batch{{1, true}, {1, true}}; !slices.Equal(got, want) {
		t.Errorf("OnBatch calls = %v, want %v", got, want)
	}
}

// pgBin returns the folder of pg_dump and pg_restore, skipping t (failing it when the tests are
// required) without them.
func pgBin(t *testing.T) string {
	t.Helper()
	bin, err := pgtest.Bin()
	if err != nil {
		if pgtest.Required() {
			t.Fatalf("pg_dump not found: %v", err)
		}
		t.Skipf("SKIPPED: pg_dump not found: %v", err)
	}
	return bin
}

// postgresOptions are a replica's options, its line hook sending to lines (nil: none).
func postgresOptions(lines chan<- string) postgres.Options {
	var o postgres.Options
	if lines != nil {
		o.OnLine = func(name string) {
			select {
			case lines <- name:
			default:
			}
		}
	}
	return o
}

// TestPoolSize: the pool has DefaultMaxConns connections unless Options.MaxConns says
// otherwise, and the URL's pool_max_conns wins over both.
func TestPoolSize(t *testing.T) {
	url := srv.NewDatabase(t)
	for _, tt := range []struct {
		name     string
		url      string
		maxConns int
		want     int
	}{
		{"Default", url, 0, postgres.DefaultMaxConns},
		{"Option", url, 40, 40},
		{"URLWins", url + "&pool_max_conns=3", 40, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := open(t, tt.url, nil, postgres.Options{MaxConns: tt.maxConns}).MaxConns(); got != tt.want {
				t.Errorf("Open(MaxConns: %d).MaxConns() = %d, want %d", tt.maxConns, got, tt.want)
			}
		})
	}
}
