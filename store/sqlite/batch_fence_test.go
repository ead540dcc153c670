package sqlite

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// TestFencedWritesInOneBatch puts two fenced writes to one resource into one batch, the newer
// token first: the older one must be judged against the fence the newer one set in that batch
// (the writer's state), not against the committed database, where no write has landed yet.
// The conformance suite's concurrent writers catch this only when their writes happen to
// share a batch; here the first batch is held at BEGIN until both wait behind it.
func TestFencedWritesInOneBatch(t *testing.T) {
	ctx := context.Background()
	var gate atomic.Bool
	reached, release := make(chan struct{}), make(chan struct{})
	s, err := Open(ctx, filepath.Join(t.TempDir(), "lk.db"), Options{Fault: func(at string) error {
		if at == "begin" && gate.CompareAndSwap(true, false) {
			close(reached)
			<-release
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	older, err := s.Acquire(ctx, store.AcquireParams{Name: "a", Holder: "w", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	newer, err := s.Acquire(ctx, store.AcquireParams{Name: "b", Holder: "w", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	gate.Store(true)
	blocker := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, store.AcquireParams{Name: "blocker", Holder: "w", TTL: time.Minute})
		blocker <- err
	}()
	<-reached // the blocker's batch holds the writer at BEGIN
	put := func(tok int64, out chan<- error) {
		_, err := s.PutResource(ctx, store.ResourceWrite{Name: "shared", Token: tok, Value: []byte("v")})
		out <- err
	}
	waitQueue := func(n int) {
		for deadline := time.Now().Add(10 * time.Second); s.QueueDepth() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("queue depth %d, want %d", s.QueueDepth(), n)
			}
		}
	}
	newErr, oldErr := make(chan error, 1), make(chan error, 1)
	go put(newer.Token, newErr)
	waitQueue(1)
	go put(older.Token, oldErr)
	waitQueue(2)
	close(release)

	if err := <-blocker; err != nil {
		t.Fatal(err)
	}
	if err := <-newErr; err != nil {
		t.Fatalf("the newer token's write = %v, want it applied", err)
	}
	if err := <-oldErr; lease.ErrorCode(err) != lease.CodeStale {
		t.Fatalf("the older token's write in the same batch = %v, want stale_token", err)
	}
	r, err := s.GetResource(ctx, "shared")
	if err != nil || r.Fence != newer.Token || r.Version != 1 {
		t.Errorf("resource = fence %d version %d (%v), want fence %d at version 1", r.Fence, r.Version, err, newer.Token)
	}
}
