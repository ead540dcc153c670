package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// BenchmarkMemoryPerLease reports the heap the writer's memory takes per held lease: the live
// heap of a store opened on LEASEKEEPER_BENCH_HELD held leases (default 100,000) less that of
// an empty one, over the count.
//
//	LEASEKEEPER_BENCH_HELD=1000000 go test -run '^$' -bench MemoryPerLease -benchtime 1x ./store/sqlite
func BenchmarkMemoryPerLease(b *testing.B) {
	n := benchHeld(b)
	live := func(path string) uint64 {
		s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	for b.Loop() {
		empty := filepath.Join(b.TempDir(), "empty.db")
		base := live(empty)
		full := filepath.Join(b.TempDir(), "full.db")
		live(full)
		db, err := sql.Open("sqlite3", "file:"+full+"?_journal_mode=WAL")
		if err != nil {
			b.Fatal(err)
		}
		// Names and holders as a busy server's: job-0000001, worker-17.
		_, err = db.Exec(`WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < ?)
			INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at, owner)
			SELECT 1000000 + i, printf('job-%07d', i), 'worker-' || (i % 64), randomblob(32), 3600000, 0, 1, 1, 9e15, '' FROM c;
			INSERT INTO names (name, token) SELECT name, token FROM grants;`, n-1)
		if err == nil {
			_, err = db.Exec(`UPDATE meta SET value = ? WHERE key = 'open_grants'`, n)
		}
		db.Close()
		if err != nil {
			b.Fatalf("seed %d leases: %v", n, err)
		}
		b.ReportMetric(float64(live(full)-base)/float64(n), "B/lease")
	}
}

// benchHeld is the number of held leases LEASEKEEPER_BENCH_HELD asks for, 100,000 unless set.
func benchHeld(b *testing.B) int {
	v := os.Getenv("LEASEKEEPER_BENCH_HELD")
	if v == "" {
		return 100_000
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		b.Fatalf("LEASEKEEPER_BENCH_HELD: %v", err)
	}
	return n
}
