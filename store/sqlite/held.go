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
// A filter on name or holder first finds the tokens that may pass it, up to the narrow bound,
// in the index of parts (see parts: the names and holders of the open grants in memory, kept
// off the write path) or, until that is built, by a sieve of grants_open_name (which holds
// both): when that many or fewer may, the count and the page read those rows alone, so a rare
// match costs a search of memory (or one walk of the index). Otherwise, and for the other
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
		tokens, among, err := s.sifted(ctx, q, f, narrow)
		if err != nil {
			return store.HeldPage{}, err
		}
		if among {
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

// sifted lists the tokens of the open grants that may pass f's filters on name and holder (a
// superset of those that do, which q.Among checks), and whether to read those alone (among,
// at most narrow of them: each is a look-up of its row, ~4 µs at a million): from the index
// of parts when it is ready, else by q's Sieve.
func (s *Store) sifted(ctx context.Context, q heldsql.Query, f store.HeldFilter, narrow int) (tokens []string, among bool, err error) {
	found, ok, err := s.parts.candidates(ctx, f.Contains, f.Holder, narrow)
	if err != nil {
		return nil, false, fmt.Errorf("sieve held leases: %w", err)
	}
	if ok {
		tokens := make([]string, len(found))
		for i, t := range found {
			tokens[i] = strconv.FormatInt(t, 10)
		}
		return tokens, true, nil
	}
	sieve, args := q.Sieve(narrow + 1)
	tokens, err = s.sieve(ctx, sieve, args)
	return tokens, err == nil && len(tokens) <= narrow, err
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
