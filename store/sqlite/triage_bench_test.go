package sqlite_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/store"
)

// BenchmarkTriage times the overview summary's store query beside HeldCount, over 100,000
// held leases (filled by 32 clients, as the server's group commit takes them).
func BenchmarkTriage(b *testing.B) {
	s := openBench(b)
	const held, clients = 100_000, 32
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := c; i < held; i += clients {
				if _, err := s.Acquire(context.Background(), store.AcquireParams{Name: fmt.Sprintf("job-%06d", i), Holder: "bench", TTL: time.Hour}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	ctx := context.Background()
	b.Run("Triage", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Triage(ctx, "", time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("TriagePrefix", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Triage(ctx, "job-0999", time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("HeldCount", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.HeldCount(ctx, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
}
