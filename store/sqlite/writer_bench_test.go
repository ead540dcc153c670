//go:build linux

package sqlite

import (
	"context"
	"fmt"
	"os"
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
		measure(b, s, batchSize, func() {
			runBatchOf(b, s, func(i int) func(context.Context, *txn) error {
				return s.renewOp(ls[i].Name, ls[i].ID, 0, nil, &out)
			})
		})
	})
	b.Run("cycle", func(b *testing.B) {
		s := openWriterBench(b)
		ls := make([]lease.Lease, batchSize)
		measure(b, s, batchSize, func() {
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
		measure(b, s, batchSize, func() {
			runBatchOf(b, s, func(i int) func(context.Context, *txn) error {
				return s.putOp(store.ResourceWrite{Name: fmt.Sprint("acct", i), Token: l.Token, LeaseName: "job",
					Value: value, ContentType: "application/json"}, &out)
			})
		})
	})
}

// benchStore is a store and its WAL's path.
type benchStore struct {
	*Store
	wal string
}

func openWriterBench(b *testing.B) benchStore {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench.db")
	s, err := Open(context.Background(), path, Options{CheckpointEvery: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return benchStore{Store: s, wal: path + "-wal"}
}

// runBatchOf commits one batch of batchSize operations, the i-th made by fn(i) (fewer when
// fn returns nil), as the leader of a group commit does.
func runBatchOf(b *testing.B, s benchStore, fn func(i int) func(context.Context, *txn) error) {
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

// measure runs iter 200 times, then b.N times measured, on this goroutine's own OS thread and reports the thread's CPU
// time per operation (cpu-µs/op, and its user part), opsPerIter operations an iteration, and
// how many pages each operation added to the WAL (wal-frames/op: the COMMIT writes each with
// two system calls and fsyncs them; the background checkpointer is held off).
func measure(b *testing.B, s benchStore, opsPerIter int, iter func()) {
	b.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// A history first: the events' name index grows until each name's newest entries sit
	// on pages of their own, and the pages a batch dirties stop growing with b.N.
	for range 200 {
		iter()
	}
	wal := walSize(b, s)
	b.ResetTimer()
	user, sys := threadCPU(b)
	for range b.N {
		iter()
	}
	user2, sys2 := threadCPU(b)
	ops := float64(b.N * opsPerIter)
	b.ReportMetric(float64((user2+sys2-user-sys).Nanoseconds())/1e3/ops, "cpu-µs/op")
	b.ReportMetric(float64((user2-user).Nanoseconds())/1e3/ops, "user-µs/op")
	b.ReportMetric(float64(walSize(b, s)-wal)/float64(walFrame)/ops, "wal-frames/op")
}

// walFrame is the size of a WAL frame: a 24-byte header and a 4 KiB page.
const walFrame = 24 + 4096

func walSize(b *testing.B, s benchStore) int64 {
	b.Helper()
	fi, err := os.Stat(s.wal)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// threadCPU is the user and system CPU time of the calling OS thread.
func threadCPU(b *testing.B) (user, sys time.Duration) {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
