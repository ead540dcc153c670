package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/lease"
)

// waitInLine starts an acquire of name that waits up to wait, and returns where its answer
// will arrive.
func waitInLine(t *testing.T, c *client.Client, name string, wait time.Duration) <-chan error {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		l, err := c.Acquire(context.Background(), name, client.AcquireOptions{Holder: "waiter", TTL: time.Minute, Wait: wait, DisableKeepAlive: true})
		if err == nil {
			err = l.Release(context.Background())
		}
		got <- err
	}()
	return got
}

// waiters polls until the server shows n acquires waiting in line for name.
func waiters(t *testing.T, c *client.Client, name string, n int) {
	t.Helper()
	eventually(t, 5*time.Second, "the server to show the waiter", func() bool {
		st, err := c.Get(context.Background(), name)
		return err == nil && st.Waiters == n
	})
}

// TestWaitQueuesOnServer checks waits are always asked of the server's waiting line: one
// longer than the server's bound on a single wait (split into turns), and every wait after
// a 400 on an earlier one.
func TestWaitQueuesOnServer(t *testing.T) {
	t.Run("OKWaitAboveServerBound", func(t *testing.T) {
		c := newClient(t, newServer(t))
		ctx := context.Background()
		holder, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "a", TTL: time.Minute})
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		got := waitInLine(t, c, "job", 10*time.Minute) // the server's bound is 5 min
		waiters(t, c, "job", 1)
		if err := holder.Release(ctx); err != nil {
			t.Fatalf("Release = %v", err)
		}
		if err := <-got; err != nil {
			t.Errorf("waiting Acquire = %v, want the lease once released", err)
		}
	})
	t.Run("OKQueuesAfterA400", func(t *testing.T) {
		limits := lease.DefaultLimits()
		limits.MaxWait = time.Second
		c := newClient(t, newServer(t, withLimits(limits)))
		ctx := context.Background()
		holder, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "a", TTL: time.Minute})
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		// 1.5 s is above this server's bound: the first ask is answered 400.
		if err := <-waitInLine(t, c, "job", 1500*time.Millisecond); !errors.Is(err, client.ErrLeaseHeld) {
			t.Fatalf("Acquire waiting 1.5 s = %v, want ErrLeaseHeld once the wait ran out", err)
		}
		got := waitInLine(t, c, "job", 10*time.Second)
		waiters(t, c, "job", 1)
		if err := holder.Release(ctx); err != nil {
			t.Fatalf("Release = %v", err)
		}
		if err := <-got; err != nil {
			t.Errorf("waiting Acquire = %v, want the lease once released", err)
		}
	})
}

// TestWaitTurnTakesAllThatIsLeft: a wait that is not a whole number of milliseconds is asked of
// the server rounded up, so that the turn in line that runs out ends the wait; rounded down,
// its last sliver cost one more acquire.
func TestWaitTurnTakesAllThatIsLeft(t *testing.T) {
	cliClock := newFakeClock(base)
	p := newProxy(t, newServer(t))
	var mu sync.Mutex
	var asked []int64
	p.before = func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/v1/leases/job/acquire" {
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var b struct {
			WaitMs *int64 `json:"wait_ms"`
		}
		if err := json.Unmarshal(body, &b); err == nil && b.WaitMs != nil {
			asked = append(asked, *b.WaitMs)
			cliClock.Advance(time.Duration(*b.WaitMs) * time.Millisecond) // the turn the server gives
		} else {
			asked = append(asked, -1)
		}
	}
	c := newClient(t, p.URL, client.WithClock(cliClock))
	ctx := context.Background()
	if _, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "a", TTL: time.Minute}); err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	mu.Lock()
	asked = nil
	mu.Unlock()
	// Bounded: an acquire sent after the turn would pause on the fake clock, which stands still.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.Acquire(wctx, "job", client.AcquireOptions{Holder: "b", TTL: time.Minute, Wait: 1500 * time.Microsecond, DisableKeepAlive: true})
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0] != 2 {
		t.Errorf("acquires sent with wait_ms %v (-1: none), want one with 2 (1.5 ms rounded up)", asked)
	}
	if !errors.Is(err, client.ErrLeaseHeld) {
		t.Errorf("waiting Acquire = %v, want ErrLeaseHeld", err)
	}
}
