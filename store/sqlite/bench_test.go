package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// batches counts the batches a store committed and the operations they held.
type batches struct{ n, ops atomic.Int64 }

// openBench opens a fresh store on the real clock, as the server runs it.
func openBench(b *testing.B) *sqlite.Store {
	s, _ := openCounted(b)
	return s
}

// openCounted is openBench, counting the store's batches.
func openCounted(b *testing.B) (*sqlite.Store, *batches) {
	b.Helper()
	c := &batches{}
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{
		OnBatch: func(ops int, _ time.Duration, _ bool) { c.n.Add(1); c.ops.Add(int64(ops)) }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, c
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
	s, c := openCounted(b)
	var n atomic.Int64
	acquireParallel(b, s, c, &n, "n")
}

// acquireParallel acquires distinct names, prefix and a number from n, from 16 goroutines,
// and reports them with the CPU they took (c: the store's batches, or nil).
func acquireParallel(b *testing.B, s *sqlite.Store, c *batches, n *atomic.Int64, prefix string) {
	b.SetParallelism(16)
	m := startCPU(b, c)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			grant(b, s, fmt.Sprintf("%s%d", prefix, n.Add(1)))
		}
	})
	m.report()
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

// BenchmarkPutResourceQuota is BenchmarkPutResource by a scoped key at its quota's default
// count: 999 other resources of 1 KiB counted (resources_owner) on every write, and the
// scoped checks of the token (its lease looked up in scope, the clock as its last token).
func BenchmarkPutResourceQuota(b *testing.B) {
	s := openBench(b)
	l := grant(b, s, "job")
	ctx := context.Background()
	for i := range 999 {
		if _, err := s.PutResource(ctx, store.ResourceWrite{Name: fmt.Sprintf("r-%d", i), Token: l.Token, Value: make([]byte, 1<<10),
			Owner: "key_w"}); err != nil {
			b.Fatal(err)
		}
	}
	value := []byte(`{"balance":100}`)
	q := lease.Quota{Resources: 1000, Bytes: 64 << 20}
	b.ResetTimer()
	for range b.N {
		if _, err := s.PutResource(ctx, store.ResourceWrite{Name: "acct", Token: l.Token, LeaseName: "job",
			Value: value, ContentType: "application/json", Owner: "key_w", Quota: q, Scope: lease.Scope{"job", "acct", "r-"}}); err != nil {
			b.Fatal(err)
		}
	}
	opsPerSecond(b)
}

// BenchmarkPutResourceParallel writes 64 resources from many goroutines, sharing commits.
func BenchmarkPutResourceParallel(b *testing.B) {
	s, c := openCounted(b)
	l := grant(b, s, "job")
	ctx := context.Background()
	value := []byte(`{"balance":100}`)
	var n atomic.Int64
	b.SetParallelism(16)
	m := startCPU(b, c)
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
	m.report()
}

// cpuMeter measures the process's CPU time (user and system, every thread: the writer, cgo and
// the benchmark's goroutines) from startCPU on; on a shared machine it varies far less than
// the wall time.
type cpuMeter struct {
	b        *testing.B
	start    time.Duration
	c        *batches
	n0, ops0 int64
}

// startCPU resets the benchmark's timer and starts measuring CPU time, and the size of the
// batches of c when c is not nil: the writer's CPU per operation falls as batches grow, so a
// change that alters their size must be read with it.
func startCPU(b *testing.B, c *batches) cpuMeter {
	b.Helper()
	b.ResetTimer()
	m := cpuMeter{b: b, c: c, start: cpuTime(b)}
	if c != nil {
		m.n0, m.ops0 = c.n.Load(), c.ops.Load()
	}
	return m
}

// report reports ops/s, the CPU time per b.N iteration as cpu-µs/op, and the writer's
// operations per batch.
func (m cpuMeter) report() {
	m.b.Helper()
	used := cpuTime(m.b) - m.start
	m.b.ReportMetric(float64(used.Microseconds())/float64(m.b.N), "cpu-µs/op")
	if m.c != nil {
		if n := m.c.n.Load() - m.n0; n > 0 {
			m.b.ReportMetric(float64(m.c.ops.Load()-m.ops0)/float64(n), "ops/batch")
		}
	}
	opsPerSecond(m.b)
}

func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// holders acquires n leases, named hold0…hold{n-1}, for the parallel benchmarks' goroutines.
func holders(b *testing.B, s *sqlite.Store, n int) []lease.Lease {
	b.Helper()
	out := make([]lease.Lease, n)
	for i := range out {
		out[i] = grant(b, s, fmt.Sprintf("hold%d", i))
	}
	return out
}

// BenchmarkRenewParallel renews 32 leases, one per goroutine, as 32 clients keeping their
// leases alive: the renewals share batches. cpu-µs/op is the CPU per renewal.
func BenchmarkRenewParallel(b *testing.B) {
	s, c := openCounted(b)
	ls := holders(b, s, 256)
	ctx := context.Background()
	var next atomic.Int64
	b.SetParallelism(16)
	m := startCPU(b, c)
	b.RunParallel(func(pb *testing.PB) {
		l := ls[next.Add(1)-1]
		for pb.Next() {
			if _, err := s.Renew(ctx, l.Name, l.ID, 0, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
	m.report()
}

// BenchmarkCycleParallel acquires and releases a name per goroutine, again and again: one
// op is one cycle (two writes, four events' worth of rows).
func BenchmarkCycleParallel(b *testing.B) {
	s, c := openCounted(b)
	ctx := context.Background()
	var next atomic.Int64
	b.SetParallelism(16)
	m := startCPU(b, c)
	b.RunParallel(func(pb *testing.PB) {
		name := fmt.Sprintf("cycle%d", next.Add(1))
		for pb.Next() {
			l, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: "bench", TTL: time.Minute})
			if err == nil {
				err = s.Release(ctx, name, l.ID)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	m.report()
}

// BenchmarkAcquireSet takes 8 names, by one acquire of all of them (All) or by 8 acquires one
// after another (OneByOne, each its own commit): a set costs one commit.
func BenchmarkAcquireSet(b *testing.B) {
	const size = 8
	ctx := context.Background()
	names := func(i int) []string {
		out := make([]string, size)
		for k := range out {
			out[k] = fmt.Sprintf("set-%d-%d", i, k)
		}
		return out
	}
	b.Run("All", func(b *testing.B) {
		s := openBench(b)
		i := 0
		for b.Loop() {
			if _, err := s.AcquireAll(ctx, store.AcquireAllParams{Names: names(i), Holder: "bench", TTL: time.Hour}); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sets/s")
	})
	// A shared set, and a set under an Idempotency-Key (8 more rows written): the same one
	// commit.
	b.Run("AllShared", func(b *testing.B) {
		s := openBench(b)
		i := 0
		for b.Loop() {
			if _, err := s.AcquireAll(ctx, store.AcquireAllParams{Names: names(i), Holder: "bench", TTL: time.Hour, Mode: lease.ModeShared}); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sets/s")
	})
	b.Run("AllIdempotent", func(b *testing.B) {
		s := openBench(b)
		i := 0
		for b.Loop() {
			p := store.AcquireAllParams{Names: names(i), Holder: "bench", TTL: time.Hour, IdempotencyKey: fmt.Sprintf("bench-key-%d", i)}
			if _, err := s.AcquireAll(ctx, p); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sets/s")
	})
	b.Run("OneByOne", func(b *testing.B) {
		s := openBench(b)
		i := 0
		for b.Loop() {
			for _, n := range names(i) {
				grant(b, s, n)
			}
			i++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sets/s")
	})
}

// BenchmarkSharedCycle acquires and releases one name, again and again: exclusively, shared,
// and shared beside 100 readers that hold it throughout (a shared acquire reads every slot of
// the name from the writer's memory). One op is one cycle.
func BenchmarkSharedCycle(b *testing.B) {
	for _, bc := range []struct {
		name    string
		mode    lease.Mode
		besides int
	}{{"exclusive", lease.ModeExclusive, 0}, {"shared", lease.ModeShared, 0}, {"shared-beside-100", lease.ModeShared, 100}} {
		b.Run(bc.name, func(b *testing.B) {
			s := openBench(b)
			ctx := context.Background()
			p := store.AcquireParams{Name: "cfg", Holder: "bench", TTL: time.Hour, Mode: bc.mode}
			for range bc.besides {
				if _, err := s.Acquire(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				l, err := s.Acquire(ctx, p)
				if err == nil {
					err = s.Release(ctx, "cfg", l.ID)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			opsPerSecond(b)
		})
	}
}
