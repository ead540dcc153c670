package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// WithTracer returns o with tracer on every connection of the store's pool.
func WithTracer(o Options, tracer pgx.QueryTracer) Options {
	o.tracer = tracer
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
