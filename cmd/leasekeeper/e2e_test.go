package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/internal/promcheck"
	"github.com/leasekeeper/leasekeeper/internal/testwait"
)

// lockedBuffer is a bytes.Buffer safe for the server goroutine to write while a test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// addrWriter is run's stdout: it passes on the address of the first "listening on" line.
type addrWriter struct {
	lockedBuffer
	once sync.Once
	addr chan string
}

var listeningRE = regexp.MustCompile(`leasekeeper listening on (https?://\S+)`)

func (a *addrWriter) Write(p []byte) (int, error) {
	n, err := a.lockedBuffer.Write(p)
	if m := listeningRE.FindStringSubmatch(a.String()); m != nil {
		a.once.Do(func() { a.addr <- m[1] })
	}
	return n, err
}

// served is one run of `leasekeeper serve` inside the test process.
type served struct {
	url    string
	stop   context.CancelFunc
	done   chan error
	stderr *lockedBuffer
	c      *api.ClientWithResponses
	hc     *http.Client // sends the admin key
}

// testAdminKey is the first admin key of the databases the tests serve (LEASEKEEPER_ADMIN_KEY).
const testAdminKey = "lkk_test-admin-key-0123456789abcdefghijklmnopqrstuvwxyz"

// serveInProcess calls the real run(ctx, ["serve", args…]) in a goroutine and waits until it
// listens. It fails the test if run returns first.
func serveInProcess(t *testing.T, env map[string]string, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &addrWriter{addr: make(chan string, 1)}
	s := &served{stop: cancel, done: make(chan error, 1), stderr: &lockedBuffer{}}
	getenv := func(k string) string {
		if v, ok := env[k]; ok || k != "LEASEKEEPER_ADMIN_KEY" {
			return v
		}
		return testAdminKey
	}
	go func() { s.done <- run(ctx, append([]string{"serve"}, args...), getenv, out, s.stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
			t.Errorf("run did not return 15 s after its context ended")
		}
	})
	select {
	case s.url = <-out.addr:
	case err := <-s.done:
		s.done <- err
		t.Fatalf("run(serve %q) = %v before listening; stderr:\n%s", args, err, s.stderr)
	case <-time.After(20 * time.Second):
		t.Fatalf("run(serve %q) did not print its address; stderr:\n%s", args, s.stderr)
	}
	s.hc = &http.Client{Timeout: 10 * time.Second, Transport: servicetest.BearerTransport{Key: testAdminKey}}
	c, err := api.NewClientWithResponses(s.url, api.WithHTTPClient(s.hc))
	if err != nil {
		t.Fatal(err)
	}
	s.c = c
	return s
}

// shutdown ends run's context and returns what run returned.
func (s *served) shutdown(t *testing.T) error {
	t.Helper()
	s.stop()
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		return err
	case <-time.After(15 * time.Second):
		t.Fatalf("run did not return 15 s after its context ended")
		return nil
	}
}

// backend is a database `serve` runs on: the flags that select it for one test.
type backend struct {
	name string
	args func(t *testing.T) []string
	// clockInDatabase: the database's clock decides, so a restart changes no lease and there
	// is no conservative restart (invariant 5) to check.
	clockInDatabase bool
}

// backends are the databases the tests of a whole server run on.
var backends = []backend{
	{name: "SQLite", args: func(t *testing.T) []string { return []string{"--db", filepath.Join(t.TempDir(), "lk.db")} }},
	{name: "PostgreSQL", clockInDatabase: true, args: func(t *testing.T) []string {
		return []string{"--db", pg.NewDatabase(t), "--secret-file", filepath.Join(t.TempDir(), "secret")}
	}},
}

func TestServeEndToEnd(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { testServeEndToEnd(t, b.args(t)) })
	}
}

func testServeEndToEnd(t *testing.T, db []string) {
	s := serveInProcess(t, nil, append([]string{"--addr", "127.0.0.1:0"}, db...)...)
	ctx := context.Background()

	a, err := s.c.AcquireLeaseWithResponse(ctx, "job", nil, api.AcquireRequest{Holder: "w1", TtlMs: 10000})
	if err != nil || a.JSON200 == nil {
		t.Fatalf("AcquireLease() = %v, %v", a.Status(), err)
	}
	if a.Headers200.FencingToken != a.JSON200.Token {
		t.Errorf("Fencing-Token %d, body token %d", a.Headers200.FencingToken, a.JSON200.Token)
	}
	held, err := s.c.AcquireLeaseWithResponse(ctx, "job", nil, api.AcquireRequest{Holder: "w2", TtlMs: 10000})
	if err != nil || held.StatusCode() != http.StatusConflict {
		t.Errorf("AcquireLease(held) = %v, %v; want 409", held.Status(), err)
	}
	r, err := s.c.RenewLeaseWithResponse(ctx, "job", api.RenewRequest{LeaseId: *a.JSON200.LeaseId})
	if err != nil || r.JSON200 == nil || r.JSON200.Token != a.JSON200.Token {
		t.Errorf("RenewLease() = %v, %v; want 200 with the same token", r.Status(), err)
	}
	rel, err := s.c.ReleaseLeaseWithResponse(ctx, "job", api.ReleaseRequest{LeaseId: *a.JSON200.LeaseId})
	if err != nil || rel.StatusCode() != http.StatusNoContent {
		t.Errorf("ReleaseLease() = %v, %v; want 204", rel.Status(), err)
	}
	b, err := s.c.AcquireLeaseWithResponse(ctx, "job", nil, api.AcquireRequest{Holder: "w2", TtlMs: 10000})
	if err != nil || b.JSON200 == nil || b.JSON200.Token <= a.JSON200.Token {
		t.Errorf("AcquireLease(after release) = %v, %v; want a grant with a larger token", b.Status(), err)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml"} {
		resp, err := s.hc.Get(s.url + path)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %v, %v; want 200", path, resp, err)
		}
		if resp != nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if path == "/metrics" {
				// The whole process's scrape: build info, Go and process collectors, the store's.
				t.Run("Promtool", func(t *testing.T) { promcheck.Check(t, body) })
			}
		}
	}

	// A fenced write still sending its body when shutdown starts is finished and answered.
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPut, s.url+"/v1/resources/report", pr)
	req.Header.Set("Fencing-Token", strconv.FormatInt(b.JSON200.Token, 10))
	req.Header.Set("Content-Type", "text/plain")
	// With Expect: 100-continue the body is sent only once the handler reads it: the write of
	// the first half returns when the request is in the server's hands.
	req.Header.Set("Expect", "100-continue")
	hc := &http.Client{Timeout: 10 * time.Second, Transport: servicetest.BearerTransport{Key: testAdminKey,
		Next: &http.Transport{ExpectContinueTimeout: time.Minute}}}
	type answer struct {
		status int
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := hc.Do(req)
		if err != nil {
			answered <- answer{0, err}
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered <- answer{resp.StatusCode, nil}
	}()
	if _, err := pw.Write([]byte("first half, ")); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- s.shutdown(t) }()
	waitLog(t, s.stderr, "shutting down", 10*time.Second)
	select {
	case err := <-stopped:
		t.Fatalf("run returned %v with a request in flight, want it to wait", err)
	default:
	}
	pw.Write([]byte("second half"))
	pw.Close()
	if got := testwait.Receive(t, answered, 10*time.Second); got.err != nil || got.status != http.StatusCreated {
		t.Errorf("in-flight PUT = %d, %v; want 201 (it creates the resource) after shutdown began", got.status, got.err)
	}
	if err := testwait.Receive(t, stopped, 15*time.Second); err != nil {
		t.Errorf("run() after cancel = %v, want nil (clean shutdown); stderr:\n%s", err, s.stderr)
	}
	if _, err := s.hc.Get(s.url + "/healthz"); err == nil {
		t.Errorf("GET /healthz after shutdown succeeded, want the listener closed")
	}

	// The write made during shutdown, and every grant, are on disk for the next run.
	s2 := serveInProcess(t, nil, append([]string{"--addr", "127.0.0.1:0"}, db...)...)
	g, err := s2.c.GetResourceWithResponse(ctx, "report")
	if err != nil || string(g.Body) != "first half, second half" {
		t.Errorf("GetResource(report) after restart = %v %q, %v", g.Status(), g.Body, err)
	}
	st, err := s2.c.GetLeaseWithResponse(ctx, "job")
	if err != nil || st.JSON200 == nil || st.JSON200.Token != b.JSON200.Token || !st.JSON200.Held {
		t.Errorf("GetLease(job) after restart = %v %s, %v; want w2's lease %d still held", st.Status(), st.Body, err, b.JSON200.Token)
	}
}

func TestServeEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Run("OKFromEnv", func(t *testing.T) {
		db := filepath.Join(dir, "env.db")
		s := serveInProcess(t, map[string]string{"LEASEKEEPER_ADDR": "127.0.0.1:0", "LEASEKEEPER_DB": db})
		if _, err := os.Stat(db); err != nil {
			t.Errorf("LEASEKEEPER_DB=%s: %v, want the database there", db, err)
		}
		if err := s.shutdown(t); err != nil {
			t.Errorf("run() = %v", err)
		}
	})
	t.Run("OKFlagsWin", func(t *testing.T) {
		envDB, flagDB := filepath.Join(dir, "env-loses.db"), filepath.Join(dir, "flag-wins.db")
		// The environment's address cannot be listened on: the flag's must be used.
		env := map[string]string{"LEASEKEEPER_ADDR": "203.0.113.1:1", "LEASEKEEPER_DB": envDB}
		s := serveInProcess(t, env, "--addr", "127.0.0.1:0", "--db", flagDB)
		if !strings.HasPrefix(s.url, "http://127.0.0.1:") {
			t.Errorf("listening on %s, want the flag's 127.0.0.1", s.url)
		}
		if _, err := os.Stat(flagDB); err != nil {
			t.Errorf("--db %s: %v, want the database there", flagDB, err)
		}
		if _, err := os.Stat(envDB); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("LEASEKEEPER_DB %s exists (%v), want the flag to win", envDB, err)
		}
		s.shutdown(t)
	})
}

func TestServePortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	db := filepath.Join(t.TempDir(), "lk.db")
	var stdout, stderr lockedBuffer
	err = run(context.Background(), []string{"serve", "--addr", ln.Addr().String(), "--db", db}, func(string) string { return "" }, &stdout, &stderr)
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "listen") {
		t.Errorf("run(serve on a taken port) = %v (exit %d), want a listen error, exit 1", err, exitCode(err))
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("database created (%v), want listen to fail before anything else is built", err)
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version"} {
		var stdout, stderr lockedBuffer
		err := run(context.Background(), []string{arg}, func(string) string { return "" }, &stdout, &stderr)
		if err != nil || !regexp.MustCompile(`^leasekeeper \S+\n$`).MatchString(stdout.String()) {
			t.Errorf("run(%s) = %q, %v; want \"leasekeeper VERSION\\n\"", arg, stdout.String(), err)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"NoCommand", nil},
		{"UnknownCommand", []string{"frobnicate"}},
		{"UnknownFlag", []string{"serve", "--nope"}},
		{"FlagWithoutValue", []string{"serve", "--addr"}},
		{"BadDuration", []string{"serve", "--max-ttl", "forever"}},
		{"PositionalArgument", []string{"serve", "extra"}},
		{"MinTTLZero", []string{"serve", "--min-ttl", "0s"}},
		{"MaxBelowMin", []string{"serve", "--min-ttl", "10s", "--max-ttl", "5s"}},
		{"LogFormat", []string{"serve", "--log-format", "xml"}},
		{"LogLevel", []string{"serve", "--log-level", "loud"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr lockedBuffer
			// A server that starts by mistake must not outlive the test.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			args := tt.args
			env := map[string]string{"LEASEKEEPER_ADDR": "127.0.0.1:0", "LEASEKEEPER_DB": filepath.Join(t.TempDir(), "lk.db")}
			err := run(ctx, args, func(k string) string { return env[k] }, &stdout, &stderr)
			if code := exitCode(err); err == nil || code != 2 {
				t.Errorf("run(%q) = %v (exit %d), want exit 2", args, err, code)
			}
		})
	}
}

// waitLog waits until the log holds text.
func waitLog(t *testing.T, log fmt.Stringer, text string, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if strings.Contains(log.String(), text) {
			return
		}
	}
	t.Fatalf("no %q in the log after %v:\n%s", text, d, log)
}
