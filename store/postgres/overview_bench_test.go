package postgres_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/parts"
	"github.com/leasekeeper/leasekeeper/store/postgres"
)

// overviewFilters are the overview's first pages, as the dashboard asks the store for them:
// the plain list, each order, each state, a prefix, and a part of a name or a holder (one
// that matches a single lease of all, and common ones).
var overviewFilters = map[string]store.HeldFilter{
	"name":             {},
	"expiry":           {Order: store.OrderExpiry},
	"late":             {Order: store.OrderLate},
	"newest":           {Order: store.OrderNewest},
	"state=expiring":   {State: store.HeldExpiring},
	"state=late":       {State: store.HeldLate, Order: store.OrderLate},
	"prefix=job-000":   {Prefix: "job-000"},
	"q=needle":         {Contains: "needle"},
	"holder=needle":    {Holder: "needle"},
	"q=00042,expiry":   {Contains: "00042", Order: store.OrderExpiry},
	"holder=worker-7":  {Holder: "worker-7", Order: store.OrderNewest},
	"q=job-,holder=-1": {Contains: "job-", Holder: "-1"},
}

// BenchmarkOverviewAtScale times what the overview asks the store for its first page of each
// view (the page, the count of every held lease when filtered, the triage summary, the names
// freed lately) with LEASEKEEPER_BENCH_HELD held leases (default 100,000), and reports the
// median, and the median of its page and count alone (Held). A view with a part of a name or holder runs twice, side by side: counted in SQL
// ("sql": open_text's trigram indexes) and by the index of parts ("parts", once the keeper
// has built it). LEASEKEEPER_BENCH_DB, when set, is the URL of a database to keep between runs: it
// is seeded on the first run only (a million take a minute or two), e.g.
//
//	createdb lk1m
//	LEASEKEEPER_BENCH_DB=postgres:///lk1m?host=/run/postgresql LEASEKEEPER_BENCH_HELD=1000000 \
//	    go test -run '^$' -bench OverviewAtScale -benchtime 20x ./store/postgres
func BenchmarkOverviewAtScale(b *testing.B) {
	n := 100_000
	if v := os.Getenv("LEASEKEEPER_BENCH_HELD"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("LEASEKEEPER_BENCH_HELD: %v", err)
		}
	}
	url := os.Getenv("LEASEKEEPER_BENCH_DB")
	if url == "" {
		url = srv.NewDatabase(b)
	}
	ctx := context.Background()
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	seedOverview(b, url, n)
	for deadline := time.Now().Add(5 * time.Minute); postgres.Parts(s).Built() == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the index of parts was not built in five minutes")
		}
	}
	names := make([]string, 0, len(overviewFilters))
	for k := range overviewFilters {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		f := overviewFilters[name]
		f.Limit = 50
		type viewMode struct {
			name string
			mode parts.Mode
		}
		modes := []viewMode{{"", parts.Background}}
		if f.Contains != "" || f.Holder != "" {
			modes = []viewMode{{"/sql", parts.Never}, {"/parts", parts.Background}}
		}
		for _, m := range modes {
			postgres.SetHeldParts(s, m.mode)
			b.Run(name+m.name, func(b *testing.B) {
				var held []time.Duration
				view := func() {
					began := time.Now()
					p, err := s.Held(ctx, f)
					held = append(held, time.Since(began))
					if err != nil {
						b.Fatal(err)
					}
					if len(p.Items) == 0 && f.State != store.HeldExpiring {
						b.Fatalf("Held(%+v) = no lease", f)
					}
					if f.Contains != "" || f.Holder != "" || f.State != "" {
						if _, err := s.Held(ctx, store.HeldFilter{Limit: 1}); err != nil {
							b.Fatal(err)
						}
					}
					if _, err := s.Triage(ctx, "", time.Minute); err != nil {
						b.Fatal(err)
					}
					if _, err := s.RecentlyFreed(ctx, "", 10); err != nil {
						b.Fatal(err)
					}
				}
				view() // the first read of its pages
				took := make([]time.Duration, 0, b.N)
				for b.Loop() {
					began := time.Now()
					view()
					took = append(took, time.Since(began))
				}
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-median")
				held = held[1:] // the first read of its pages
				slices.Sort(held)
				b.ReportMetric(float64(held[len(held)/2].Microseconds())/1000, "ms-held-median")
			})
		}
	}
}

// seedOverview writes n held leases into the migrated database at url unless it holds them
// already, as the SQLite benchmark of the overview does (package service), with a ttl of two
// hours: renewals spread over the last 25 minutes, one lease in a hundred late to renew (70
// minutes ago), one in a thousand later still (and expiring within the minute), and one held
// by "needle-holder" on "zz-needle".
func seedOverview(tb testing.TB, url string, n int) {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	var have int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM grants`).Scan(&have); err != nil {
		tb.Fatal(err)
	}
	if have >= n {
		return
	}
	if have > 0 {
		tb.Fatalf("the database holds %d grants, neither none nor %d", have, n)
	}
	now := time.Now()
	at, first := now.UnixMilli(), now.UnixMicro()-int64(n)-1000
	// A ttl of two hours, so that no lease on time turns late (after an hour without renewal)
	// while a kept database is measured, for half an hour after the seeding.
	renewed := `CASE WHEN i % 1000 = 1 THEN $2::bigint - 7170000 WHEN i % 100 = 0 THEN $2::bigint - 4200000 ELSE $2::bigint - (i * 7919) % 1500000 END`
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at, owner)
		SELECT $1 + i, 'job-' || lpad(i::text, 7, '0'), 'worker-' || (i % 64), sha256(int8send(i)), 7200000, 0, r - 60000, r, r + 7200000, ''
		FROM generate_series(0, $3::bigint - 2) i, LATERAL (SELECT ` + renewed + ` AS r) x`, []any{first, at, n}},
		{`INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at, owner)
		VALUES ($1, 'zz-needle', 'needle-holder', sha256('needle'), 7200000, 0, $2::bigint, $2::bigint, $2::bigint + 7200000, '')`, []any{first + int64(n), at}},
		{`INSERT INTO names (name, token) SELECT name, token FROM grants`, nil},
		{`UPDATE tokens SET last = $1`, []any{first + int64(n)}},
		{`VACUUM ANALYZE`, nil},
		{`CHECKPOINT`, nil},
	} {
		if _, err := conn.Exec(ctx, q.sql, q.args...); err != nil {
			tb.Fatalf("seed %d leases: %v (%s)", n, err, strings.Fields(q.sql)[0])
		}
	}
}
