//go:build linux

package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// batchSize is how many operations each batch of BenchmarkWriterBatch holds.
const batchSize = 32

// BenchmarkWriterBatch runs the writer's batches itself, batchSize operations each, on one
// locked OS thread, and reports that thread's CPU time per operation (cpu-µs/op; one op of
// cycle is an acquire and a release): the writer's own cost — deciding, the statements, the
// COMMIT and its fsync — without the goroutines that queue operations and wait for answers,
// whose scheduling makes the process's CPU time noisy on a shared machine. b.N counts batches.
func BenchmarkWriterBatch(b *testing.B) {
	b.Run("renew", func(b *testing.B) {
		s := openWriterBench(b)
		ls := make([]lease.Lease, batchSize)
		runBatchOf(b, s, func(i int) func(context.Context, *txn) error {
			return s.acquireOp(store.AcquireParams{Name: fmt.Sprint("hold", i), Holder: "bench", TTL: time.Hour}, &ls[i])
		})
		var out lease.Lease
		measure(b, batchSize, func() {
			runBatchOf(b, s, func(i int) func(context.Context, *txn) error {
				return s.renewOp(ls[i].Name, ls[i].ID, 0, nil, &out)
			})
		})
	})
	b.Run("cycle", func(b *testing.B) {
		s := openWriterBench(b)
		ls := make([]lease.Lease, batchSize)
		measure(b, batchSize, func() {
			runBatchOf(b, s, func(i int) func(context.Context, *txn) error {
				return s.acquireOp(store.AcquireParams{Name: fmt.Sprint("cycle", i), Holder: "bench", TTL: time.Minute}, &ls[i])
			})
			runBatchOf(b, s, func(i int) func(context.Context, *txn) error { return s.releaseOp(ls[i].Name, ls[i].ID) })
		})
	})
	b.Run("put", func(b *testing.B) {
		s := openWriterBench(b)
		var l lease.Lease
		runBatchOf(b, s, func(i int) func(context.Context, *txn) error {
			if i > 0 {
				return nil
			}
			return s.acquireOp(store.AcquireParams{Name: "job", Holder: "bench", TTL: time.Hour}, &l)
		})
		value := []byte(`{"balance":100}`)
		var out lease.Resource
		measure(b, batchSize, func() {
			runBatchOf(b, s, func(i int) func(context.Context, *txn) error {
				return s.putOp(store.ResourceWrite{Name: fmt.Sprint("acct", i), Token: l.Token, LeaseName: "job",
					Value: value, ContentType: "application/json"}, &out)
			})
		})
	})
}

func openWriterBench(b *testing.B) *Store {
	b.Helper()
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// runBatchOf commits one batch of batchSize operations, the i-th made by fn(i) (fewer when
// fn returns nil), as the leader of a group commit does.
func runBatchOf(b *testing.B, s *Store, fn func(i int) func(context.Context, *txn) error) {
	b.Helper()
	var batch []*op
	for i := range batchSize {
		if f := fn(i); f != nil {
			batch = append(batch, &op{ctx: context.Background(), fn: f})
		}
	}
	s.lock <- struct{}{}
	committed, failure := s.commit(batch)
	<-s.lock
	if !committed || failure != nil {
		b.Fatalf("commit() = %v, %v", committed, failure)
	}
	for _, o := range batch {
		if o.err != nil {
			b.Fatal(o.err)
		}
	}
}

// measure runs iter b.N times on this goroutine's own OS thread and reports the thread's CPU
// time per operation, opsPerIter operations an iteration.
func measure(b *testing.B, opsPerIter int, iter func()) {
	b.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	start := threadCPU(b)
	for range b.N {
		iter()
	}
	used := threadCPU(b) - start
	b.ReportMetric(float64(used.Nanoseconds())/1e3/float64(b.N*opsPerIter), "cpu-µs/op")
}

// threadCPU is the CPU time (user and system) of the calling OS thread.
func threadCPU(b *testing.B) time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
