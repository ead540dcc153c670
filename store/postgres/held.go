package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/heldsql"
)

// Held returns a page of the held leases that match f, through the indexes of the open grants
// (see package heldsql), by the database's clock: the count first, then the page. See
// store.Store.
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
	var total int
	if err := s.pool.QueryRow(ctx, q.Count(), pgx.NamedArgs(q.Args)).Scan(&total); err != nil {
		return store.HeldPage{}, fmt.Errorf("count held leases: %w", translate(err))
	}
	page, args := q.Page(total, after, more)
	rows, err := s.pool.Query(ctx, page, pgx.NamedArgs(args))
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
