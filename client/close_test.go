package client_test

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
)

// settled waits until no goroutine runs the client's code and the number of goroutines is
// back to at most want, after the connections of tr are closed, and fails the test with a
// dump of the goroutines otherwise.
func settled(t *testing.T, tr *http.Transport, want int) {
	t.Helper()
	tr.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		inClient := strings.Contains(stacks, "leasekeeper/client.") || strings.Contains(stacks, "leasekeeper/client/internal/")
		if !inClient && runtime.NumGoroutine() <= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines (want at most %d as before), client code running: %v:\n%s", runtime.NumGoroutine(), want, inClient, stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCloseStopsBackgroundWork holds a kept-alive, watched lease, an observer and a watch,
// closes the client, and checks every goroutine it started is gone, the lease context ended
// with ErrClosed, the lease was not released, and Acquire is refused afterwards.
func TestCloseStopsBackgroundWork(t *testing.T) {
	url := newServer(t)
	ctx := context.Background()
	tr := &http.Transport{}
	before := runtime.NumGoroutine()

	c := newClient(t, url, client.WithHTTPClient(&http.Client{Transport: tr}))
	l, err := c.Acquire(ctx, "job", client.AcquireOptions{TTL: time.Minute})
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	leaders, err := c.NewElection("leader", client.ElectionOptions{}).Observe(ctx)
	if err != nil {
		t.Fatalf("Observe = %v", err)
	}
	watched := make(chan error, 1)
	go func() { watched <- c.Watch(ctx, "", func(client.Event) error { return nil }) }()
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := <-watched; !errors.Is(err, client.ErrClosed) {
		t.Errorf("Watch after Close = %v, want ErrClosed", err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, client.ErrClosed) {
		t.Errorf("lease context cause after Close = %v, want ErrClosed", cause)
	}
	if _, open := <-leaders; open {
		t.Error("Observe's channel still open after Close")
	}
	if _, err := c.Acquire(ctx, "other", client.AcquireOptions{}); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	settled(t, tr, before)

	st, err := newClient(t, url, client.WithHTTPClient(&http.Client{Transport: tr})).Get(ctx, "job")
	if err != nil || !st.Held {
		t.Fatalf("state after Close = %+v, %v; want still held (Close releases nothing)", st, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release after Close = %v, want the lease given back", err)
	}
	settled(t, tr, before)
}

// TestDoLeavesNoGoroutines runs Do to completion, successfully and with a lost lease, and
// counts goroutines before and after.
func TestDoLeavesNoGoroutines(t *testing.T) {
	url := newServer(t)
	tr := &http.Transport{}
	c := newClient(t, url, client.WithHTTPClient(&http.Client{Transport: tr}))
	admin := newClient(t, url, client.WithHTTPClient(&http.Client{Transport: tr}))
	ctx := context.Background()
	before := runtime.NumGoroutine()
	if err := client.Do(ctx, c, "job", client.AcquireOptions{TTL: time.Minute}, func(context.Context, int64) error { return nil }); err != nil {
		t.Fatalf("Do = %v", err)
	}
	settled(t, tr, before)
	err := client.Do(ctx, c, "job", client.AcquireOptions{TTL: time.Minute}, func(ctx context.Context, _ int64) error {
		if err := admin.Revoke(context.Background(), "job"); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, client.ErrLeaseLost) {
		t.Errorf("Do with a revoke = %v, want ErrLeaseLost", err)
	}
	settled(t, tr, before)
}
