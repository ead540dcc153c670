package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/html"

	"github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// dashT0 is where the fake clock of the dashboard tests starts.
var dashT0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// dashServer is a whole leasekeeper HTTP server over a SQLite file in a temporary folder,
// reached over real HTTP. Requests never follow redirects, so tests see the 303 of a revoke.
type dashServer struct {
	t     *testing.T
	url   string
	clock *lease.FakeClock // nil when the server runs on the real clock
	store *sqlite.Store
	hc    *http.Client // sends key
	key   string       // an admin API key
}

// newDashServer starts a server on a fake clock, without waiting line or watch stream: for
// tests of what the pages render.
func newDashServer(t *testing.T) *dashServer {
	t.Helper()
	return newDashServerAt(t, filepath.Join(t.TempDir(), "leasekeeper.db"))
}

// newDashServerAt is newDashServer with its database at path.
func newDashServerAt(t *testing.T, path string) *dashServer {
	t.Helper()
	return newDashServerWith(t, path, nil)
}

// newDashServerWith is newDashServerAt with changes to the handler's configuration.
func newDashServerWith(t *testing.T, path string, change func(*handlers.Config)) *dashServer {
	t.Helper()
	clock := lease.NewFakeClock(dashT0)
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{Clock: clock})
	if err != nil {
		t.Fatalf("sqlite.Open(%s) = %v", path, err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := handlers.Config{Store: st, Clock: clock, Limits: lease.DefaultLimits(),
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler), Spec: leasekeeper.OpenAPI(), Version: "test"}
	if change != nil {
		change(&cfg)
	}
	h, err := handlers.New(cfg)
	if err != nil {
		t.Fatalf("handlers.New() = %v", err)
	}
	return dashServe(t, h, st, clock)
}

// newDashLiveServer starts a server assembled as `leasekeeper serve` assembles it (service.New:
// the real anchored clock, the expiry sweeper, the waiting line and the watch hub, all fed by
// the store's commit hook). The browser tests use it, since live updates need the watch stream.
func newDashLiveServer(t *testing.T) *dashServer {
	t.Helper()
	s, _ := newServiceServer(t, nil, nil)
	return s
}

// newServiceServer is newDashLiveServer on clock (nil: the real anchored one) with the metrics
// on reg (nil: a registry of its own); it also returns the service.
func newServiceServer(t *testing.T, clock *lease.FakeClock, reg *prometheus.Registry) (*dashServer, *service.Service) {
	t.Helper()
	svc, st := newService(t, clock, reg)
	return dashServe(t, svc.Handler, st, clock), svc
}

// newDashLiveHandler is the handler of newDashLiveServer and its store, for tests that serve
// it themselves.
func newDashLiveHandler(t *testing.T) (http.Handler, *sqlite.Store) {
	t.Helper()
	svc, st := newService(t, nil, nil)
	return svc.Handler, st
}

// newService assembles a running service as `leasekeeper serve` does, on a store of its own.
func newService(t *testing.T, clock *lease.FakeClock, reg *prometheus.Registry) (*service.Service, *sqlite.Store) {
	t.Helper()
	return newServiceAt(t, clock, reg, filepath.Join(t.TempDir(), "leasekeeper.db"))
}

// newServiceAt is newService on the database at path.
func newServiceAt(t *testing.T, clock *lease.FakeClock, reg *prometheus.Registry, path string) (*service.Service, *sqlite.Store) {
	t.Helper()
	var hooks service.Hooks
	opts := sqlite.Options{OnCommit: hooks.Publish}
	if clock != nil {
		opts.Clock = clock
	}
	st, err := sqlite.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("sqlite.Open(%s) = %v", path, err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := service.New(st, &hooks, service.Config{Retention: store.Retention{Age: time.Hour}, Version: "test", Registry: reg})
	if err != nil {
		t.Fatalf("service.New() = %v", err)
	}
	bg, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { svc.Run(bg) })
	t.Cleanup(func() { stop(); wg.Wait() })
	return svc, st
}

// dashServe serves h on a local port until the test ends. Watch streams are long requests:
// their context ends with the test, so closing the server does not wait for them.
func dashServe(t *testing.T, h http.Handler, st *sqlite.Store, clock *lease.FakeClock) *dashServer {
	t.Helper()
	base, cancel := context.WithCancel(context.Background())
	srv := httptest.NewUnstartedServer(h)
	srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	srv.Start()
	t.Cleanup(func() {
		cancel()
		srv.CloseClientConnections()
		srv.Close()
	})
	key := servicetest.AdminKey(t, st)
	hc := &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     servicetest.BearerTransport{Key: key},
	}
	return &dashServer{t: t, url: srv.URL, clock: clock, store: st, hc: hc, key: key}
}

// do sends a request and returns the response with its body read.
func (s *dashServer) do(method, path string, body io.Reader, header map[string]string) (*http.Response, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, body)
	if err != nil {
		s.t.Fatalf("NewRequest(%s %s) = %v", method, path, err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s = %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp, string(b)
}

// page GETs a dashboard page as a browser would and fails the test unless it answers want
// with an HTML document; it returns the parsed document.
func (s *dashServer) page(path string, want int, header map[string]string) (*http.Response, *html.Node) {
	s.t.Helper()
	h := map[string]string{"Accept": "text/html,application/xhtml+xml"}
	for k, v := range header {
		h[k] = v
	}
	resp, body := s.do(http.MethodGet, path, nil, h)
	if resp.StatusCode != want {
		s.t.Fatalf("GET %s = %d, want %d; body:\n%s", path, resp.StatusCode, want, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		s.t.Errorf("GET %s Content-Type = %q, want text/html", path, ct)
	}
	return resp, dashParse(s.t, body)
}

// dashLease is what acquire answers that the tests need.
type dashLease struct {
	LeaseID string `json:"lease_id"`
	Token   int64  `json:"token"`
	Holder  string `json:"holder"`
}

// acquire takes a lease through the JSON API; metadata is a JSON object or empty.
func (s *dashServer) acquire(name, holder string, ttl time.Duration, metadata string) dashLease {
	s.t.Helper()
	req := map[string]any{"holder": holder, "ttl_ms": ttl.Milliseconds()}
	if metadata != "" {
		req["metadata"] = json.RawMessage(metadata)
	}
	return s.acquireWith(name, req)
}

// acquireWith takes a lease with the given acquire request body.
func (s *dashServer) acquireWith(name string, req map[string]any) dashLease {
	s.t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, body := s.do(http.MethodPost, "/v1/leases/"+url.PathEscape(name)+"/acquire", bytes.NewReader(b),
		map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("acquire %s = %d %s, want 200", name, resp.StatusCode, body)
	}
	var l dashLease
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		s.t.Fatalf("acquire %s: %v in %s", name, err, body)
	}
	return l
}

// release releases a lease through the JSON API.
func (s *dashServer) release(name string, l dashLease) {
	s.t.Helper()
	b, _ := json.Marshal(map[string]string{"lease_id": l.LeaseID})
	resp, body := s.do(http.MethodPost, "/v1/leases/"+url.PathEscape(name)+"/release", bytes.NewReader(b),
		map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != http.StatusNoContent {
		s.t.Fatalf("release %s = %d %s, want 204", name, resp.StatusCode, body)
	}
}

// put makes a fenced write and returns the status; header adds request headers such as
// Lease-Name or User-Agent.
func (s *dashServer) put(resource string, token int64, value string, header map[string]string) int {
	s.t.Helper()
	h := map[string]string{"Fencing-Token": strconv.FormatInt(token, 10), "Content-Type": "text/plain"}
	for k, v := range header {
		h[k] = v
	}
	resp, _ := s.do(http.MethodPut, "/v1/resources/"+url.PathEscape(resource), strings.NewReader(value), h)
	return resp.StatusCode
}

// dashState is a lease's state as GET /v1/leases/{name} answers it.
type dashState struct {
	Held   bool   `json:"held"`
	Holder string `json:"holder"`
	Token  int64  `json:"token"`
}

func (s *dashServer) state(name string) dashState {
	s.t.Helper()
	resp, body := s.do(http.MethodGet, "/v1/leases/"+url.PathEscape(name), nil, nil)
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("GET /v1/leases/%s = %d %s, want 200", name, resp.StatusCode, body)
	}
	var st dashState
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		s.t.Fatalf("GET /v1/leases/%s: %v in %s", name, err, body)
	}
	return st
}

// eventTypes lists the types of a name's events, oldest first.
func (s *dashServer) eventTypes(name string) []string {
	s.t.Helper()
	resp, body := s.do(http.MethodGet, "/v1/leases/"+url.PathEscape(name)+"/events?limit=1000", nil, nil)
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("GET events of %s = %d %s, want 200", name, resp.StatusCode, body)
	}
	var out struct {
		Events []struct {
			Type string `json:"type"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		s.t.Fatalf("events of %s: %v in %s", name, err, body)
	}
	var types []string
	for _, e := range out.Events {
		types = append(types, e.Type)
	}
	return types
}

func dashParse(t *testing.T, body string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse HTML: %v", err)
	}
	return doc
}

// dashFind returns the elements under n, n included, for which match is true, in document order.
func dashFind(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func dashByTestID(n *html.Node, id string) []*html.Node {
	return dashFind(n, func(n *html.Node) bool { return dashAttr(n, "data-testid") == id })
}

// dashOne returns the first element with the data-testid and fails the test if there is none.
func dashOne(t *testing.T, n *html.Node, id string) *html.Node {
	t.Helper()
	els := dashByTestID(n, id)
	if len(els) == 0 {
		t.Fatalf("no element with data-testid=%q in:\n%s", id, dashHTML(n))
	}
	return els[0]
}

func dashAttr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func dashHasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// dashText is the text under n with runs of white space made one space.
func dashText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

func dashTexts(els []*html.Node) []string {
	var out []string
	for _, e := range els {
		out = append(out, dashText(e))
	}
	return out
}

func dashHTML(n *html.Node) string {
	var b strings.Builder
	html.Render(&b, n)
	return b.String()
}
