package service_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

func newService(t *testing.T, reg *prometheus.Registry) *httptest.Server {
	t.Helper()
	var hooks service.Hooks
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"), sqlite.Options{OnCommit: hooks.Publish})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := service.New(st, &hooks, service.Config{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	srv := httptest.NewServer(svc.Handler)
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

// TestWiring checks that the commit hook reaches every part: a release wakes a waiter through
// the line, the waiter gauge moves, and the metrics pass the linter.
func TestWiring(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv := newService(t, reg)
	code, first := post(t, srv.URL+"/v1/leases/job/acquire", `{"holder":"a","ttl_ms":60000}`)
	if code != 200 {
		t.Fatalf("acquire = %d %v", code, first)
	}
	type res struct {
		code int
		body map[string]any
	}
	waited := make(chan res, 1)
	go func() {
		c, b := post(t, srv.URL+"/v1/leases/job/acquire", `{"holder":"b","ttl_ms":60000,"wait_ms":10000}`)
		waited <- res{c, b}
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
}
