package handlers_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
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

// cpuPerOp reports the CPU time (user + system) of this process per operation: on a shared
// machine it moves far less than the wall time. Call it with the CPU time before the loop.
func cpuPerOp(b *testing.B, before time.Duration) {
	b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHandlerHotRoutes serves the hot routes straight to the whole handler (no sockets),
// 16 goroutines a CPU at once so that the store's group commit batches them: the CPU the server
// spends per request on its HTTP layer and store, without the network stack's.
func BenchmarkHandlerHotRoutes(b *testing.B) {
	for _, route := range []string{"renew", "fenced"} {
		b.Run(route, func(b *testing.B) {
			e := newEnv(b)
			var n atomic.Int64
			auth := "Bearer " + e.key
			const parallelism = 16
			leases := make([]api.Lease, parallelism*runtime.GOMAXPROCS(0))
			for i := range leases {
				leases[i] = e.acquire(fmt.Sprintf("n%d", i), "bench", time.Hour)
			}
			b.SetParallelism(parallelism)
			before := cpuTime(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := n.Add(1) - 1
				name, l := fmt.Sprintf("n%d", i), leases[i]
				body := fmt.Sprintf(`{"lease_id":%q}`, *l.LeaseId)
				method, path := http.MethodPost, "/v1/leases/"+name+"/renew"
				if route == "fenced" {
					method, path = http.MethodPut, fmt.Sprintf("/v1/resources/r%d", i)
					body = strings.Repeat("v", 100)
				}
				for pb.Next() {
					req := httptest.NewRequest(method, path, strings.NewReader(body))
					req.Header.Set("Authorization", auth)
					req.Header.Set("Fencing-Token", strconv.FormatInt(l.Token, 10))
					req.Header.Set("Lease-Name", name)
					w := httptest.NewRecorder()
					e.handler.ServeHTTP(w, req)
					// The first write of each resource creates it: 201.
					if w.Code != http.StatusOK && w.Code != http.StatusCreated {
						b.Errorf("%s %s = %d %s", method, path, w.Code, w.Body)
						return
					}
				}
			})
			b.StopTimer()
			cpuPerOp(b, before)
			opsPerSecond(b)
		})
	}
}
