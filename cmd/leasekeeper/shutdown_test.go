package main

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/testwait"
)

// TestShutdownEndsLongRequests: an open watch stream and a request waiting in line do not hold
// a SIGTERM up until the shutdown timeout: the stream ends, the waiter gets 503, and run returns
// nil well before --shutdown-timeout.
func TestShutdownEndsLongRequests(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { testShutdownEndsLongRequests(t, b) })
	}
}

func testShutdownEndsLongRequests(t *testing.T, b backend) {
	s := serveInProcess(t, nil, append([]string{"--addr", "127.0.0.1:0", "--shutdown-timeout", "30s"}, b.args(t)...)...)
	post := func(ctx context.Context, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/leases/job/acquire", strings.NewReader(body))
		return s.hc.Do(req)
	}
	ctx := context.Background()
	if resp, err := post(ctx, `{"holder":"a","ttl_ms":60000}`); err != nil || resp.StatusCode != 200 {
		t.Fatalf("acquire = %v, %v", resp, err)
	}
	stream, err := s.hc.Get(s.url + "/v1/watch")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	streamEnded := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
		}
		close(streamEnded)
	}()
	waiter := make(chan int, 1)
	go func() {
		resp, err := post(ctx, `{"holder":"b","ttl_ms":60000,"wait_ms":120000}`)
		if err != nil {
			waiter <- 0
			return
		}
		resp.Body.Close()
		waiter <- resp.StatusCode
	}()
	waitWaiters(t, s, "job", 1)

	start := time.Now()
	if err := s.shutdown(t); err != nil {
		t.Errorf("run = %v, want nil", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("shutdown took %v with a watcher and a waiter, want far less than the 30 s timeout", d)
	}
	select {
	case <-streamEnded:
	case <-time.After(5 * time.Second):
		t.Error("the watch stream was not ended by the shutdown")
	}
	if code := testwait.Receive(t, waiter, 10*time.Second); code != http.StatusServiceUnavailable {
		t.Errorf("waiter = %d, want 503 (the server is shutting down)", code)
	}
}

// waitWaiters waits until n acquires wait in name's line (the lease state's waiters).
func waitWaiters(t *testing.T, s *served, name string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		r, err := s.c.GetLeaseWithResponse(context.Background(), name)
		if err == nil && r.JSON200 != nil && r.JSON200.Waiters >= n {
			return
		}
	}
	t.Fatalf("fewer than %d waiters in line for %s after 10 s", n, name)
}
