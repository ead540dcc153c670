package handlers_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/internal/logtest"
	"github.com/leasekeeper/leasekeeper/queue"
)

// rawExchange writes head and then body to a new connection with pause between the body's
// bytes, half-closes the connection when cut is set, and reads the answer.
func rawExchange(t *testing.T, url, head, body string, pause time.Duration, cut bool) (*http.Response, []byte, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	start := time.Now()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	for i := range len(body) {
		if pause > 0 && i > 0 {
			time.Sleep(pause)
		}
		if _, err := io.WriteString(conn, body[i:i+1]); err != nil {
			break // the server answered and closed: read what it said
		}
	}
	if cut {
		conn.(*net.TCPConn).CloseWrite()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read the answer to %q: %v", head, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b, time.Since(start)
}

// TestBodyNotReceived: a body shorter than its Content-Length, sent too slowly, or cut off is
// the client's failure: 408 or 400 problem+json at once (not after the old 30 s), logged as a
// warning, never a 500 logged as an error.
func TestBodyNotReceived(t *testing.T) {
	var log logtest.Sink
	const timeout = 300 * time.Millisecond
	e := newEnvWith(t, func(cfg *handlers.Config) {
		cfg.Logger = log.Logger()
		cfg.BodyTimeout = timeout
	})
	authz := "Authorization: Bearer " + e.key + "\r\n"
	acquire := "POST /v1/leases/job/acquire HTTP/1.1\r\nHost: x\r\n" + authz + "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
	put := "PUT /v1/resources/r HTTP/1.1\r\nHost: x\r\n" + authz + "Content-Type: text/plain\r\nFencing-Token: 1\r\nContent-Length: 100\r\n\r\n"
	body := `{"holder":"w","ttl_ms":60000}`
	for _, c := range []struct {
		name, head string
		pause      time.Duration
		cut        bool
		status     int
		code       api.ProblemCode
	}{
		{"AcquireShortBody", acquire, 0, false, http.StatusRequestTimeout, api.ProblemCodeRequestTimeout},
		{"AcquireSlowBody", acquire, 50 * time.Millisecond, false, http.StatusRequestTimeout, api.ProblemCodeRequestTimeout},
		{"AcquireCutOff", acquire, 0, true, http.StatusBadRequest, api.ProblemCodeInvalidRequest},
		{"PutShortBody", put, 0, false, http.StatusRequestTimeout, api.ProblemCodeRequestTimeout},
		{"PutCutOff", put, 0, true, http.StatusBadRequest, api.ProblemCodeInvalidRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, b, took := rawExchange(t, e.url, c.head, body, c.pause, c.cut)
			wantProblem(t, c.name, resp, b, c.status, c.code)
			if took > timeout+5*time.Second {
				t.Errorf("answered after %v, want about %v", took, timeout)
			}
		})
	}
	if r, err := e.c.GetLeaseWithResponse(e.ctx, "job"); err != nil || r.StatusCode() != http.StatusNotFound {
		t.Errorf("GetLease(job) = %v, %v; want 404: no partial body was acted on", status(r), err)
	}
	if errs := log.Records(t, "ERROR"); len(errs) > 0 {
		t.Errorf("logged at ERROR: %v", errs)
	}
	if warns := log.Records(t, "WARN"); len(warns) != 5 {
		t.Errorf("logged at WARN: %d records %v, want one per request (5)", len(warns), warns)
	}
}

// TestWaitingAcquireLeft: a client that gives up a waiting acquire is neither an internal error
// nor an ERROR in the log.
func TestWaitingAcquireLeft(t *testing.T) {
	var log logtest.Sink
	var line *queue.Line
	e := newEnvWith(t, func(cfg *handlers.Config) {
		cfg.Logger = log.Logger()
		line = queue.New(cfg.Store, cfg.Clock, queue.DefaultLimits())
		cfg.Acquirer = line
	})
	e.acquire("job", "w1", time.Minute)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := e.c.AcquireLeaseWithResponse(ctx, "job", nil, api.AcquireRequest{Holder: "w2", TtlMs: 1000, WaitMs: ptr[int64](60000)})
		done <- err
	}()
	waitFor(t, "the acquire to wait in line", func() bool { return line.Waiters("job") == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatalf("AcquireLease() after cancel = nil error, want the context's")
	}
	ops := func(outcome string) float64 {
		return metric(t, e.reg, "leasekeeper_lease_operations_total", map[string]string{"op": "acquire", "outcome": outcome})
	}
	waitFor(t, "the server to count the acquire as canceled", func() bool { return ops("canceled") == 1 })
	if got := ops("internal"); got != 0 {
		t.Errorf(`acquire outcome="internal" = %v, want 0`, got)
	}
	if errs := log.Records(t, "ERROR"); len(errs) > 0 {
		t.Errorf("logged at ERROR: %v", errs)
	}
	// The access log line comes after the answer, and so after the count.
	waitFor(t, "an access log line with status 499 for the abandoned acquire", func() bool {
		for _, r := range log.Records(t, "INFO") {
			if r["msg"] == "request" && r["route"] == "/v1/leases/{name}/acquire" && fmt.Sprint(r["status"]) == "499" {
				return true
			}
		}
		return false
	})
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("waited 5 s for %s", what)
}
