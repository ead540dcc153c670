package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/testwait"
	"github.com/leasekeeper/leasekeeper/lease"
)

// TestSessionHoldsLeases: a process holds two leases under one session with one keepalive:
// they stay held across many ttls while only the session is renewed, and Close releases both
// on the server at once.
func TestSessionHoldsLeases(t *testing.T) {
	srvClock := lease.NewFakeClock(base)
	cliClock := newFakeClock(base)
	c := newClient(t, newServer(t, onClock(srvClock)), client.WithClock(cliClock))
	ctx := context.Background()
	s, err := c.OpenSession(ctx, client.SessionOptions{Holder: "proc-1", TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Acquire(ctx, "a", client.AcquireOptions{DisableWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Acquire(ctx, "b", client.AcquireOptions{DisableWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 { // 10 s: more than three ttls, renewed by the session's keepalive alone
		srvClock.Advance(time.Second)
		cliClock.Advance(time.Second)
		eventually(t, 5*time.Second, "the session renewed", func() bool {
			return !a.Deadline().Before(cliClock.Now().Add(time.Second))
		})
	}
	for _, l := range []*client.Lease{a, b} {
		if err := l.Context().Err(); err != nil {
			t.Fatalf("%s: context ended: %v", l.Name(), context.Cause(l.Context()))
		}
		if st, err := c.Get(ctx, l.Name()); err != nil || !st.Held || st.Token != l.Token() {
			t.Errorf("Get(%s) = %+v, %v; want held", l.Name(), st, err)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close = %v", err)
	}
	testwait.Receive(t, a.Context().Done(), time.Second)
	for _, name := range []string{"a", "b"} {
		if st, err := c.Get(ctx, name); err != nil || st.Held || st.End != "released" {
			t.Errorf("Get(%s) after Close = %+v, %v; want released", name, st, err)
		}
	}
	if err := a.Release(ctx); err != nil {
		t.Errorf("Release after the session closed = %v, want nil (it was released)", err)
	}
}

// TestSessionLostEndsLeases: when the server refuses the session's renewal (here: closed by
// someone else holding its ID), every lease under it ends at once, as lost.
func TestSessionLostEndsLeases(t *testing.T) {
	c := newClient(t, newServer(t))
	ctx := context.Background()
	s, err := c.OpenSession(ctx, client.SessionOptions{Holder: "proc-1", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Acquire(ctx, "a", client.AcquireOptions{DisableWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	// Another process with the session's ID closes it.
	req, _ := http.NewRequestWithContext(ctx, "POST", c.BaseURL()+"/v1/sessions/"+s.Ref()+"/close",
		strings.NewReader(`{"session_id":"`+s.ID()+`"}`))
	req.Header.Set("Authorization", "Bearer "+keyOf(c.BaseURL()))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("close the session from outside = %v, %v", resp, err)
	}
	resp.Body.Close()
	if err := a.Renew(ctx); !errors.Is(err, client.ErrSessionLost) {
		t.Fatalf("Renew after the session closed = %v, want ErrSessionLost", err)
	}
	testwait.Receive(t, a.Context().Done(), time.Second)
	if cause := context.Cause(a.Context()); !errors.Is(cause, client.ErrLeaseLost) {
		t.Errorf("lease context cause = %v, want ErrLeaseLost", cause)
	}
}
