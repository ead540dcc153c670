package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/heldsql"
	"github.com/leasekeeper/leasekeeper/store/parts"
)

// WithTracer returns o with tracer on every connection of the store's pool.
func WithTracer(o Options, tracer pgx.QueryTracer) Options {
	o.tracer = tracer
	return o
}

// WithPublishPage returns o with the events read to publish n at a time.
func WithPublishPage(o Options, n int) Options {
	o.publishPage = n
	return o
}

// HoldBatches takes every writer slot of s, so that writes wait to join one batch; pending says
// how many wait, and release lets them run.
func HoldBatches(s *Store) (pending func() int, release func()) {
	for range cap(s.lock) {
		s.lock <- struct{}{}
	}
	pending = func() int {
		s.pendMu.Lock()
		defer s.pendMu.Unlock()
		return len(s.pending)
	}
	release = func() {
		for range cap(s.lock) {
			<-s.lock
		}
	}
	return pending, release
}

// WriteSQL runs sql as one write operation of a batch.
func WriteSQL(ctx context.Context, s *Store, sql string) error {
	return s.write(ctx, func(ctx context.Context, t *txn) error {
		if _, err := t.tx.Exec(ctx, sql); err != nil {
			return fmt.Errorf("write %q: %w", sql, err)
		}
		return nil
	})
}

// WriteAborted runs a write operation that the database aborts with code (a deadlock: 40P01)
// the first times runs of its batch, then succeeds; it returns how many times it ran.
func WriteAborted(ctx context.Context, s *Store, code string, times int) (int, error) {
	runs := 0
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		runs++
		if runs <= times {
			return fmt.Errorf("write: %w", &pgconn.PgError{Code: code, Message: "aborted by the test"})
		}
		return nil
	})
	return runs, err
}

// SynchronousCommit is the synchronous_commit setting of a connection of s's pool.
func SynchronousCommit(ctx context.Context, s *Store) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&v)
	return v, err
}

// WithParts returns o with the index of parts in mode, its settings changed by tune (if set).
func WithParts(o Options, mode parts.Mode, tune func(*parts.Keeper)) Options {
	o.HeldParts, o.tuneParts = mode, tune
	return o
}

// Parts is s's index of parts.
func Parts(s *Store) *parts.Keeper { return s.parts }

// PartsCounts are Held's count of f by the index of parts (memory: Count with its first term
// counted there; counted says whether it counted) and in SQL alone, at s's clock.
func PartsCounts(ctx context.Context, s *Store, f store.HeldFilter) (memory, inSQL int, counted bool, err error) {
	f, _, _, err = store.CheckHeld(f)
	if err != nil {
		return 0, 0, false, err
	}
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return 0, 0, false, err
	}
	q := heldsql.New(heldsql.Postgres, f, now, grantCols)
	found, err := s.parts.Sift(ctx, q.Sift(), 0)
	if err != nil {
		return 0, 0, false, err
	}
	count := func(q heldsql.Query) (n int, err error) {
		err = s.pool.QueryRow(ctx, q.Count(), custom, pgx.NamedArgs(q.Args)).Scan(&n)
		return n, err
	}
	if inSQL, err = count(q); err != nil || !found.Counted {
		return 0, inSQL, false, err
	}
	memory, err = count(q.OpenCounted(found.Open))
	return memory, inSQL, true, err
}

// SetHeldParts sets Options.HeldParts while no Held runs (benchmarks).
func SetHeldParts(s *Store, mode parts.Mode) { s.parts.SetMode(mode) }

// BoundPage is storetest.BoundPage on s at the database's clock, the page walking its order's
// index.
func BoundPage(s *Store) func(f store.HeldFilter, after store.HeldKey, more, bound bool) ([]store.HeldKey, bool, error) {
	return func(f store.HeldFilter, after store.HeldKey, more, bound bool) ([]store.HeldKey, bool, error) {
		ctx := context.Background()
		now, err := s.now(ctx, s.pool)
		if err != nil {
			return nil, false, err
		}
		q := heldsql.New(heldsql.Postgres, f, now, grantCols)
		found, err := s.parts.Sift(ctx, q.Sift().After(after, more), 0)
		if err != nil {
			return nil, false, err
		}
		if bound && found.Bounded {
			q = q.Bound(found.First, found.FirstToken)
		}
		page, args := q.Page(1<<30, after, more)
		rows, err := s.pool.Query(ctx, page, custom, pgx.NamedArgs(args))
		if err != nil {
			return nil, false, err
		}
		keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.HeldKey, error) {
			g, err := scanGrant(r)
			return store.HeldKey{Name: g.name, Token: g.token}, err
		})
		return keys, found.Bounded, err
	}
}

// PreparedPlans gives, for each statement prepared on the connections of s's pool that the
// query reaches (all of them, in a pool of one), how many times PostgreSQL planned it once for
// any arguments (generic) and for its arguments (custom).
func PreparedPlans(ctx context.Context, s *Store) (map[string][2]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
	if err != nil {
		return nil, err
	}
	out := map[string][2]int64{}
	var sql string
	var generic, custom int64
	_, err = pgx.ForEachRow(rows, []any{&sql, &generic, &custom}, func() error {
		out[sql] = [2]int64{generic, custom}
		return nil
	})
	return out, err
}
