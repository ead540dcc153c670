package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// BenchmarkHeldParts times the first page (count and page) of Held's filters on a part of a
// name or holder over LEASEKEEPER_BENCH_HELD held leases (default 100,000; job-0000042 held by
// worker-42 % 64, and zz-needle by needle-holder), sieved in SQL ("sieve", as while the index of
// parts is built) beside through the index of parts ("parts"), in one run, and reports each
// one's median. "parts/build" is the index's build, with the heap it keeps per lease.
//
//	LEASEKEEPER_BENCH_HELD=1000000 go test -run '^$' -bench HeldParts -benchtime 10x ./store/sqlite
func BenchmarkHeldParts(b *testing.B) {
	n := benchHeld(b)
	path := filepath.Join(b.TempDir(), "parts.db")
	seedParts(b, path, n)
	views := []store.HeldFilter{
		{Contains: "needle"}, {Holder: "needle"}, {Contains: "00042", Order: store.OrderExpiry},
		{Holder: "worker-7", Order: store.OrderNewest}, {Contains: "job-", Holder: "-1"}, {Contains: "job-"},
	}
	for _, mode := range []struct {
		name string
		m    sqlite.PartsMode
	}{{"sieve", sqlite.PartsNever}, {"parts", sqlite.PartsAtOnce}} {
		s, err := sqlite.Open(context.Background(), path, sqlite.Options{HeldParts: mode.m, Reserve: -1})
		if err != nil {
			b.Fatal(err)
		}
		held := func(f store.HeldFilter) store.HeldPage {
			if f.Order == "" {
				f.Order = store.OrderName
			}
			f.Limit = 50
			p, err := s.Held(context.Background(), f)
			if err != nil {
				b.Fatal(err)
			}
			return p
		}
		if mode.m == sqlite.PartsAtOnce {
			before := liveHeap()
			began := time.Now()
			held(views[0])
			took, kept := time.Since(began), liveHeap()-before
			b.Run("parts/build", func(b *testing.B) {
				for b.Loop() {
				}
				b.ReportMetric(float64(took.Milliseconds()), "ms-build")
				b.ReportMetric(float64(kept)/float64(n), "B/lease")
			})
		}
		for _, f := range views {
			b.Run(fmt.Sprintf("%s/q=%s,holder=%s,%s", mode.name, f.Contains, f.Holder, f.Order), func(b *testing.B) {
				var took []time.Duration
				var total int
				for b.Loop() {
					began := time.Now()
					total = held(f).Total
					took = append(took, time.Since(began))
				}
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-median")
				b.ReportMetric(float64(total), "matches")
			})
		}
		s.Close()
	}
}

// BenchmarkPartsBesideAcquire acquires new names from 16 goroutines on a store of
// LEASEKEEPER_BENCH_HELD held leases (default 100,000): alone, while the keeper builds the
// index of parts from the store's open; while a dashboard filters on a part twice a second,
// through the index of parts (kept by its keeper) or sieved in SQL; while the index is built
// again and again (the keeper's worst case: it builds when the store opens and when the grants
// that ended outnumber the open ones); alone again, the keeper still running.
// cpu-µs/op is the process's CPU, the filters' and the keeper's included.
//
//	LEASEKEEPER_BENCH_HELD=1000000 go test -run '^$' -bench PartsBesideAcquire -benchtime 20000x ./store/sqlite
func BenchmarkPartsBesideAcquire(b *testing.B) {
	n := benchHeld(b)
	path := filepath.Join(b.TempDir(), "parts.db")
	seedParts(b, path, n)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{Reserve: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	filter := func() {
		if _, err := s.Held(ctx, store.HeldFilter{Contains: "needle", Order: store.OrderName, Limit: 50}); err != nil {
			b.Error(err)
		}
	}
	var names atomic.Int64
	beside := func(name string, work func()) {
		b.Run(name, func(b *testing.B) {
			stop, done := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				for {
					select {
					case <-stop:
						return
					default:
						work()
					}
				}
			}()
			acquireParallel(b, s, nil, &names, "new-")
			b.StopTimer() // the work beside ends at its next turn
			close(stop)
			<-done
		})
	}
	twice := func() { filter(); time.Sleep(500 * time.Millisecond) }
	beside("alone", func() { time.Sleep(time.Millisecond) })
	for !s.PartsReady() {
		filter()
		time.Sleep(50 * time.Millisecond)
	}
	beside("filters-parts", twice)
	s.SetHeldParts(sqlite.PartsNever)
	beside("filters-sieve", twice)
	beside("builds", func() {
		if err := s.BuildParts(ctx); err != nil {
			b.Error(err)
		}
	})
	beside("alone-again", func() { time.Sleep(time.Millisecond) })
}

// liveHeap is the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// seedParts writes n held leases (ttl 1 h) into a new database at path, as a busy server's
// names and holders, and one of needle-holder's.
func seedParts(b *testing.B, path string, n int) {
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{Reserve: -1})
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UnixMilli()
	for _, q := range []string{
		fmt.Sprintf(`WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < %d)
			INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at, owner)
			SELECT 1000 + i, printf('job-%%07d', i), 'worker-' || (i %% 64), randomblob(32), 3600000, 0, %[2]d, %[2]d, %[2]d + 3600000, '' FROM c`, n-2, now),
		fmt.Sprintf(`INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at, owner)
			VALUES (%d, 'zz-needle', 'needle-holder', randomblob(32), 3600000, 0, %[2]d, %[2]d, %[2]d + 3600000, '')`, 1000+n, now),
		`INSERT INTO names (name, token) SELECT name, token FROM grants`,
		fmt.Sprintf(`UPDATE meta SET value = %d WHERE key = 'last_token'`, 1000+n),
		fmt.Sprintf(`UPDATE meta SET value = %d WHERE key = 'open_grants'`, n),
		`PRAGMA wal_checkpoint(TRUNCATE)`,
	} {
		if _, err := db.Exec(q); err != nil {
			b.Fatalf("seed %d leases: %v", n, err)
		}
	}
}
