package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/postgres"
)

// TestOpenGrantsCounted: the count of open grants that the grants' trigger keeps (the folded
// count plus the changes since), its table of their names and holders (open_text) and its
// table of their expiries and late marks (open_due) are what counting and listing the open
// grants give after each way a grant opens, is renewed or ends (acquire, renew with and without
// a new TTL, release, revoke, expiry swept) and after the sweep folds the changes, and
// HeldCount and Held's total, which start from it, agree.
func TestOpenGrantsCounted(t *testing.T) {
	ctx := context.Background()
	clock := lease.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	url := srv.NewDatabase(t)
	s := open(t, url, clock, postgres.Options{})
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	check := func(step string) {
		t.Helper()
		var kept, open, held, deltas int
		if err := conn.QueryRow(ctx, `SELECT (SELECT n FROM open_grants) + (SELECT coalesce(sum(n), 0) FROM open_grants_delta),
			(SELECT count(*) FROM grants WHERE ended_at IS NULL), (SELECT count(*) FROM grants WHERE ended_at IS NULL AND expires_at > $1),
			(SELECT count(*) FROM open_grants_delta)`, clock.Now().UnixMilli()).Scan(&kept, &open, &held, &deltas); err != nil {
			t.Fatal(err)
		}
		if kept != open {
			t.Errorf("%s: the kept count of open grants = %d, counted %d (%d changes not folded)", step, kept, open, deltas)
		}
		// open_text, which the substring filters read, holds exactly the open grants.
		var missing, extra int
		if err := conn.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM grants g WHERE g.ended_at IS NULL AND NOT EXISTS
				(SELECT 1 FROM open_text t WHERE t.token = g.token AND t.name = g.name AND t.holder = g.holder)),
			(SELECT count(*) FROM open_text t WHERE NOT EXISTS
				(SELECT 1 FROM grants g WHERE g.token = t.token AND g.ended_at IS NULL))`).Scan(&missing, &extra); err != nil {
			t.Fatal(err)
		}
		if missing != 0 || extra != 0 {
			t.Errorf("%s: open_text misses %d open grants and holds %d others", step, missing, extra)
		}
		// open_due, which orders and sweeps by expiry and late mark, holds exactly the open
		// grants, each with its grant's name, expiry and late mark.
		if err := conn.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM grants g WHERE g.ended_at IS NULL AND NOT EXISTS
				(SELECT 1 FROM open_due d WHERE d.token = g.token AND d.name = g.name AND d.expires_at = g.expires_at
					AND d.late_at = g.renewed_at + g.ttl_ms / 2)),
			(SELECT count(*) FROM open_due d WHERE NOT EXISTS
				(SELECT 1 FROM grants g WHERE g.token = d.token AND g.ended_at IS NULL))`).Scan(&missing, &extra); err != nil {
			t.Fatal(err)
		}
		if missing != 0 || extra != 0 {
			t.Errorf("%s: open_due misses (or is behind on) %d open grants and holds %d others", step, missing, extra)
		}
		if n, err := s.HeldCount(ctx, ""); err != nil || n != held {
			t.Errorf("%s: HeldCount() = %d, %v; counted %d", step, n, err, held)
		}
		if p, err := s.Held(ctx, store.HeldFilter{Limit: 1}); err != nil || p.Total != held {
			t.Errorf("%s: Held().Total = %d, %v; counted %d grants", step, p.Total, err, held)
		}
	}
	acquire := func(p store.AcquireParams) lease.Lease {
		t.Helper()
		p.Holder = "w"
		l, err := s.Acquire(ctx, p)
		if err != nil {
			t.Fatalf("acquire %q: %v", p.Name, err)
		}
		return l
	}
	a := acquire(store.AcquireParams{Name: "a", TTL: time.Minute})
	b := acquire(store.AcquireParams{Name: "b", TTL: time.Minute})
	acquire(store.AcquireParams{Name: "short", TTL: 10 * time.Second})
	c := acquire(store.AcquireParams{Name: "c", TTL: time.Minute})
	check("acquired")
	clock.Advance(time.Second)
	if _, err := s.Renew(ctx, "c", c.ID, 0, nil); err != nil {
		t.Fatal(err)
	}
	check("renewed")
	if _, err := s.Renew(ctx, "c", c.ID, 3*time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	check("renewed with a new TTL")
	if err := s.Release(ctx, "a", a.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Revoke(ctx, "b", b.Token, "admin"); err != nil {
		t.Fatal(err)
	}
	check("released, revoked")
	clock.Advance(20 * time.Second)
	if n, _, err := s.ExpireDue(ctx); err != nil || n != 1 {
		t.Fatalf("ExpireDue() = %d, %v; want 1", n, err)
	}
	check("swept and folded")
	acquire(store.AcquireParams{Name: "a", TTL: time.Minute})
	check("acquired after the fold")
}
