package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/heldsql"
)

// TestHeldReadsItsIndexes checks the plans of Held: past heldsql.NarrowRows matches, each
// order walks its own index with no sort, from the cursor on; the count of a filter on name or
// holder reads grants_open_name (which holds both: SQLite reads no row of the table for them);
// restricted to a sieve's tokens, the count and the page read those rows by key.
func TestHeldReadsItsIndexes(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "p.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plan := func(q string, args map[string]any) string {
		t.Helper()
		return queryPlan(t, s.r, q, named(args)...)
	}
	for _, tc := range []struct {
		f    store.HeldFilter
		page string
	}{
		{store.HeldFilter{Order: store.OrderName, Contains: "x"}, "SEARCH g USING INDEX grants_open_name (name>? AND name<?)"},
		{store.HeldFilter{Order: store.OrderExpiry, Holder: "x"}, "SEARCH g USING INDEX grants_open (expires_at>?)"},
		{store.HeldFilter{Order: store.OrderLate, State: store.HeldExpiring}, "SEARCH g USING INDEX grants_open_late (<expr>>?)"},
		{store.HeldFilter{Order: store.OrderNewest, Prefix: "a"}, "SEARCH g USING INDEX grants_open_newest (token<?)"},
	} {
		f, _, _, err := store.CheckHeld(tc.f)
		if err != nil {
			t.Fatal(err)
		}
		q := heldsql.New(heldsql.SQLite, f, 1, grantCols)
		sql, args := q.Page(heldsql.NarrowRows+1, store.HeldKey{Name: "a", N: 1, Token: 1}, true)
		got := plan(sql, args)
		if !strings.Contains(got, tc.page) || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("plan of Held(%+v) page: %s; want %s and no sort", tc.f, got, tc.page)
		}
		// Among a sieve's tokens, every statement reads those rows by key.
		among := q.Among("[1,2]")
		sql, args = among.Page(1, store.HeldKey{Name: "a", N: 1, Token: 1}, true)
		for what, got := range map[string]string{"page": plan(sql, args), "count": plan(among.Count(), among.Args)} {
			if !strings.Contains(got, "SEARCH g USING INTEGER PRIMARY KEY (rowid=?)") && !strings.Contains(got, "SEARCH a USING INTEGER PRIMARY KEY (rowid=?)") ||
				strings.Contains(strings.ReplaceAll(got, "SCAN CONSTANT ROW", ""), "SCAN g") || strings.Contains(got, "SCAN a") {
				t.Errorf("plan of Held(%+v) %s among tokens: %s; want the rows by key, no scan", tc.f, what, got)
			}
		}
		if tc.f.State == "" {
			got := plan(q.Count(), q.Args)
			if !strings.Contains(got, "SEARCH a USING INDEX grants_open_name (name>? AND name<?)") ||
				strings.Contains(strings.ReplaceAll(got, "SCAN CONSTANT ROW", ""), "SCAN") {
				t.Errorf("plan of Held(%+v) count: %s; want grants_open_name, no scan", tc.f, got)
			}
		}
	}
}

// TestTriageHandoversByKey: the pending handovers of the overview's summary are read from the
// handovers table, each grant by its key, never by walking the open grants of the range.
func TestTriageHandoversByKey(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "p.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := queryPlan(t, s.r, triageHandovers, 0, "", "~", 1)
	if !strings.HasPrefix(got, "SCAN h") || !strings.Contains(got, "SEARCH g USING INTEGER PRIMARY KEY (rowid=?)") {
		t.Errorf("plan of the triage's handovers: %s; want SCAN h, then each grant by key", got)
	}
}

// queryPlan is SQLite's plan of q, its steps joined by "; ".
func queryPlan(t *testing.T, db *sql.DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var steps []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, detail)
	}
	return strings.Join(steps, "; ")
}
