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
	if _, err := c.PutResource(ctx, "ledger", 7, "", "text/plain", []byte("seven")); err != nil {
		t.Fatalf("PutResource(7) = %v", err)
	}
	_, err := c.PutResource(ctx, "ledger", 6, "", "text/plain", []byte("six"))
	if !errors.Is(err, fence.ErrStaleToken) || !errors.Is(err, client.ErrStaleToken) {
		t.Errorf("PutResource(6) = %v, want fence.ErrStaleToken", err)
	}
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) {
		t.Fatalf("PutResource(6) = %T, want a *fence.StaleTokenError", err)
	}
	if diff := cmp.Diff([]int64{6, 7}, []int64{stale.PresentedToken, stale.CurrentFence}); diff != "" {
		t.Errorf("presented and current fence (-want +got):\n%s", diff)
	}
	l, err := c.Acquire(ctx, "billing", client.AcquireOptions{Holder: "a", TTL: time.Minute, DisableKeepAlive: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.PutResource(ctx, "ledger", l.Token()-1, "billing", "text/plain", []byte("not the lease's token"))
	if !errors.As(err, &stale) || stale.Lease != "billing" {
		t.Errorf("PutResource with Lease-Name = %v, want a StaleTokenError naming the lease", err)
	}
}
