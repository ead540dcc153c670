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
// A filter on name or holder first asks the index of parts (see package parts: the names and holders
// of the open grants in memory, kept off the write path) or, until that is built, a sieve of
// grants_open_name (which holds both): when at most the narrow bound match, the count and the
// page read those rows alone, so a rare match costs a search of memory (or one walk of the
// index); with more, the index of parts counts them (but the few past expiry not yet recorded,
// and the semaphores), and the page walks the order's index from the first of them that the
// index finds after the page's key (by name or newest: Query.Bound). Otherwise, and for the other
// filters, the count comes first in SQL, then the page through the order's index (or through
// the filter's, for few matches).
func (s *Store) Held(ctx context.Context, f store.HeldFilter) (store.HeldPage, error) {
	f, after, more, err := store.CheckHeld(f)
	if err != nil {
		return store.HeldPage{}, err
	}
	now := s.clock.Now().UnixMilli()
	d := s.dialect()
	q := heldsql.New(d, f, now, grantCols)
	if q.Sifted() {
		if q, err = s.sifted(ctx, q, after, more, d.NarrowBound()); err != nil {
			return store.HeldPage{}, err
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

// dialect is heldsql's SQLite with this store's narrow bound and count of open grants.
func (s *Store) dialect() heldsql.Dialect {
	d := heldsql.SQLite
	d.Narrow = s.narrow
	d.OpenGrants = `(SELECT value FROM meta WHERE key = 'open_grants')`
	return d
}

// sifted is q with what the filters on name and holder let be known before its count: from
// the index of parts when it is ready, the tokens of the open grants that pass them when at
// most narrow (Among: the count and the page read those rows alone, each a look-up of its row,
// ~4 µs at a million), else the count of them (OpenCounted), when the index has every end and
// the filter no state; otherwise by q's Sieve, the tokens when at most narrow.
func (s *Store) sifted(ctx context.Context, q heldsql.Query, after store.HeldKey, more bool, narrow int) (heldsql.Query, error) {
	found, err := s.parts.Sift(ctx, q.Sift().After(after, more), narrow)
	if err != nil {
		return q, fmt.Errorf("sieve held leases: %w", err)
	}
	if q, ok := found.Apply(q); ok || narrow == 0 {
		return q, nil
	}
	sieve, args := q.Sieve(narrow + 1)
	tokens, err := s.sieve(ctx, sieve, args)
	if err != nil {
		return q, err
	}
	if len(tokens) <= narrow {
		return q.Among("[" + strings.Join(tokens, ",") + "]"), nil
	}
	return q, nil
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
