package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/metrics"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// t0 is where every test server's fake clock starts.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// env is one test server: the whole HTTP handler over a real SQLite file and a fake clock,
// reached through the generated client.
type env struct {
	t       testing.TB
	ctx     context.Context
	url     string
	c       *api.ClientWithResponses
	clock   *lease.FakeClock
	store   *sqlite.Store
	reg     *prometheus.Registry
	handler http.Handler
	key     string       // an admin API key
	hc      *http.Client // sends key
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, nil)
}

// newEnvWith is newEnv with changes to the handler's configuration (a logger, an acquirer, a
// body timeout); the store is cfg.Store, already open.
func newEnvWith(t testing.TB, change func(cfg *handlers.Config)) *env {
	t.Helper()
	return newEnvStore(t, sqlite.Options{}, change)
}

// newEnvStore is newEnvWith with options of the store (its clock and commit hook are set).
func newEnvStore(t testing.TB, opts sqlite.Options, change func(cfg *handlers.Config)) *env {
	t.Helper()
	clock := lease.NewFakeClock(t0)
	var meters atomic.Pointer[metrics.Metrics]
	path := filepath.Join(t.TempDir(), "leasekeeper.db")
	opts.Clock = clock
	opts.OnCommit = func(evs []lease.Event) {
		if m := meters.Load(); m != nil {
			m.ObserveEvents(evs)
		}
	}
	st, err := sqlite.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("sqlite.Open(%s) = %v", path, err)
	}
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, st)
	meters.Store(m)
	cfg := handlers.Config{Store: st, Clock: clock, Limits: lease.DefaultLimits(), Registry: reg,
		Metrics: m, Logger: slog.New(slog.DiscardHandler), Spec: leasekeeper.OpenAPI()}
	if change != nil {
		change(&cfg)
	}
	h, err := handlers.New(cfg)
	if err != nil {
		t.Fatalf("handlers.New() = %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	key := servicetest.AdminKey(t, st)
	hc := servicetest.Bearer(key)
	c, err := api.NewClientWithResponses(srv.URL, api.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: context.Background(), url: srv.URL, c: c, clock: clock, store: st, reg: reg, handler: h, key: key, hc: hc}
}

func ptr[T any](v T) *T { return &v }

// acquire takes a lease through the client and fails the test unless it is granted.
func (e *env) acquire(name, holder string, ttl time.Duration) api.Lease {
	e.t.Helper()
	r, err := e.c.AcquireLeaseWithResponse(e.ctx, name, nil, api.AcquireRequest{Holder: holder, TtlMs: ttl.Milliseconds()})
	if err != nil || r.JSON200 == nil {
		e.t.Fatalf("AcquireLease(%q, %q) = %v, %v; want 200", name, holder, status(r), err)
	}
	return *r.JSON200
}

// events reads all of a name's events through the client, following cursors.
func (e *env) events(name string) []api.Event {
	e.t.Helper()
	var out []api.Event
	var cursor *string
	for range 1000 {
		r, err := e.c.ListLeaseEventsWithResponse(e.ctx, name, &api.ListLeaseEventsParams{Limit: ptr(1000), Cursor: cursor})
		if err != nil || r.JSON200 == nil {
			e.t.Fatalf("ListLeaseEvents(%q) = %v, %v", name, status(r), err)
		}
		out = append(out, r.JSON200.Events...)
		if r.JSON200.NextCursor == "" {
			return out
		}
		cursor = ptr(r.JSON200.NextCursor)
	}
	e.t.Fatalf("ListLeaseEvents(%q): cursors never end", name)
	return nil
}

func (e *env) state(name string) api.LeaseState {
	e.t.Helper()
	r, err := e.c.GetLeaseWithResponse(e.ctx, name)
	if err != nil || r.JSON200 == nil {
		e.t.Fatalf("GetLease(%q) = %v, %v; want 200", name, status(r), err)
	}
	return *r.JSON200
}

// status describes a generated response for failure messages.
func status(r interface{ Status() string }) string {
	if r == nil || reflect.ValueOf(r).IsNil() {
		return "no response"
	}
	return r.Status()
}

// wantProblem checks that an HTTP answer is an RFC 9457 problem with the status and code.
func wantProblem(t *testing.T, what string, resp *http.Response, body []byte, wantStatus int, code api.ProblemCode) api.Problem {
	t.Helper()
	if resp.StatusCode != wantStatus {
		t.Fatalf("%s = %d %s, want %d %s", what, resp.StatusCode, body, wantStatus, code)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("%s Content-Type = %q, want application/problem+json", what, ct)
	}
	var p api.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("%s body %q: %v", what, body, err)
	}
	if p.Code != code || p.Status != wantStatus || p.Type == "" || p.Title == "" {
		t.Errorf("%s problem = code %q status %d type %q title %q, want code %q status %d", what, p.Code, p.Status, p.Type, p.Title, code, wantStatus)
	}
	return p
}

// do sends a raw request and returns the response and its body.
func (e *env) do(method, path string, body io.Reader, header map[string]string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, method, e.url+path, body)
	if err != nil {
		e.t.Fatalf("NewRequest(%s %s) = %v", method, path, err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s = %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp, b
}
