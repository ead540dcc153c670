package client_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/lease"
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
	t.Run("Shared", func(t *testing.T) {
		var readers []*client.Lease
		for _, names := range [][]string{{"sh-a", "sh-b"}, {"sh-b", "sh-a"}} {
			ls, err := newClient(t, url).AcquireAll(ctx, names, client.AcquireOptions{TTL: 30 * time.Second, Shared: true})
			if err != nil || len(ls) != 2 || !ls[0].Shared() || !ls[1].Shared() || ls[0].Name() != names[0] {
				t.Fatalf("AcquireAll(%v, shared) beside another reader = %v, %v; want both names shared, in order", names, ls, err)
			}
			readers = append(readers, ls...)
		}
		_, err := c.AcquireAll(ctx, []string{"sh-c", "sh-a"}, client.AcquireOptions{TTL: 30 * time.Second})
		var held *client.HeldError
		if !errors.As(err, &held) || !slices.Equal(held.Held, []string{"sh-a"}) {
			t.Fatalf("AcquireAll(sh-c, sh-a) exclusive while sh-a is read = %v, want a *HeldError naming sh-a", err)
		}
		for _, l := range readers {
			if err := l.Release(ctx); err != nil {
				t.Errorf("Release(%s) = %v", l.Name(), err)
			}
		}
		if _, err := c.AcquireAll(ctx, []string{"sh-a"}, client.AcquireOptions{TTL: 30 * time.Second, Limit: 2}); !errors.Is(err, client.ErrInvalid) {
			t.Errorf("AcquireAll with a limit = %v, want ErrInvalid", err)
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

// TestAcquireAllRetryReusesIdempotencyKey loses the answer to a granted acquire of several
// names: the retry carries the same Idempotency-Key and returns those same grants (one acquired
// event per name, the same tokens), with the deadline counted from the first attempt's send.
func TestAcquireAllRetryReusesIdempotencyKey(t *testing.T) {
	const ttl, margin = 10 * time.Second, time.Second
	srvClock := lease.NewFakeClock(base)
	cliClock := newFakeClock(base)
	srvURL := newServer(t, onClock(srvClock))
	p := newProxy(t, srvURL)
	dropped := false
	p.dropAnswer = func(r *http.Request) bool {
		if dropped || r.URL.Path != "/v1/acquire" {
			return false
		}
		dropped = true
		cliClock.Advance(1500 * time.Millisecond) // the lost answer took a while to time out
		return true
	}
	c := newClient(t, p.URL, client.WithClock(cliClock), client.WithSafetyMargin(margin))
	done := make(chan struct{})
	go func() { // the retry sleeps by the fake clock
		defer close(done)
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
				cliClock.Advance(100 * time.Millisecond)
			}
		}
	}()
	ls, err := c.AcquireAll(context.Background(), []string{"job-b", "job-a"}, client.AcquireOptions{Holder: "a", TTL: ttl, DisableKeepAlive: true})
	done <- struct{}{}
	<-done
	if err != nil {
		t.Fatalf("AcquireAll = %v", err)
	}
	keys := p.requests("/v1/acquire")
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Errorf("Idempotency-Keys sent = %q, want two equal non-empty keys", keys)
	}
	other := newClient(t, srvURL)
	for _, l := range ls {
		st, err := other.Get(context.Background(), l.Name())
		if err != nil {
			t.Fatalf("Get(%s) = %v", l.Name(), err)
		}
		if diff := cmp.Diff([]any{true, "a", st.Token}, []any{st.Held, st.Holder, l.Token()}); diff != "" {
			t.Errorf("lease %s after retry (-server +client):\n%s", l.Name(), diff)
		}
		if diff := cmp.Diff(base.Add(ttl-margin), l.Deadline()); diff != "" {
			t.Errorf("Deadline of %s, from the first send (-want +got):\n%s", l.Name(), diff)
		}
		if err := l.Release(context.Background()); err != nil {
			t.Errorf("Release(%s) by the replayed lease ID = %v", l.Name(), err)
		}
	}
}
