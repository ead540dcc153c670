package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/fence"
)

// TestPutResourceStale checks a write leasekeeper refuses comes back as the fence package's
// error type, so one errors.Is or errors.As covers refusals by leasekeeper and by resources
// of your own.
func TestPutResourceStale(t *testing.T) {
	c := newClient(t, newServer(t))
	ctx := context.Background()
	var tokens []int64 // the server refuses tokens it never issued: take two real ones
	for range 2 {
		l, err := c.Acquire(ctx, "billing", client.AcquireOptions{Holder: "a", TTL: time.Minute, DisableKeepAlive: true})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, l.Token())
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	older, newer := tokens[0], tokens[1]
	info, err := c.PutResource(ctx, "ledger", newer, []byte("newer"), client.PutOptions{ContentType: "text/plain"})
	if err != nil || info.ContentType != "text/plain" || info.Fence != newer {
		t.Fatalf("PutResource(newer) = %+v, %v; want text/plain at fence %d", info, err, newer)
	}
	if info, err := c.PutResource(ctx, "ledger", newer, []byte("raw"), client.PutOptions{}); err != nil || info.ContentType != "application/octet-stream" {
		t.Errorf("PutResource without a content type = %+v, %v; want application/octet-stream", info, err)
	}
	_, err = c.PutResource(ctx, "ledger", older, []byte("older"), client.PutOptions{})
	if !errors.Is(err, fence.ErrStaleToken) || !errors.Is(err, client.ErrStaleToken) {
		t.Errorf("PutResource(older) = %v, want fence.ErrStaleToken", err)
	}
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) {
		t.Fatalf("PutResource(older) = %T, want a *fence.StaleTokenError", err)
	}
	if diff := cmp.Diff([]int64{older, newer}, []int64{stale.PresentedToken, stale.CurrentFence}); diff != "" {
		t.Errorf("presented and current fence (-want +got):\n%s", diff)
	}
	_, err = c.PutResource(ctx, "ledger", older, []byte("with the lease's name"), client.PutOptions{Lease: "billing"})
	if !errors.As(err, &stale) || stale.Lease != "billing" {
		t.Errorf("PutResource with Lease-Name = %v, want a StaleTokenError naming the lease", err)
	}
}
