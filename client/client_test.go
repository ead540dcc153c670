package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/lease"
)

func TestTypedErrors(t *testing.T) {
	srvClock := lease.NewFakeClock(base)
	c := newClient(t, newServer(t, onClock(srvClock)))
	ctx := context.Background()
	held, err := c.Acquire(ctx, "taken", client.AcquireOptions{Holder: "owner", TTL: 30 * time.Second, DisableKeepAlive: true})
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}

	tests := []struct {
		name     string
		do       func() error
		is       error
		wantHeld *client.HeldError // compared whole
		wantAPI  *client.APIError  // status and code compared; a detail required
	}{
		{"ErrHeld", func() error {
			_, err := c.Acquire(ctx, "taken", client.AcquireOptions{Holder: "other", TTL: time.Second})
			return err
		}, client.ErrLeaseHeld, &client.HeldError{Name: "taken", Holder: "owner",
			ExpiresAt: base.Add(30 * time.Second), AvailableAt: base.Add(30 * time.Second), RetryAfter: 30 * time.Second}, nil},
		{"ErrLostOnUnknownLeaseID", func() error {
			_, err := c.Renew(ctx, "taken", "lk_not-the-id", 0)
			return err
		}, client.ErrLeaseLost, nil, &client.APIError{Status: http.StatusConflict, Code: "lease_lost"}},
		{"ErrNotFound", func() error {
			_, err := c.Get(ctx, "never-used")
			return err
		}, client.ErrNotFound, nil, &client.APIError{Status: http.StatusNotFound, Code: "not_found"}},
		{"ErrInvalidNameCaughtBeforeSending", func() error {
			_, err := c.Acquire(ctx, "bad/name", client.AcquireOptions{Holder: "x", TTL: time.Second})
			return err
		}, client.ErrInvalid, nil, nil},
		{"ErrInvalidHolderCaughtBeforeSending", func() error {
			_, err := c.Acquire(ctx, "ok", client.AcquireOptions{Holder: "bell\a", TTL: time.Second})
			return err
		}, client.ErrInvalid, nil, nil},
		{"ErrInvalidTTLFromServer", func() error {
			_, err := c.Acquire(ctx, "ok", client.AcquireOptions{Holder: "x", TTL: 2 * time.Hour})
			return err
		}, client.ErrInvalid, nil, &client.APIError{Status: http.StatusBadRequest, Code: "invalid_request"}},
		{"ErrTTLNotAboveMargin", func() error {
			c := newClient(t, c.BaseURL(), client.WithSafetyMargin(2*time.Second))
			_, err := c.Acquire(ctx, "ok", client.AcquireOptions{Holder: "x", TTL: 2 * time.Second})
			return err
		}, client.ErrInvalid, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			if err == nil {
				t.Fatal("err = nil, want an error")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want errors.Is %v", err, tt.is)
			}
			if tt.wantHeld != nil {
				var got *client.HeldError
				if !errors.As(err, &got) {
					t.Fatalf("err = %T %v, want a *HeldError", err, err)
				}
				if diff := cmp.Diff(tt.wantHeld, got); diff != "" {
					t.Errorf("HeldError (-want +got):\n%s", diff)
				}
			}
			if tt.wantAPI != nil {
				var got *client.APIError
				if !errors.As(err, &got) {
					t.Fatalf("err = %T %v, want an *APIError", err, err)
				}
				if got.Status != tt.wantAPI.Status || got.Code != tt.wantAPI.Code || got.Detail == "" {
					t.Errorf("APIError = %+v, want status %d code %q with a detail", got, tt.wantAPI.Status, tt.wantAPI.Code)
				}
			}
		})
	}
	if err := held.Release(ctx); err != nil {
		t.Errorf("Release = %v", err)
	}
}

func TestNewRejectsBadURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://x", "http://"} {
		if _, err := client.New(u); err == nil {
			t.Errorf("New(%q) = nil error, want one", u)
		}
	}
}

func TestListAndGet(t *testing.T) {
	c := newClient(t, newServer(t, onClock(lease.NewFakeClock(base))))
	ctx := context.Background()
	for _, n := range []string{"a-1", "a-2", "b-1"} {
		l, err := c.Acquire(ctx, n, client.AcquireOptions{Holder: "h-" + n, TTL: time.Minute, DisableKeepAlive: true, Metadata: map[string]any{"n": n}})
		if err != nil {
			t.Fatalf("Acquire(%q) = %v", n, err)
		}
		if n == "a-2" {
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release = %v", err)
			}
		}
	}
	page, err := c.List(ctx, client.ListOptions{Prefix: "a-"})
	if err != nil {
		t.Fatalf("List = %v", err)
	}
	type row struct {
		Name, Holder string
		Held         bool
		Meta         any
	}
	var got []row
	for _, s := range page.Leases {
		got = append(got, row{s.Name, s.Holder, s.Held, s.Metadata["n"]})
	}
	want := []row{{"a-1", "h-a-1", true, "a-1"}, {"a-2", "h-a-2", false, "a-2"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List(prefix a-) (-want +got):\n%s", diff)
	}
	held, err := c.List(ctx, client.ListOptions{State: "held", Limit: 1})
	if err != nil {
		t.Fatalf("List held = %v", err)
	}
	if len(held.Leases) != 1 || held.NextCursor == "" {
		t.Errorf("List(held, limit 1) = %d leases, cursor %q; want 1 and a cursor", len(held.Leases), held.NextCursor)
	}
}

// TestAcquireDefaults acquires with zero options: DefaultTTL, and this host and process as
// the holder.
func TestAcquireDefaults(t *testing.T) {
	c := newClient(t, newServer(t, onClock(lease.NewFakeClock(base))))
	ctx := context.Background()
	l, err := c.Acquire(ctx, "job", client.AcquireOptions{DisableKeepAlive: true})
	if err != nil {
		t.Fatalf("Acquire with zero options = %v", err)
	}
	host, _ := os.Hostname()
	want := fmt.Sprintf("%s (pid %d)", host, os.Getpid())
	if diff := cmp.Diff([]any{client.DefaultTTL, want}, []any{l.TTL(), l.Holder()}); diff != "" {
		t.Errorf("TTL and holder (-want +got):\n%s", diff)
	}
}

// TestErrorsSayWhatWasTried checks an error never retried names no attempt, and one
// retried until giving up says how often, and matches ErrUnavailable.
func TestErrorsSayWhatWasTried(t *testing.T) {
	c := newClient(t, newServer(t))
	ctx := context.Background()
	_, err := c.Acquire(ctx, "job", client.AcquireOptions{TTL: 2 * time.Hour})
	if err == nil || strings.Contains(err.Error(), "attempt") {
		t.Errorf("Acquire(ttl above the bound) = %v, want an error that names no attempt", err)
	}

	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	c = newClient(t, down.URL, client.WithAcquireAttempts(2))
	_, err = c.Acquire(ctx, "job", client.AcquireOptions{})
	if !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "after 2 attempts") {
		t.Errorf("Acquire from a server that is down = %v, want ErrUnavailable after 2 attempts", err)
	}
	if _, err := c.Get(ctx, "job"); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("Get from a server that is down = %v, want ErrUnavailable", err)
	}
}
