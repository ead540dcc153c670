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

// TestAttachedSessionShared: two processes hold leases under one session, each keeping it
// alive (AttachSession). When the first releases its lease and detaches, the second's lease
// stays held across many ttls, renewed by the second alone; the session is never closed by a
// detach, and once nobody renews it, it expires with what it still holds.
func TestAttachedSessionShared(t *testing.T) {
	srvClock := lease.NewFakeClock(base)
	clk1, clk2 := newFakeClock(base), newFakeClock(base)
	srv := newServer(t, onClock(srvClock))
	c1 := newClient(t, srv, client.WithClock(clk1))
	c2 := newClient(t, srv, client.WithClock(clk2))
	ctx := context.Background()
	advance := func(d time.Duration) {
		srvClock.Advance(d)
		clk1.Advance(d)
		clk2.Advance(d)
	}
	s1, err := c1.OpenSession(ctx, client.SessionOptions{Holder: "deploy-42", TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := c2.AttachSession(ctx, s1.ID())
	if err != nil {
		t.Fatalf("AttachSession = %v", err)
	}
	if s2.Ref() != s1.Ref() {
		t.Fatalf("attached to %s, want %s", s2.Ref(), s1.Ref())
	}
	a, err := s1.Acquire(ctx, "a", client.AcquireOptions{DisableWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s2.Acquire(ctx, "b", client.AcquireOptions{DisableWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	if b.Holder() != "deploy-42" {
		t.Errorf("holder under the attached session = %q, want the session's deploy-42", b.Holder())
	}
	// The first process is done: it gives back its own lease and stops renewing.
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	s1.Detach()
	if cause := context.Cause(s1.Context()); !errors.Is(cause, client.ErrDetached) {
		t.Errorf("detached session's context cause = %v, want ErrDetached", cause)
	}
	if _, err := s1.Acquire(ctx, "c", client.AcquireOptions{DisableWatch: true}); !errors.Is(err, client.ErrDetached) {
		t.Errorf("Acquire after Detach = %v, want ErrDetached", err)
	}
	for range 10 { // 10 s, more than three ttls: only the second process renews
		advance(time.Second)
		eventually(t, 5*time.Second, "the second process renewed the session", func() bool {
			return !b.Deadline().Before(clk2.Now().Add(time.Second))
		})
	}
	if err := b.Context().Err(); err != nil {
		t.Fatalf("b's context ended: %v", context.Cause(b.Context()))
	}
	if st, err := c2.Get(ctx, "b"); err != nil || !st.Held || st.Token != b.Token() {
		t.Fatalf("Get(b) = %+v, %v; want held by the second process", st, err)
	}
	if st, err := c2.Get(ctx, "a"); err != nil || st.Held || st.End != "released" {
		t.Errorf("Get(a) = %+v, %v; want released by the first process alone", st, err)
	}
	// The second detaches without releasing: the session is not closed, so b stays held until
	// the session expires a ttl later, then ends as expired.
	s2.Detach()
	if cause := context.Cause(b.Context()); !errors.Is(cause, client.ErrDetached) {
		t.Errorf("b's context cause after Detach = %v, want ErrDetached", cause)
	}
	if st, err := c2.Get(ctx, "b"); err != nil || !st.Held {
		t.Fatalf("Get(b) right after Detach = %+v, %v; want still held (a detach closes nothing)", st, err)
	}
	advance(4 * time.Second)
	if st, err := c2.Get(ctx, "b"); err != nil || st.Held {
		t.Errorf("Get(b) after the session's ttl with nobody renewing = %+v, %v; want expired", st, err)
	}
	if _, err := c1.AttachSession(ctx, s1.ID()); !errors.Is(err, client.ErrSessionLost) {
		t.Errorf("AttachSession to the expired session = %v, want ErrSessionLost", err)
	}
}

// TestAttachSessionRefused: an ID that is no session's, and an empty one, are refused.
func TestAttachSessionRefused(t *testing.T) {
	c := newClient(t, newServer(t))
	ctx := context.Background()
	if _, err := c.AttachSession(ctx, "lks_not-a-session"); !errors.Is(err, client.ErrSessionLost) {
		t.Errorf("AttachSession(unknown) = %v, want ErrSessionLost", err)
	}
	if _, err := c.AttachSession(ctx, ""); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("AttachSession(\"\") = %v, want ErrInvalid", err)
	}
	s, err := c.OpenSession(ctx, client.SessionOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AttachSession(ctx, s.ID()); !errors.Is(err, client.ErrSessionLost) {
		t.Errorf("AttachSession(closed) = %v, want ErrSessionLost", err)
	}
}
