package postgres

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultMaxConns is the size of a replica's connection pool unless Options.MaxConns or the
// URL's pool_max_conns says otherwise. pgx's own default, max(4, CPUs), counts the replica's
// CPUs, but what holds a connection is waiting, not computing: a batch of writes holds one
// through its locks, its commit and the flush that follows (the next batch runs meanwhile, on
// another), a page of a list or of the history holds one while it reads, and four of them on a
// 2-core replica queued every other request behind them. 16 leaves the batches of a busy
// replica, its reads and its slow requests room side by side,
// and five replicas (each also holding its listener's connection, outside the pool) stay under
// PostgreSQL's default max_connections of 100.
const DefaultMaxConns = 16

// poolConfig parses url, the store's database, and sizes the pool: pool_max_conns in the URL
// wins, then maxConns when positive, then DefaultMaxConns.
func poolConfig(url string, maxConns int) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	// pool_max_conns is a parameter of either form of connection string (a URL's query, or a
	// keyword=value list), which ParseConfig consumes.
	if !strings.Contains(url, "pool_max_conns=") {
		cfg.MaxConns = DefaultMaxConns
		if maxConns > 0 {
			cfg.MaxConns = int32(min(maxConns, 1<<20))
		}
	}
	// A write is answered once its flush returns, and the flush waits for the disk only when
	// the session commits synchronously: a server configured with synchronous_commit off
	// would lose acknowledged writes. Every connection commits synchronously unless a
	// transaction says otherwise (insertEvents does, and is followed by the flush).
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	// No statement of the store runs long enough to gain from compiling it (JIT), and a page of
	// the overview whose plan PostgreSQL costs high (an index walked in order, stopped by its
	// LIMIT after 51 rows) spent 370 ms compiling for 0.2 ms of work at a million leases. A
	// URL that sets jit keeps its own.
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	return cfg, nil
}

// MaxConns is the most connections the store's pool opens (its listener's is not one of them).
func (s *Store) MaxConns() int { return int(s.pool.Config().MaxConns) }
