package handlers_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
)

func opsPerSecond(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// The HTTP benchmarks go through httptest and the generated client over a real SQLite file:
// what one client on the same machine sees.

func BenchmarkHTTPAcquire(b *testing.B) {
	e := newEnv(b)
	b.ResetTimer()
	for i := range b.N {
		e.acquire(fmt.Sprintf("n%d", i), "bench", time.Hour)
	}
	opsPerSecond(b)
}

func BenchmarkHTTPRenew(b *testing.B) {
	e := newEnv(b)
	l := e.acquire("job", "bench", time.Hour)
	b.ResetTimer()
	for range b.N {
		r, err := e.c.RenewLeaseWithResponse(e.ctx, "job", api.RenewRequest{LeaseId: *l.LeaseId})
		if err != nil || r.JSON200 == nil {
			b.Fatalf("RenewLease() = %v, %v", status(r), err)
		}
	}
	opsPerSecond(b)
}

func BenchmarkHTTPRelease(b *testing.B) {
	e := newEnv(b)
	ids := make([]string, b.N)
	for i := range b.N {
		ids[i] = *e.acquire(fmt.Sprintf("n%d", i), "bench", time.Hour).LeaseId
	}
	b.ResetTimer()
	for i := range b.N {
		r, err := e.c.ReleaseLeaseWithResponse(e.ctx, fmt.Sprintf("n%d", i), api.ReleaseRequest{LeaseId: ids[i]})
		if err != nil || r.StatusCode() != http.StatusNoContent {
			b.Fatalf("ReleaseLease() = %v, %v", status(r), err)
		}
	}
	opsPerSecond(b)
}

func BenchmarkHTTPAcquireParallel(b *testing.B) {
	e := newEnv(b)
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			name := fmt.Sprintf("n%d", n.Add(1))
			r, err := e.c.AcquireLeaseWithResponse(e.ctx, name, nil, api.AcquireRequest{Holder: "bench", TtlMs: 3600000})
			if err != nil || r.JSON200 == nil {
				b.Errorf("AcquireLease(%q) = %v, %v", name, status(r), err)
				return
			}
		}
	})
	opsPerSecond(b)
}
