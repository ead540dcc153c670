package service_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leasekeeper/leasekeeper/queue"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

func newService(t *testing.T, reg *prometheus.Registry) *httptest.Server {
	t.Helper()
	return newServiceWith(t, service.Config{Registry: reg})
}

func newServiceWith(t *testing.T, cfg service.Config) *httptest.Server {
	t.Helper()
	srv, _ := servicetest.Start(t, cfg, sqlite.Options{})
	return srv
}

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := servicetest.Client().Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

// answer is the status and body of a request.
type answer struct {
	code int
	body map[string]any
}

// mustAcquire acquires name for holder for a minute.
func mustAcquire(t *testing.T, url, name, holder string) map[string]any {
	t.Helper()
	code, b := post(t, url+"/v1/leases/"+name+"/acquire", `{"holder":"`+holder+`","ttl_ms":60000}`)
	if code != 200 {
		t.Fatalf("acquire %s = %d %v", name, code, b)
	}
	return b
}

// TestWiring checks that the commit hook reaches every part: a release wakes a waiter through
// the line, the waiter gauge moves, and the metrics pass the linter.
func TestWiring(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv := newService(t, reg)
	first := mustAcquire(t, srv.URL, "job", "a")
	waited := make(chan answer, 1)
	go func() {
		c, b := post(t, srv.URL+"/v1/leases/job/acquire", `{"holder":"b","ttl_ms":60000,"wait_ms":10000}`)
		waited <- answer{c, b}
	}()
	oneWaiter := "# HELP leasekeeper_waiters Acquire requests waiting in line.\n# TYPE leasekeeper_waiters gauge\nleasekeeper_waiters 1\n"
	for deadline := time.Now().Add(5 * time.Second); testutil.GatherAndCompare(reg, strings.NewReader(oneWaiter), "leasekeeper_waiters") != nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never showed in leasekeeper_waiters")
		}
	}
	if code, b := post(t, srv.URL+"/v1/leases/job/release", `{"lease_id":"`+first["lease_id"].(string)+`"}`); code != 204 {
		t.Fatalf("release = %d %v", code, b)
	}
	select {
	case r := <-waited:
		if r.code != 200 || r.body["holder"] != "b" {
			t.Errorf("waiter = %d %v, want b granted on release", r.code, r.body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken by the release")
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	for _, name := range []string{"leasekeeper_store_commit_seconds", "leasekeeper_store_batch_operations", "leasekeeper_store_queue_depth"} {
		if !have[name] {
			t.Errorf("metric %s is not registered", name)
		}
	}
}

// waiters reads the waiters count of a lease.
func waiters(t *testing.T, url, name string) float64 {
	t.Helper()
	n, _ := getState(t, url, name)["waiters"].(float64)
	return n
}

func waitWaiters(t *testing.T, url, name string, want float64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); waiters(t, url, name) != want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waiters of %s never became %v (now %v)", name, want, waiters(t, url, name))
		}
	}
}

// TestWaitingOverHTTP: a full line answers 429 too_many_waiters with Retry-After, and a
// waiter whose client goes away leaves the line and is never granted the lease.
func TestWaitingOverHTTP(t *testing.T) {
	srv := newServiceWith(t, service.Config{Queue: queue.Limits{PerName: 1, Total: 10}})
	if code, b := post(t, srv.URL+"/v1/leases/job/acquire", `{"holder":"a","ttl_ms":60000}`); code != 200 {
		t.Fatalf("acquire = %d %v", code, b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/leases/job/acquire",
			strings.NewReader(`{"holder":"gone","ttl_ms":60000,"wait_ms":60000}`))
		_, err := servicetest.Client().Do(req)
		done <- err
	}()
	waitWaiters(t, srv.URL, "job", 1)

	resp, err := servicetest.Client().Post(srv.URL+"/v1/leases/job/acquire", "application/json", strings.NewReader(`{"holder":"b","ttl_ms":60000,"wait_ms":1000}`))
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || p["code"] != "too_many_waiters" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("acquire with a full line = %d %v (Retry-After %q), want 429 too_many_waiters with Retry-After",
			resp.StatusCode, p, resp.Header.Get("Retry-After"))
	}

	cancel() // the waiting client disconnects
	<-done
	waitWaiters(t, srv.URL, "job", 0)
	resp, err = servicetest.Client().Get(srv.URL + "/v1/leases/job/events")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), `"gone"`) {
		t.Errorf("events = %s: the departed waiter was granted the lease", b)
	}
}
