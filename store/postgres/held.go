package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/heldsql"
)

// custom runs a statement unprepared, so that PostgreSQL plans it for its arguments each time:
// a statement prepared once is planned for any arguments after five runs (a generic plan),
// and for a range of names, an instant or a pattern that it does not know, it estimates a
// third of the grants and reads them all, where the arguments' own plan reads an index range
// (2 Dec 2026, a million held leases: the first page of the overview 0.3 ms against 100-600 ms
// for its count). The planning costs a millisecond or so per statement.
const custom = pgx.QueryExecModeExec

// Held returns a page of the held leases that match f, through the indexes of the open grants
// (see package heldsql), by the database's clock: the count first, then the page. See
// store.Store.
//
// A filter on name or holder first asks the index of parts (package parts: the names and
// holders of the open grants in memory, kept off the write path), as SQLite's Held does: when
// at most the narrow bound match, the count and the page read those rows alone, by token;
// with more, it counts them (but the few past expiry not yet recorded, and the semaphores), a
// part that many leases share too (open_text's trigram indexes read every match for the count,
// and a part of fewer than three characters has no trigram at all), and finds the first of
// them after the page's key, where the page's walk of its order's index begins (by name or
// newest: Query.Bound; a walk from the start checked every grant before the first match
// against open_text, 60 ms under load at a million). Until the index is built, and for a
// filter on a state with more matches, the count reads open_text in SQL.
func (s *Store) Held(ctx context.Context, f store.HeldFilter) (store.HeldPage, error) {
	f, after, more, err := store.CheckHeld(f)
	if err != nil {
		return store.HeldPage{}, err
	}
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return store.HeldPage{}, err
	}
	q := heldsql.New(heldsql.Postgres, f, now, grantCols)
	if q.Sifted() {
		found, err := s.parts.Sift(ctx, q.Sift().After(after, more), heldsql.Postgres.NarrowBound())
		if err != nil {
			return store.HeldPage{}, fmt.Errorf("sieve held leases: %w", err)
		}
		q, _ = found.Apply(q)
	}
	var total int
	if err := s.pool.QueryRow(ctx, q.Count(), custom, pgx.NamedArgs(q.Args)).Scan(&total); err != nil {
		return store.HeldPage{}, fmt.Errorf("count held leases: %w", translate(err))
	}
	page, args := q.Page(total, after, more)
	rows, err := s.pool.Query(ctx, page, custom, pgx.NamedArgs(args))
	if err != nil {
		return store.HeldPage{}, fmt.Errorf("list held leases: %w", translate(err))
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lease.State, error) {
		g, err := scanGrant(r)
		return g.state(now), err
	})
	if err != nil {
		return store.HeldPage{}, fmt.Errorf("list held leases: %w", translate(err))
	}
	return store.HeldPageOf(items, f.Limit, f.Order, total), nil
}
