package client_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/testwait"
)

// TestMutex: Lock holds the name with a fencing token, TryLock of a held name answers who
// holds it, Lock waits in line until Unlock, the next holder's token is higher, and a revoked
// lock ends its lease's context and makes Unlock report the loss.
func TestMutex(t *testing.T) {
	url := newServer(t)
	a, b := newClient(t, url), newClient(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ma := a.NewMutex("job", client.AcquireOptions{Holder: "a", TTL: time.Minute})
	mb := b.NewMutex("job", client.AcquireOptions{Holder: "b", TTL: time.Minute})
	if got := ma.Lease(); got != nil || ma.Token() != 0 {
		t.Errorf("before Lock: Lease = %v, Token = %d; want nil, 0", got, ma.Token())
	}
	if err := ma.Lock(ctx); err != nil {
		t.Fatalf("Lock a = %v", err)
	}
	first := ma.Token()
	if st, err := a.Get(ctx, "job"); err != nil || !st.Held || st.Holder != "a" || st.Token != first || first == 0 {
		t.Fatalf("state = %+v, %v; want a holding token %d", st, err, first)
	}
	var held *client.HeldError
	if err := mb.TryLock(ctx); !errors.As(err, &held) || held.Holder != "a" || !errors.Is(err, client.ErrLeaseHeld) {
		t.Errorf("TryLock b = %v, want a *HeldError naming a", err)
	}
	if err := ma.TryLock(ctx); !errors.Is(err, client.ErrLeaseHeld) {
		t.Errorf("TryLock a while a holds it = %v, want ErrLeaseHeld", err)
	}
	locked := make(chan error, 1)
	go func() { locked <- mb.Lock(ctx) }()
	waiters(t, a, "job", 1)
	if err := ma.Unlock(ctx); err != nil {
		t.Fatalf("Unlock a = %v", err)
	}
	if err := testwait.Receive(t, locked, 10*time.Second); err != nil {
		t.Fatalf("Lock b = %v", err)
	}
	if mb.Token() <= first {
		t.Errorf("b's token %d, want above a's %d", mb.Token(), first)
	}
	if err := ma.Unlock(ctx); !errors.Is(err, client.ErrNotLocked) {
		t.Errorf("second Unlock a = %v, want ErrNotLocked", err)
	}

	if err := a.RevokeToken(ctx, "job", mb.Token()); err != nil {
		t.Fatal(err)
	}
	testwait.Receive(t, mb.Lease().Context().Done(), 10*time.Second)
	if err := mb.Unlock(ctx); !errors.Is(err, client.ErrLeaseLost) {
		t.Errorf("Unlock after a revoke = %v, want ErrLeaseLost", err)
	}
}

// TestMutexLockerExcludes: goroutines sharing a Mutex through its sync.Locker run their
// critical sections one at a time (the counter is unsynchronized but for the lock: -race
// checks it too).
func TestMutexLockerExcludes(t *testing.T) {
	c := newClient(t, newServer(t))
	lk := c.NewMutex("counter", client.AcquireOptions{TTL: time.Minute}).Locker()
	var inside, most atomic.Int32
	counter := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 3 {
				lk.Lock()
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				counter++
				time.Sleep(time.Millisecond) // give another holder the chance to overlap
				inside.Add(-1)
				lk.Unlock()
			}
		})
	}
	wg.Wait()
	if counter != 12 || most.Load() != 1 {
		t.Errorf("counter = %d with at most %d inside at once, want 12 with 1", counter, most.Load())
	}
}

// TestMutexLockerPanics: the sync.Locker cannot return errors, so it panics with them.
func TestMutexLockerPanics(t *testing.T) {
	c := newClient(t, newServer(t))
	lk := c.NewMutex("job", client.AcquireOptions{}).Locker()
	defer func() {
		if err, _ := recover().(error); !errors.Is(err, client.ErrNotLocked) {
			t.Errorf("Unlock of an unlocked Locker panicked with %v, want ErrNotLocked", err)
		}
	}()
	lk.Unlock()
}

// TestMutexUnderSession: a lock held under a session lasts as the session does, and Unlock
// releases it alone, leaving the session open.
func TestMutexUnderSession(t *testing.T) {
	c := newClient(t, newServer(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := c.OpenSession(ctx, client.SessionOptions{Holder: "proc-1", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	m := s.NewMutex("job", client.AcquireOptions{})
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock = %v", err)
	}
	if st, err := c.Get(ctx, "job"); err != nil || !st.Held || st.Holder != "proc-1" || st.TTL != time.Minute {
		t.Errorf("state = %+v, %v; want held by proc-1 for the session's ttl", st, err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock = %v", err)
	}
	if st, err := c.Get(ctx, "job"); err != nil || st.Held || st.End != client.EventReleased {
		t.Errorf("state after Unlock = %+v, %v; want released", st, err)
	}
	if err := s.Context().Err(); err != nil {
		t.Errorf("session ended with the lock: %v", context.Cause(s.Context()))
	}
	if err := s.Close(ctx); err != nil {
		t.Error(err)
	}
}
