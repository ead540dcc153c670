package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/testwait"
)

// TestRWMutex: two readers hold the name together; a writer waits in line behind them, and a
// reader that comes after the writer is held off (writers never starve); when the readers
// unlock, the writer has the name alone, and its token writes where a reader's is refused.
func TestRWMutex(t *testing.T) {
	c := newClient(t, newServer(t))
	ctx := context.Background()
	o := client.AcquireOptions{TTL: time.Minute}
	a, b, w := c.NewRWMutex("cfg", o), c.NewRWMutex("cfg", o), c.NewRWMutex("cfg", o)
	actx, err := a.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second) // bounds a failure: a reader held off waits
	defer cancel()
	if _, err := b.RLock(bctx); err != nil {
		t.Fatalf("a second reader's RLock = %v, want it held beside the first", err)
	}
	st, err := c.Get(ctx, "cfg")
	if err != nil || !st.Shared || !st.Held || len(st.Holders) != 2 {
		t.Fatalf("Get(cfg) = %+v, %v; want two shared holders", st, err)
	}
	r, err := c.Acquire(ctx, "cfg", client.AcquireOptions{TTL: time.Minute, Shared: true})
	if err != nil || !r.Shared() {
		t.Fatalf("Acquire(Shared) = %v; want a shared lease", err)
	}
	if _, err := c.PutResource(ctx, "db", r.Token(), []byte("v"), client.PutOptions{}); !isCode(err, client.CodeSharedToken) {
		t.Errorf("PutResource(a reader's token) = %v, want shared_token", err)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}

	locked := make(chan error, 1)
	go func() {
		_, err := w.Lock(ctx)
		locked <- err
	}()
	eventually(t, 10*time.Second, "the writer in line", func() bool { st, err := c.Get(ctx, "cfg"); return err == nil && st.Waiters == 1 })
	if _, err := c.Acquire(ctx, "cfg", client.AcquireOptions{TTL: time.Minute, Shared: true}); !errors.Is(err, client.ErrLeaseHeld) {
		t.Errorf("a reader after a waiting writer = %v, want ErrLeaseHeld", err)
	}
	for _, m := range []*client.RWMutex{a, b} {
		if err := m.RUnlock(ctx); err != nil {
			t.Fatalf("RUnlock = %v", err)
		}
	}
	if err := testwait.Receive(t, locked, 10*time.Second); err != nil {
		t.Fatalf("the writer's Lock = %v", err)
	}
	if actx.Err() == nil {
		t.Errorf("a reader's context after RUnlock is still live")
	}
	if _, err := c.PutResource(ctx, "db", w.Token(), []byte("v"), client.PutOptions{}); err != nil {
		t.Errorf("PutResource(the writer's token) = %v", err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Errorf("Unlock = %v", err)
	}
	if err := a.RUnlock(ctx); !errors.Is(err, client.ErrNotLocked) {
		t.Errorf("RUnlock with no read lock = %v, want ErrNotLocked", err)
	}
}

func isCode(err error, code string) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Code == code
}
