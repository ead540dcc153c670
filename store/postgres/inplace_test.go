package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/postgres"
)

// TestRenewalInPlace: a renewal updates its grant's row in place (a HOT update, which writes no
// index entry), because no index of grants reads a column that a renewal changes, and the
// table's pages keep room for a row's new version (migration 0019). With one index on the
// expiry, every renewal wrote an entry in each of the eight indexes of an open grant.
func TestRenewalInPlace(t *testing.T) {
	ctx := context.Background()
	clock := lease.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	url := srv.NewDatabase(t)
	s := open(t, url, clock, postgres.Options{})
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })

	rows, err := conn.Query(ctx, `SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'grants'::regclass`)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, def := range defs {
		for _, col := range []string{"expires_at", "renewed_at", "ttl_ms"} {
			if strings.Contains(def, col) {
				t.Errorf("an index of grants reads %s, which a renewal changes: %s", col, def)
			}
		}
	}

	const leases, rounds = 100, 3
	ids := make([]string, leases)
	for i := range ids {
		l, err := s.Acquire(ctx, store.AcquireParams{Name: fmt.Sprintf("job-%03d", i), Holder: "w", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = l.ID
	}
	for r := 0; r < rounds; r++ {
		clock.Advance(time.Second)
		for i, id := range ids {
			if _, err := s.Renew(ctx, fmt.Sprintf("job-%03d", i), id, 0, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The store's connections report their counts when idle, within seconds.
	var updated, hot int64
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if err := conn.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'grants'`).
			Scan(&updated, &hot); err != nil {
			t.Fatal(err)
		}
		if updated >= leases*rounds {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 2 minutes, %d updates of grants reported; want %d", updated, leases*rounds)
		}
	}
	if hot*10 < updated*9 {
		t.Errorf("%d of %d updates of grants were in place (HOT); want nearly all", hot, updated)
	}
}
