package watch_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/smallbuf"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
	"github.com/leasekeeper/leasekeeper/watch"
)

type fixture struct {
	st  *sqlite.Store
	hub *watch.Hub
	srv *httptest.Server
}

func newFixture(t testing.TB, opts watch.Options) *fixture {
	t.Helper()
	f := &fixture{}
	var mu sync.Mutex
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "w.db"), sqlite.Options{
		OnCommit: func(evs []lease.Event) {
			mu.Lock()
			h := f.hub
			mu.Unlock()
			if h != nil {
				h.ObserveEvents(evs)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mu.Lock()
	f.st, f.hub = st, watch.NewHub(st, opts)
	mu.Unlock()
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := f.hub.Open(r.Context(), r.URL.Query().Get("prefix"), r.Header.Get("Last-Event-ID"))
		if err != nil {
			http.Error(w, string(lease.ErrorCode(err)), http.StatusTooManyRequests)
			return
		}
		s.Serve(w, func(e lease.Event) any {
			return map[string]any{"seq": e.Seq, "type": e.Type, "name": e.Name, "token": e.Token, "metadata": string(e.Metadata)}
		})
	}))
	// Small socket buffers, so a watcher that never reads backs the server's writes up quickly.
	f.srv.Listener = smallbuf.Listener(f.srv.Listener)
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) acquire(t *testing.T, name string) lease.Lease {
	t.Helper()
	l, err := f.st.Acquire(context.Background(), store.AcquireParams{Name: name, Holder: "h", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

type msg struct {
	id, event, data string
	comment         bool
}

// open connects a watcher and returns its messages.
func open(t *testing.T, url, lastID string) <-chan msg {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("watch = %d %q, want 200 text/event-stream", resp.StatusCode, ct)
	}
	out := make(chan msg, 100)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var m msg
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if m != (msg{}) {
					out <- m
				}
				m = msg{}
			case strings.HasPrefix(line, ":"):
				m.comment = true
			case strings.HasPrefix(line, "id: "):
				m.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				m.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				m.data = line[6:]
			}
		}
	}()
	return out
}

// next returns the next event message, skipping retry and heartbeat lines.
func next(t *testing.T, c <-chan msg) msg {
	t.Helper()
	timeout := time.After(3 * time.Second)
	for {
		select {
		case m, ok := <-c:
			if !ok {
				t.Fatal("stream ended")
			}
			if m.event != "" {
				return m
			}
		case <-timeout:
			t.Fatal("no event within 3 s")
		}
	}
}

func TestPrefixFiltering(t *testing.T) {
	f := newFixture(t, watch.Options{})
	f.acquire(t, "before") // history before connecting is not replayed without Last-Event-ID
	c := open(t, f.srv.URL+"?prefix=jobs.", "")
	f.acquire(t, "other")
	f.acquire(t, "jobs.a")
	m := next(t, c)
	var ev struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(m.data), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Name != "jobs.a" || m.event != "acquired" || ev.Type != "acquired" {
		t.Errorf("first event = %+v (%s), want jobs.a acquired", ev, m.event)
	}
}

func TestResumeWithLastEventID(t *testing.T) {
	f := newFixture(t, watch.Options{})
	f.acquire(t, "a") // seq 1
	f.acquire(t, "b") // seq 2
	f.acquire(t, "c") // seq 3
	c := open(t, f.srv.URL, "1")
	for _, want := range []string{"2", "3"} {
		if m := next(t, c); m.id != want {
			t.Errorf("resumed event id = %s, want %s", m.id, want)
		}
	}
	f.acquire(t, "d")
	if m := next(t, c); m.id != "4" {
		t.Errorf("live event id = %s, want 4", m.id)
	}
}

func TestHeartbeat(t *testing.T) {
	f := newFixture(t, watch.Options{Heartbeat: 20 * time.Millisecond})
	c := open(t, f.srv.URL, "")
	timeout := time.After(3 * time.Second)
	for {
		select {
		case m := <-c:
			if m.comment {
				return
			}
		case <-timeout:
			t.Fatal("no heartbeat on an idle stream")
		}
	}
}

func TestTooManyWatchers(t *testing.T) {
	f := newFixture(t, watch.Options{MaxWatchers: 1})
	open(t, f.srv.URL, "")
	resp, err := http.Get(f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("second watcher = %d, want 429", resp.StatusCode)
	}
}

// stuckWatcher connects and never reads, so the server's writes back up.
func stuckWatcher(t *testing.T, url string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	conn.(*net.TCPConn).SetReadBuffer(4096)
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte("GET /?prefix= HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
}

func TestSlowConsumerIsDroppedAndNeverBlocksWriters(t *testing.T) {
	f := newFixture(t, watch.Options{WriteTimeout: 50 * time.Millisecond})
	stuckWatcher(t, f.srv.URL)
	for deadline := time.Now().Add(2 * time.Second); f.hub.Watchers() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	md := strings.Repeat("x", 4000)
	start := time.Now()
	for i := range 100 { // ~400 KB of events: more than the socket buffers hold
		_, err := f.st.Acquire(context.Background(), store.AcquireParams{Name: "n" + strings.Repeat("0", i%5) + string(rune('a'+i%26)) + time.Now().Format("150405.000000000"),
			Holder: "h", TTL: time.Minute, Metadata: []byte(`{"pad":"` + md + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("100 acquires took %v with a stuck watcher", d)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.hub.Watchers() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := f.hub.Watchers(); n != 0 {
		t.Errorf("Watchers() = %d, want the stuck watcher dropped", n)
	}
}

// BenchmarkAcquireWithStuckWatcher measures acquires with and without a watcher that never
// reads: the two should match, since writers never wait for watchers.
func BenchmarkAcquireWithStuckWatcher(b *testing.B) {
	for _, stuck := range []bool{false, true} {
		name := "NoWatcher"
		if stuck {
			name = "StuckWatcher"
		}
		b.Run(name, func(b *testing.B) {
			f := newFixture(b, watch.Options{WriteTimeout: time.Second})
			if stuck {
				conn, err := net.Dial("tcp", strings.TrimPrefix(f.srv.URL, "http://"))
				if err != nil {
					b.Fatal(err)
				}
				defer conn.Close()
				conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := f.st.Acquire(context.Background(), store.AcquireParams{Name: "b" + time.Now().Format("150405.000000000") + string(rune('a'+i%26)),
					Holder: "h", TTL: time.Minute}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// countingStore counts the reads watchers make of the store.
type countingStore struct {
	watch.Store
	mu    sync.Mutex
	reads int
}

func (c *countingStore) Events(ctx context.Context, f store.EventFilter) (store.Page[lease.Event], error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.Store.Events(ctx, f)
}

func (c *countingStore) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// TestLiveWatchersReadMemory: watchers that keep up are served the new events from memory, not
// by a store query per commit each; one that resumes from further back reads the store.
func TestLiveWatchersReadMemory(t *testing.T) {
	f := newFixture(t, watch.Options{})
	counted := &countingStore{Store: f.st}
	hub := watch.NewHub(counted, watch.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := hub.Open(r.Context(), r.URL.Query().Get("prefix"), r.Header.Get("Last-Event-ID"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusTooManyRequests)
			return
		}
		s.Serve(w, func(e lease.Event) any { return map[string]any{"seq": e.Seq, "name": e.Name} })
	}))
	t.Cleanup(srv.Close)
	// This hub is not on the fixture's commit hook: feed it as the hook would.
	publish := func(name string) {
		f.acquire(t, name)
		p, err := f.st.Events(context.Background(), store.EventFilter{Name: name})
		if err != nil || len(p.Items) == 0 {
			t.Fatalf("events of %s: %v", name, err)
		}
		hub.ObserveEvents(p.Items)
	}
	f.acquire(t, "before") // committed before the hub saw any commit: only in the store
	publish("warm-up")     // the hub learns where memory starts
	watchers := []<-chan msg{open(t, srv.URL+"?prefix=live.", ""), open(t, srv.URL+"?prefix=live.", "")}
	time.Sleep(100 * time.Millisecond)
	before := counted.count()
	for i := range 20 {
		publish(fmt.Sprintf("live.%02d", i))
		if i%2 == 0 {
			publish(fmt.Sprintf("other.%02d", i))
		}
	}
	for _, c := range watchers {
		for i := range 20 {
			if m := next(t, c); !strings.Contains(m.data, fmt.Sprintf("live.%02d", i)) {
				t.Fatalf("event %d = %s, want live.%02d", i, m.data, i)
			}
		}
	}
	if reads := counted.count() - before; reads != 0 {
		t.Errorf("watchers that keep up read the store %d times for 30 commits, want 0", reads)
	}
	// A watcher resuming from the start is behind memory's horizon: it reads the store.
	c := open(t, srv.URL, "0")
	if m := next(t, c); m.id != "1" {
		t.Errorf("resumed first event id = %s, want 1", m.id)
	}
	if counted.count() == before {
		t.Error("a watcher resuming from before memory's horizon did not read the store")
	}
}

// TestOnDeliver: each write of live events is reported once, with the age of its oldest
// event by the store's clock; history replayed after a Last-Event-ID is not.
func TestOnDeliver(t *testing.T) {
	clock := lease.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	committed := make(chan []lease.Event, 10)
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "w.db"), sqlite.Options{Clock: clock,
		OnCommit: func(evs []lease.Event) { committed <- evs }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var mu sync.Mutex
	var ages []time.Duration
	hub := watch.NewHub(st, watch.Options{Clock: clock, OnDeliver: func(age time.Duration) {
		mu.Lock()
		ages = append(ages, age)
		mu.Unlock()
	}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := hub.Open(r.Context(), "", r.Header.Get("Last-Event-ID"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		s.Serve(w, func(e lease.Event) any { return e.Seq })
	}))
	t.Cleanup(srv.Close)
	f := &fixture{st: st, hub: hub, srv: srv}

	f.acquire(t, "history") // seq 1, committed before the stream opens
	<-committed
	c := open(t, srv.URL, "0")
	if m := next(t, c); m.id != "1" {
		t.Fatalf("replayed event id = %s, want 1", m.id)
	}
	f.acquire(t, "live") // seq 2, at the clock's now
	evs := <-committed
	clock.Advance(time.Second)
	f.acquire(t, "live-2") // seq 3, a second later
	evs = append(evs, <-committed...)
	clock.Advance(4 * time.Second) // the hub hears of both 5 s after the first
	hub.ObserveEvents(evs)
	for _, want := range []string{"2", "3"} {
		if m := next(t, c); m.id != want {
			t.Fatalf("live event id = %s, want %s", m.id, want)
		}
	}
	// The stream reports after its write returns, which may be after the client has read it.
	got := func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), ages...)
	}
	for deadline := time.Now().Add(3 * time.Second); len(got()) == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if ages := got(); len(ages) != 1 || ages[0] != 5*time.Second {
		t.Errorf("OnDeliver ages = %v, want [5s] (one write, its oldest live event)", ages)
	}
}

// TestAdminReserve checks that admins may open the reserved streams beyond MaxWatchers, and
// nobody else.
func TestAdminReserve(t *testing.T) {
	f := newFixture(t, watch.Options{MaxWatchers: 1, AdminReserve: 1})
	ctx := context.Background()
	if _, err := f.hub.OpenAs(ctx, "", "", false); err != nil {
		t.Fatalf("first watcher = %v", err)
	}
	if _, err := f.hub.OpenAs(ctx, "", "", false); !lease.IsCode(err, lease.CodeTooManyWatchers) {
		t.Fatalf("non-admin watcher past MaxWatchers = %v, want too_many_watchers", err)
	}
	if _, err := f.hub.OpenAs(ctx, "", "", true); err != nil {
		t.Fatalf("admin watcher in the reserve = %v, want a stream", err)
	}
	if _, err := f.hub.OpenAs(ctx, "", "", true); !lease.IsCode(err, lease.CodeTooManyWatchers) {
		t.Fatalf("admin watcher past the reserve = %v, want too_many_watchers", err)
	}
}
