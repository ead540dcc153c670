package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
)

// TestRestartStretchesManyGrants: a restart records as expired the open grants that expired
// before the newest persisted time and stretches the others to now + ttl (invariant 5), the
// same whether it moves each grant's entry in grants_open (few grants) or builds that index
// again (more than rebuildAbove); the index is then as the schema had it, and used.
func TestRestartStretchesManyGrants(t *testing.T) {
	for _, n := range []int{100, rebuildAbove + 10_000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			ctx := context.Background()
			t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			clock := lease.NewFakeClock(t0)
			path := filepath.Join(t.TempDir(), "leasekeeper.db")
			s, err := Open(ctx, path, Options{Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			var indexSQL string
			if err := s.r.QueryRow(`SELECT sql FROM sqlite_schema WHERE name = 'grants_open'`).Scan(&indexSQL); err != nil {
				t.Fatal(err)
			}
			s.Close()
			// n grants of an hour, the first tenth of them of a minute only; the server last
			// persisted its time ten minutes in.
			at, hour, minute := t0.UnixMilli(), time.Hour.Milliseconds(), time.Minute.Milliseconds()
			short := n / 10
			db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL")
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{
				fmt.Sprintf(`WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < %d)
					INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at, owner)
					SELECT 1000 + i, printf('job-%%07d', i), 'w', randomblob(32), CASE WHEN i < %d THEN %d ELSE %d END, 0, %d, %d,
					%d + CASE WHEN i < %d THEN %d ELSE %d END, '' FROM c`, n-1, short, minute, hour, at, at, at, short, minute, hour),
				`INSERT INTO names (name, token) SELECT name, token FROM grants`,
				fmt.Sprintf(`UPDATE meta SET value = %d WHERE key = 'last_token'`, 1000+n),
				fmt.Sprintf(`UPDATE meta SET value = %d WHERE key = 'open_grants'`, n),
				fmt.Sprintf(`UPDATE meta SET value = %d WHERE key = 'clock_hwm'`, at+10*minute),
			} {
				if _, err := db.Exec(q); err != nil {
					t.Fatalf("seed: %v", err)
				}
			}
			db.Close()

			clock.Advance(30 * time.Minute) // the restart, half an hour in
			s, err = Open(ctx, path, Options{Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.StretchedAtStart(); got != n-short {
				t.Errorf("StretchedAtStart() = %d, want the %d hour-long grants", got, n-short)
			}
			now := clock.Now().UnixMilli()
			var expired, stretched, other int
			var got string
			for _, c := range []struct {
				v    any
				q    string
				args []any
			}{
				{&expired, `SELECT count(*) FROM grants WHERE ended_at = expires_at AND end_kind = 'expired' AND ttl_ms = ?`, []any{minute}},
				{&stretched, `SELECT count(*) FROM grants WHERE ended_at IS NULL AND expires_at = ? AND restart_ext_ms = ?`, []any{now + hour, now - at}},
				{&other, `SELECT count(*) FROM grants WHERE NOT (ended_at IS NULL AND expires_at = ? OR end_kind = 'expired' AND ttl_ms = ?)`, []any{now + hour, minute}},
				{&got, `SELECT sql FROM sqlite_schema WHERE name = 'grants_open'`, nil},
			} {
				if err := s.r.QueryRow(c.q, c.args...).Scan(c.v); err != nil {
					t.Fatal(err)
				}
			}
			if expired != short || stretched != n-short || other != 0 {
				t.Errorf("after the restart: %d expired at their expiry, %d stretched to now + ttl, %d otherwise; want %d, %d, 0",
					expired, stretched, other, short, n-short)
			}
			if got != indexSQL {
				t.Errorf("grants_open after the restart: %q, want %q", got, indexSQL)
			}
			var plan string
			if err := s.r.QueryRow(`EXPLAIN QUERY PLAN SELECT token FROM grants WHERE ended_at IS NULL AND expires_at <= ?`, now).Scan(new(int), new(int), new(int), &plan); err != nil {
				t.Fatal(err)
			}
			if want := "SEARCH grants USING INDEX grants_open (expires_at<?)"; plan != want {
				t.Errorf("query plan of the sweeper's query: %q, want %q", plan, want)
			}
			checkHeldCount(t, s, clock, "restarted")
		})
	}
}
