package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
)

// TestSemaphore: with Limit 2, two holders hold at once, each its own slot and token; a third
// is held off; another limit is limit_mismatch; the state shows both slots.
func TestSemaphore(t *testing.T) {
	c := newClient(t, newServer(t))
	ctx := context.Background()
	a, err := c.Acquire(ctx, "pool", client.AcquireOptions{Holder: "a", TTL: time.Minute, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	b, err := c.Acquire(ctx, "pool", client.AcquireOptions{Holder: "b", TTL: time.Minute, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx)
	if a.Slot() != 0 || b.Slot() != 1 || b.Token() <= a.Token() || a.ID() == b.ID() {
		t.Errorf("slots %d, %d tokens %d, %d; want slots 0 and 1, each its own lease", a.Slot(), b.Slot(), a.Token(), b.Token())
	}
	if _, err := c.Acquire(ctx, "pool", client.AcquireOptions{Holder: "c", TTL: time.Minute, Limit: 2}); !errors.Is(err, client.ErrLeaseHeld) {
		t.Errorf("third Acquire = %v, want ErrLeaseHeld", err)
	}
	var ae *client.APIError
	if _, err := c.Acquire(ctx, "pool", client.AcquireOptions{Holder: "c", TTL: time.Minute, Limit: 3}); !errors.As(err, &ae) || ae.Code != client.CodeLimitMismatch {
		t.Errorf("Acquire with another limit = %v, want limit_mismatch", err)
	}
	st, err := c.Get(ctx, "pool")
	if err != nil || st.Limit != 2 || len(st.Slots) != 2 || !st.Held {
		t.Errorf("Get = %+v, %v; want a full semaphore of 2", st, err)
	}
	if err := a.Renew(ctx); err != nil {
		t.Errorf("Renew(slot 0) = %v", err)
	}
}
