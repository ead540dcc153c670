package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/heldsql"
)

// Held returns a page of the held leases that match f, through the indexes of the open grants
// (see package heldsql): the count first, then the page. See store.Store.
func (s *Store) Held(ctx context.Context, f store.HeldFilter) (store.HeldPage, error) {
	f, after, more, err := store.CheckHeld(f)
	if err != nil {
		return store.HeldPage{}, err
	}
	now := s.clock.Now().UnixMilli()
	d := heldsql.SQLite
	d.Narrow = s.narrow
	q := heldsql.New(d, f, now, grantCols)
	var total int
	if err := s.r.QueryRowContext(ctx, q.Count(), named(q.Args)...).Scan(&total); err != nil {
		return store.HeldPage{}, fmt.Errorf("count held leases: %w", w(err))
	}
	page, args := q.Page(total, after, more)
	rows, err := s.r.QueryContext(ctx, page, named(args)...)
	if err != nil {
		return store.HeldPage{}, fmt.Errorf("list held leases: %w", w(err))
	}
	defer rows.Close()
	var items []lease.State
	for rows.Next() {
		g, err := scanGrant(rows)
		if err != nil {
			return store.HeldPage{}, fmt.Errorf("list held leases: %w", err)
		}
		items = append(items, g.state(now))
	}
	if err := rows.Err(); err != nil {
		return store.HeldPage{}, fmt.Errorf("list held leases: %w", w(err))
	}
	return store.HeldPageOf(items, f.Limit, f.Order, total), nil
}

// named is args as database/sql's named arguments.
func named(args map[string]any) []any {
	out := make([]any, 0, len(args))
	for k, v := range args {
		out = append(out, sql.Named(k, v))
	}
	return out
}
