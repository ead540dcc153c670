package main

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
)

// TestLongRequestsOutliveBodyTimeout: the body timeout bounds how long a body takes to arrive,
// not how long a request lasts. A waiting acquire and a watch stream run on well past it.
func TestLongRequestsOutliveBodyTimeout(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { testLongRequestsOutliveBodyTimeout(t, b.args(t)) })
	}
}

func testLongRequestsOutliveBodyTimeout(t *testing.T, db []string) {
	s := serveInProcess(t, nil, append([]string{"--addr", "127.0.0.1:0", "--body-timeout", "300ms"}, db...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/v1/watch?prefix=job", nil)
	watch, err := s.hc.Do(req)
	if err != nil || watch.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/watch = %v, %v", watch, err)
	}
	defer watch.Body.Close()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(watch.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	if a, err := s.c.AcquireLeaseWithResponse(ctx, "job", nil, api.AcquireRequest{Holder: "w1", TtlMs: 1000}); err != nil || a.JSON200 == nil {
		t.Fatalf("AcquireLease(w1) = %v, %v", a.Status(), err)
	}
	start := time.Now()
	b, err := s.c.AcquireLeaseWithResponse(ctx, "job", nil, api.AcquireRequest{Holder: "w2", TtlMs: 1000, WaitMs: ptrTo[int64](5000)})
	if err != nil || b.JSON200 == nil {
		t.Fatalf("AcquireLease(w2, waiting) after %v = %v %s, %v; want granted when w1's lease expires", time.Since(start), b.Status(), b.Body, err)
	}
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Fatalf("the waiting acquire answered after %v; the test needs it to outlive the 300 ms body timeout", waited)
	}
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the watch stream ended before it showed w2's grant")
			}
			if strings.HasPrefix(l, "data:") && strings.Contains(l, `"holder":"w2"`) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("the watch stream did not show w2's grant")
		}
	}
}
