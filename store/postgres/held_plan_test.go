package postgres_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/heldsql"
)

// TestLateReadsItsIndex: the count of late leases (the overview's ?state=late, as the triage
// summary counts them) and their first page read a range of open_due_late, not every grant. Before the late mark had
// a column of its own (migration 0019) PostgreSQL had no statistics of it over the open grants,
// and planned "late mark < now" as a sequential scan of a third of the table: 140 ms at a
// million with 10,000 late.
func TestLateReadsItsIndex(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	open(t, url, nil, postgresOptions(nil))
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	now := time.Now().UnixMilli()
	// 50,000 open grants renewed within the last 25 minutes, one in a hundred 40 minutes ago.
	if _, err := conn.Exec(ctx, `INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at, owner)
		SELECT i, 'job-' || i, 'w', sha256(int8send(i)), 3600000, 0, r, r, r + 3600000, ''
		FROM generate_series(1, 50000) i, LATERAL (SELECT CASE WHEN i % 100 = 0 THEN $1::bigint - 2400000 ELSE $1::bigint - i * 30 END AS r) x`, now); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE grants, open_due`); err != nil {
		t.Fatal(err)
	}
	q := heldsql.New(heldsql.Postgres, store.HeldFilter{State: store.HeldLate, Order: store.OrderLate, Limit: 50}, now, "g.token")
	args := pgx.NamedArgs(q.Args)
	rows, err := conn.Query(ctx, `EXPLAIN `+q.Count(), pgx.QueryExecModeExec, args)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	// At 50,000 grants either plan reads the index; at a million a third of the table is a
	// sequential scan. So the estimate is what must stay small: that of open_due's rows, the
	// 500 late ones (with a third of the table for "late mark < now", 16,000).
	var estimate int
	for _, l := range lines {
		if _, rest, ok := strings.Cut(l, "on open_due_late "); ok {
			if _, n, ok := strings.Cut(rest, " rows="); ok {
				estimate, _ = strconv.Atoi(strings.Fields(n)[0])
			}
			break
		}
	}
	if estimate == 0 || estimate > 2000 || strings.Contains(plan, "Seq Scan") {
		t.Errorf("the count of late leases reads open_due_late for %d rows estimated (want 1..2000):\n%s", estimate, plan)
	}
	// The page, too, is found in open_due, and only its rows are read from grants: joined to
	// grants for every late one, the planner read all of grants (400 ms at a million).
	page, pargs := q.Page(500, store.HeldKey{}, false)
	rows, err = conn.Query(ctx, `EXPLAIN `+page, pgx.QueryExecModeExec, pgx.NamedArgs(pargs))
	if err != nil {
		t.Fatal(err)
	}
	if lines, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if plan := strings.Join(lines, "\n"); strings.Contains(plan, "Seq Scan") {
		t.Errorf("the page of late leases reads a whole table:\n%s", plan)
	}
}
