package main

import (
	"context"
	"log/slog"
	"net/url"
	"strings"

	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/store/postgres"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// isPostgres reports whether --db names a PostgreSQL database; anything else is a SQLite path.
func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// openStore opens the backend --db names, with its commit hook feeding hooks, and its batches
// traced through them when traced is set; maxConns sizes a PostgreSQL pool (0: the store's
// default). This is the one place that knows which backend runs.
func openStore(ctx context.Context, db string, maxConns int, hooks *service.Hooks, traced bool, log *slog.Logger) (service.Store, error) {
	if isPostgres(db) {
		opts := postgres.Options{OnCommit: hooks.Publish, OnLine: hooks.LineChanged, OnBatch: hooks.Batch, Logger: log, MaxConns: maxConns}
		if traced {
			opts.OnBatchTrace = hooks.Trace
		}
		return postgres.Open(ctx, db, opts)
	}
	opts := sqlite.Options{OnCommit: hooks.Publish, OnBatch: hooks.Batch, Logger: log}
	if traced {
		opts.OnBatchTrace = hooks.Trace
	}
	return sqlite.Open(ctx, db, opts)
}

// redactDB is --db as it may be logged: a URL without its password.
func redactDB(db string) string {
	if !isPostgres(db) {
		return db
	}
	u, err := url.Parse(db)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
