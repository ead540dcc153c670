package client_test

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
	"github.com/leasekeeper/leasekeeper/watch"
)

// base is where fake clocks start: a whole millisecond, as the server stores times.
var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// serverOptions shape the server newServer starts.
type serverOptions struct {
	clock  lease.Clock
	noLine bool
	limits lease.Limits
}

// serverOption is one choice of newServer.
type serverOption func(*serverOptions)

// onClock runs the server on clk instead of the real anchored clock.
func onClock(clk lease.Clock) serverOption { return func(o *serverOptions) { o.clock = clk } }

// withoutLine serves the bare handlers, as an embedding without the service would: no
// waiting line (wait_ms is refused with waiting_unsupported) and no watch stream.
func withoutLine() serverOption { return func(o *serverOptions) { o.noLine = true } }

// withLimits sets the server's bounds on what clients ask.
func withLimits(l lease.Limits) serverOption { return func(o *serverOptions) { o.limits = l } }

// keys maps the host of each server (or proxy) the tests start to the admin key it takes,
// so that newClient can send it knowing only the URL.
var keys sync.Map

// keyOf returns the API key of the server at rawURL, "" for a server the tests did not start.
func keyOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	k, _ := keys.Load(u.Host)
	s, _ := k.(string)
	return s
}

// newServer starts a real leasekeeper (SQLite in a temp dir), by default assembled as
// `leasekeeper serve` assembles it (waiting line, watch stream, expiry sweeper), requiring
// API keys, and returns its URL; newClient sends its admin key. The server stops when the
// test ends.
func newServer(t *testing.T, opts ...serverOption) string {
	t.Helper()
	o := serverOptions{limits: lease.DefaultLimits()}
	for _, opt := range opts {
		opt(&o)
	}
	srvURL, key, stop, err := startServer(t.TempDir(), o)
	if err != nil {
		t.Fatalf("start a server: %v", err)
	}
	t.Cleanup(stop)
	remember(t, srvURL, key)
	return srvURL
}

// remember makes newClient send key to the server at rawURL until the test ends.
func remember(t *testing.T, rawURL, key string) {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	keys.Store(u.Host, key)
	t.Cleanup(func() { keys.Delete(u.Host) })
}

// exampleServer starts a leasekeeper for a runnable example and returns its URL, an API key
// it accepts, and how to stop it.
func exampleServer() (string, string, func()) {
	dir, err := os.MkdirTemp("", "leasekeeper-example")
	if err != nil {
		log.Fatal(err)
	}
	srvURL, key, stop, err := startServer(dir, serverOptions{limits: lease.DefaultLimits()})
	if err != nil {
		log.Fatal(err)
	}
	return srvURL, key, func() { stop(); os.RemoveAll(dir) }
}

// startServer starts a leasekeeper over SQLite in dir, with an admin API key, and returns
// its URL, the key, and how to stop it. It is the only place the client's tests and
// examples build a server.
func startServer(dir string, o serverOptions) (srvURL, key string, stop func(), err error) {
	var hooks service.Hooks
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "lk.db"), sqlite.Options{Clock: o.clock, OnCommit: hooks.Publish})
	if err != nil {
		return "", "", nil, err
	}
	key = auth.NewSecret()
	admin := auth.Key{ID: auth.NewKeyID(), Label: "client tests", Role: auth.Admin}
	if _, err := st.CreateKey(context.Background(), admin, auth.Hash(key), false); err != nil {
		st.Close()
		return "", "", nil, err
	}
	if o.noLine {
		h, err := handlers.New(handlers.Config{Store: st, Clock: st.Clock(), Limits: o.limits,
			Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler), Spec: leasekeeper.OpenAPI()})
		if err != nil {
			st.Close()
			return "", "", nil, err
		}
		srv := httptest.NewServer(h)
		return srv.URL, key, func() { srv.Close(); st.Close() }, nil
	}
	svc, err := service.New(st, &hooks, service.Config{Limits: o.limits, Watch: watch.Options{Heartbeat: time.Second}})
	if err != nil {
		st.Close()
		return "", "", nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	srv := httptest.NewServer(svc.Handler)
	// In reverse order of construction: the long requests, the server, the loops, the store.
	return srv.URL, key, func() { svc.Drain(); srv.Close(); cancel(); <-done; st.Close() }, nil
}

// newClient returns a client of url with opts.
func newClient(t *testing.T, url string, opts ...client.Option) *client.Client {
	t.Helper()
	if key := keyOf(url); key != "" {
		opts = append([]client.Option{client.WithAPIKey(key)}, opts...)
	}
	c, err := client.New(url, opts...)
	if err != nil {
		t.Fatalf("client.New(%q): %v", url, err)
	}
	t.Cleanup(func() { c.Close() }) // before the server closes: cleanups run last first
	return c
}

// proxy forwards to a server and can fail like a network: with failing set, every request's
// connection is cut before an answer. before runs ahead of forwarding; dropAnswer, when it
// returns true for a request, forwards it and then cuts the connection instead of answering.
type proxy struct {
	URL        string
	failing    atomic.Bool
	before     func(r *http.Request)
	dropAnswer func(r *http.Request) bool

	streams atomic.Int32 // watch streams open through the proxy now

	mu   sync.Mutex
	seen map[string][]string // path -> Idempotency-Key of each request (or "" )
	ok   map[string]int      // path -> requests answered 2xx
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{seen: map[string][]string{}, ok: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // cut connections are the point
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen[r.URL.Path] = append(p.seen[r.URL.Path], r.Header.Get("Idempotency-Key"))
		p.mu.Unlock()
		if r.URL.Path == "/v1/watch" {
			p.streams.Add(1)
			defer p.streams.Add(-1)
		}
		if p.failing.Load() {
			panic(http.ErrAbortHandler) // the connection drops: a network error to the client
		}
		if p.before != nil {
			p.before(r)
		}
		if p.dropAnswer != nil && p.dropAnswer(r) {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			panic(http.ErrAbortHandler)
		}
		rec := &statusRecorder{ResponseWriter: w}
		rp.ServeHTTP(rec, r)
		if rec.status/100 == 2 {
			p.mu.Lock()
			p.ok[r.URL.Path]++
			p.mu.Unlock()
		}
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	remember(t, p.URL, keyOf(target))
	return p
}

// requests returns the Idempotency-Keys of the requests seen on path.
func (p *proxy) requests(path string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen[path]...)
}

// succeeded returns how many requests on path were answered 2xx.
func (p *proxy) succeeded(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok[path]
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets the reverse proxy flush event streams through the recorder.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// fakeClock is a client.Clock that moves only when told. Timers due after Advance run in
// Advance's goroutine, in deadline order, before it returns.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	when    time.Time
	f       func()
	stopped bool
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) client.Timer {
	c.mu.Lock()
	t := &fakeTimer{c: c, when: c.now.Add(d), f: f}
	due := d <= 0
	if !due {
		c.timers = append(c.timers, t)
	}
	c.mu.Unlock()
	if due {
		go f()
	}
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves the clock by d and runs the timers that came due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		sort.Slice(c.timers, func(i, j int) bool { return c.timers[i].when.Before(c.timers[j].when) })
		var next *fakeTimer
		if len(c.timers) > 0 && !c.timers[0].when.After(c.now) {
			next, c.timers = c.timers[0], c.timers[1:]
		}
		if next != nil && next.stopped {
			c.mu.Unlock()
			continue
		}
		if next != nil {
			next.stopped = true
		}
		c.mu.Unlock()
		if next == nil {
			return
		}
		next.f()
	}
}

// pending returns how many timers wait.
func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped {
			n++
		}
	}
	return n
}

// waitDone waits, in real time, up to limit for ctx to end, and fails the test if it does not.
func waitDone(t *testing.T, ctx context.Context, limit time.Duration) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(limit):
		t.Fatalf("the lease context did not end within %v", limit)
	}
}

// eventually polls cond every 5 ms for up to limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// isDone reports whether ctx has ended.
func isDone(ctx context.Context) bool { return ctx.Err() != nil }
