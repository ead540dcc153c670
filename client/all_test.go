package client_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
)

// TestAcquireAll: several names come all or none, in the order asked, each an ordinary lease;
// some held is a *HeldError naming them; a wait is granted when the last is freed; and the
// leases' contexts end together when one of them is lost.
func TestAcquireAll(t *testing.T) {
	url := newServer(t)
	ctx := context.Background()
	c := newClient(t, url)
	t.Run("OK", func(t *testing.T) {
		ls, err := c.AcquireAll(ctx, []string{"ok-b", "ok-a"}, client.AcquireOptions{TTL: 30 * time.Second})
		if err != nil || len(ls) != 2 || ls[0].Name() != "ok-b" || ls[1].Name() != "ok-a" || ls[1].Token() <= ls[0].Token() {
			t.Fatalf("AcquireAll(ok-b, ok-a) = %v, %v; want both, in order, tokens growing", ls, err)
		}
		for _, l := range ls {
			if err := l.Release(ctx); err != nil {
				t.Errorf("Release(%s) = %v", l.Name(), err)
			}
		}
	})
	t.Run("ErrHeld", func(t *testing.T) {
		other, err := newClient(t, url).Acquire(ctx, "held-b", client.AcquireOptions{TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Release(ctx)
		_, err = c.AcquireAll(ctx, []string{"held-a", "held-b"}, client.AcquireOptions{TTL: 30 * time.Second})
		var held *client.HeldError
		if !errors.As(err, &held) || !slices.Equal(held.Held, []string{"held-b"}) || !errors.Is(err, client.ErrLeaseHeld) {
			t.Fatalf("AcquireAll(held-a, held-b held) = %v, want a *HeldError naming held-b", err)
		}
		if _, err := c.Get(ctx, "held-a"); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("Get(held-a) = %v, want not found: nothing granted", err)
		}
	})
	t.Run("Waits", func(t *testing.T) {
		other, err := newClient(t, url).Acquire(ctx, "wait-b", client.AcquireOptions{TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			ls, err := c.AcquireAll(ctx, []string{"wait-a", "wait-b"}, client.AcquireOptions{TTL: 30 * time.Second, Wait: time.Minute})
			for _, l := range ls {
				l.Release(ctx)
			}
			done <- err
		}()
		eventually(t, 5*time.Second, "the waiter in line", func() bool {
			st, err := c.Get(ctx, "wait-b")
			return err == nil && st.Waiters == 1
		})
		if err := other.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("AcquireAll(wait) = %v, want both once wait-b is freed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("AcquireAll(wait) not granted after wait-b was freed")
		}
	})
	t.Run("Session", func(t *testing.T) {
		s, err := c.OpenSession(ctx, client.SessionOptions{Holder: "proc", TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ls, err := s.AcquireAll(ctx, []string{"sess-a", "sess-b"}, client.AcquireOptions{})
		if err != nil || len(ls) != 2 {
			t.Fatalf("Session.AcquireAll = %v, %v", ls, err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"sess-a", "sess-b"} {
			if st, err := c.Get(ctx, n); err != nil || st.Held {
				t.Errorf("Get(%s) after the session closed = %+v, %v; want released", n, st, err)
			}
		}
	})
	t.Run("ContextsEndTogether", func(t *testing.T) {
		ls, err := c.AcquireAll(ctx, []string{"end-a", "end-b", "end-c"}, client.AcquireOptions{TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := newClient(t, url).Revoke(ctx, "end-b"); err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			waitDone(t, l.Context(), 5*time.Second)
		}
		for _, l := range []*client.Lease{ls[0], ls[2]} {
			if cause := context.Cause(l.Context()); !errors.Is(cause, client.ErrLeaseLost) || !strings.Contains(cause.Error(), `"end-b"`) {
				t.Errorf("cause of %s = %v, want ErrLeaseLost naming end-b", l.Name(), cause)
			}
			l.Release(ctx)
		}
	})
}
