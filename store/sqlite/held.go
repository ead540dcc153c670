package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/heldsql"
)

// Held returns a page of the held leases that match f, through the indexes of the open grants
// (see package heldsql). See store.Store.
//
// A filter on name or holder first sieves grants_open_name (which holds both) for the tokens
// that pass it, up to the narrow bound: when that many or fewer do, the count and the page read
// those rows alone, so a rare match costs one walk of the index. Otherwise, and for the other
// filters, the count comes first, then the page through the order's index (or through the
// filter's, for few matches).
func (s *Store) Held(ctx context.Context, f store.HeldFilter) (store.HeldPage, error) {
	f, after, more, err := store.CheckHeld(f)
	if err != nil {
		return store.HeldPage{}, err
	}
	now := s.clock.Now().UnixMilli()
	d := heldsql.SQLite
	d.Narrow = s.narrow
	d.OpenGrants = `(SELECT value FROM meta WHERE key = 'open_grants')`
	q := heldsql.New(d, f, now, grantCols)
	if narrow := d.NarrowBound(); q.Sifted() && narrow > 0 {
		sieve, args := q.Sieve(narrow + 1)
		tokens, err := s.sieve(ctx, sieve, args)
		if err != nil {
			return store.HeldPage{}, err
		}
		if len(tokens) <= narrow {
			q = q.Among("[" + strings.Join(tokens, ",") + "]")
		}
	}
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

// sieve runs a Sieve statement: the tokens it lists, as decimal text.
func (s *Store) sieve(ctx context.Context, q string, args map[string]any) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, q, named(args)...)
	if err != nil {
		return nil, fmt.Errorf("sieve held leases: %w", w(err))
	}
	defer rows.Close()
	var tokens []string
	for rows.Next() {
		var t int64
		if err := rows.Scan(&t); err != nil {
			return nil, fmt.Errorf("sieve held leases: %w", err)
		}
		tokens = append(tokens, strconv.FormatInt(t, 10))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sieve held leases: %w", w(err))
	}
	return tokens, nil
}

// named is args as database/sql's named arguments.
func named(args map[string]any) []any {
	out := make([]any, 0, len(args))
	for k, v := range args {
		out = append(out, sql.Named(k, v))
	}
	return out
}
