package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// BenchmarkRestartAtScale times a restart on LEASEKEEPER_BENCH_HELD held leases (default
// 100,000; a million in BENCHMARKS.md): Open of a database whose every lease a restart
// stretches (renewed over the last 25 minutes, ttl 1 h), from a copy of the same seeded file
// each time, to the store ready to serve.
//
//	LEASEKEEPER_BENCH_HELD=1000000 go test -run '^$' -bench RestartAtScale -benchtime 5x ./store/sqlite
func BenchmarkRestartAtScale(b *testing.B) {
	n := benchHeld(b)
	ctx := context.Background()
	dir := b.TempDir()
	seeded := filepath.Join(dir, "seeded.db")
	s, err := sqlite.Open(ctx, seeded, sqlite.Options{Reserve: -1})
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite3", "file:"+seeded+"?_journal_mode=WAL")
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for _, q := range []string{
		fmt.Sprintf(`WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < %d)
			INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at, owner)
			SELECT %d * 1000 + i, printf('job-%%07d', i), 'worker-' || (i %% 64), randomblob(32), 3600000, 0,
			%d - (i * 7919) %% 1500000, %d - (i * 7919) %% 1500000, %d - (i * 7919) %% 1500000 + 3600000, '' FROM c`, n-1, now-int64(n), now, now, now),
		`INSERT INTO names (name, token) SELECT name, token FROM grants`,
		fmt.Sprintf(`UPDATE meta SET value = %d WHERE key = 'last_token'`, now*1000),
		fmt.Sprintf(`UPDATE meta SET value = %d WHERE key = 'open_grants'`, n),
		`PRAGMA wal_checkpoint(TRUNCATE)`,
	} {
		if _, err := db.Exec(q); err != nil {
			b.Fatalf("seed %d leases: %v", n, err)
		}
	}
	db.Close()
	path := filepath.Join(dir, "restart.db")
	for b.Loop() {
		b.StopTimer()
		for _, suffix := range []string{"-wal", "-shm"} {
			os.Remove(path + suffix)
		}
		if err := copyFile(seeded, path); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		s, err := sqlite.Open(ctx, path, sqlite.Options{Reserve: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if got := s.StretchedAtStart(); got != n {
			b.Fatalf("StretchedAtStart() = %d, want %d", got, n)
		}
		s.Close()
		b.StartTimer()
	}
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
