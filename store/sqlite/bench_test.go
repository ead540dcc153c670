package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// openBench opens a fresh store on the real clock, as the server runs it.
func openBench(b *testing.B) *sqlite.Store {
	b.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func opsPerSecond(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

func grant(b *testing.B, s *sqlite.Store, name string) lease.Lease {
	b.Helper()
	l, err := s.Acquire(context.Background(), store.AcquireParams{Name: name, Holder: "bench", TTL: time.Hour})
	if err != nil {
		b.Fatalf("Acquire(%q) = %v", name, err)
	}
	return l
}

func BenchmarkAcquire(b *testing.B) {
	s := openBench(b)
	b.ResetTimer()
	for i := range b.N {
		grant(b, s, fmt.Sprintf("n%d", i))
	}
	opsPerSecond(b)
}

func BenchmarkRenew(b *testing.B) {
	s := openBench(b)
	l := grant(b, s, "job")
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := s.Renew(ctx, "job", l.ID, 0, nil); err != nil {
			b.Fatal(err)
		}
	}
	opsPerSecond(b)
}

func BenchmarkRelease(b *testing.B) {
	s := openBench(b)
	ids := make([]string, b.N)
	for i := range b.N {
		ids[i] = grant(b, s, fmt.Sprintf("n%d", i)).ID
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if err := s.Release(ctx, fmt.Sprintf("n%d", i), ids[i]); err != nil {
			b.Fatal(err)
		}
	}
	opsPerSecond(b)
}

// BenchmarkAcquireParallel acquires distinct names from many goroutines: concurrent writes
// share commits, so this is where group commit shows.
func BenchmarkAcquireParallel(b *testing.B) {
	s := openBench(b)
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			grant(b, s, fmt.Sprintf("n%d", n.Add(1)))
		}
	})
	opsPerSecond(b)
}

// BenchmarkPutResource writes one resource again and again under one lease: the fenced-write
// path, with the fence check, the upsert and the resource's history of writers.
func BenchmarkPutResource(b *testing.B) {
	s := openBench(b)
	l := grant(b, s, "job")
	ctx := context.Background()
	value := []byte(`{"balance":100}`)
	b.ResetTimer()
	for range b.N {
		if _, err := s.PutResource(ctx, store.ResourceWrite{Name: "acct", Token: l.Token, LeaseName: "job",
			Value: value, ContentType: "application/json"}); err != nil {
			b.Fatal(err)
		}
	}
	opsPerSecond(b)
}

// BenchmarkPutResourceParallel writes 64 resources from many goroutines, sharing commits.
func BenchmarkPutResourceParallel(b *testing.B) {
	s := openBench(b)
	l := grant(b, s, "job")
	ctx := context.Background()
	value := []byte(`{"balance":100}`)
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			name := fmt.Sprintf("acct%d", n.Add(1)%64)
			if _, err := s.PutResource(ctx, store.ResourceWrite{Name: name, Token: l.Token, LeaseName: "job",
				Value: value, ContentType: "application/json"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	opsPerSecond(b)
}
