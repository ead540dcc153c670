package handlers_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/internal/smallbuf"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// TestWriteTimeout checks that a client that never reads a 1 MiB answer loses its connection
// once the write timeout passes, instead of holding the answer's buffers, and that a client
// that reads gets all of it.
func TestWriteTimeout(t *testing.T) {
	e := newEnvWith(t, func(c *handlers.Config) { c.WriteTimeout = 100 * time.Millisecond })
	l := e.acquire("big", "writer", time.Hour)
	value := bytes.Repeat([]byte("x"), 1<<20)
	if resp, body := e.do("PUT", "/v1/resources/big", bytes.NewReader(value), map[string]string{"Fencing-Token": fmt.Sprint(l.Token)}); resp.StatusCode/100 != 2 {
		t.Fatalf("PUT 1 MiB = %d %s", resp.StatusCode, body)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	var once sync.Once
	srv := &http.Server{Handler: e.handler, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			once.Do(func() { close(closed) })
		}
	}}
	go srv.Serve(smallbuf.Listener(ln))
	t.Cleanup(func() { srv.Close() })

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /v1/resources/big HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", e.key)
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the server still held a connection that read nothing of a 1 MiB answer 30 s after a 100 ms write timeout")
	}
	got, _ := io.Copy(io.Discard, conn)
	if got >= 1<<20 {
		t.Errorf("the unread answer arrived whole (%d bytes) after the server gave up on it", got)
	}

	// A reader gets the whole answer under the same timeout.
	resp, body := e.do("GET", "/v1/resources/big", nil, nil)
	if resp.StatusCode != http.StatusOK || len(body) != 1<<20 {
		t.Errorf("GET by a reader = %d with %d bytes, want 200 with 1 MiB", resp.StatusCode, len(body))
	}
}

// TestWriteTimeoutSparesWaits checks that the write timeout counts from the answer's start: an
// acquire that waits in line longer than it is answered, and a watch stream quiet for longer
// still delivers.
func TestWriteTimeoutSparesWaits(t *testing.T) {
	const timeout = 50 * time.Millisecond
	srv, st := servicetest.Start(t, service.Config{Retention: store.Retention{Age: time.Hour}, WriteTimeout: timeout}, sqlite.Options{})
	hc := servicetest.Bearer(servicetest.AdminKey(t, st))
	post := func(path, body string) (*http.Response, string) {
		t.Helper()
		resp, err := hc.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s = %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	req, _ := http.NewRequest("GET", srv.URL+"/v1/watch?prefix=job", nil)
	watch, err := hc.Do(req)
	if err != nil || watch.StatusCode != http.StatusOK {
		t.Fatalf("watch = %v, %v", watch, err)
	}
	defer watch.Body.Close()
	lines := bufio.NewScanner(watch.Body)

	resp, body := post("/v1/leases/job/acquire", `{"holder":"first","ttl_ms":60000}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("acquire = %d %s", resp.StatusCode, body)
	}
	leaseID := body[strings.Index(body, `"lease_id":"`)+len(`"lease_id":"`):]
	leaseID = leaseID[:strings.IndexByte(leaseID, '"')]
	waited := make(chan string, 1)
	go func() {
		resp, err := hc.Post(srv.URL+"/v1/leases/job/acquire", "application/json", strings.NewReader(`{"holder":"second","ttl_ms":60000,"wait_ms":60000}`))
		if err != nil {
			waited <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		waited <- fmt.Sprint(resp.StatusCode, " ", string(b), err)
	}()
	// Longer than the write timeout before the waiting acquire is answered, and before the
	// stream writes again.
	time.Sleep(10 * timeout)
	if resp, body := post("/v1/leases/job/release", `{"lease_id":"`+leaseID+`"}`); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("release = %d %s", resp.StatusCode, body)
	}
	if got := <-waited; !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"holder":"second"`) {
		t.Errorf("acquire that waited 10× the write timeout = %s, want 200 for second", got)
	}
	want := []string{"acquired", "released", "acquired"}
	for len(want) > 0 && lines.Scan() {
		if line := lines.Text(); strings.HasPrefix(line, "event: ") {
			if got := strings.TrimPrefix(line, "event: "); got != want[0] {
				t.Fatalf("watch event %q, want %q", got, want[0])
			}
			want = want[1:]
		}
	}
	if len(want) > 0 {
		t.Errorf("the watch stream ended (%v) after a quiet spell longer than the write timeout, before %v", lines.Err(), want)
	}
}
