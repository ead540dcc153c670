package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/service"
)

// wantRetryAfter checks that a 429 or 503 answer says when to come back (RFC 9110 §10.2.3):
// a whole number of seconds, at least 1.
func wantRetryAfter(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	v := resp.Header.Get("Retry-After")
	if n, err := strconv.Atoi(v); err != nil || n < 1 {
		t.Errorf("%s: Retry-After = %q, want a number of seconds ≥ 1", what, v)
	}
}

// TestRetryAfterUnavailable sweeps the 503 answers: a server without a watch hub, and readyz
// over a store that no longer answers. (The 429s are swept in TestPerKeyLimits.)
func TestRetryAfterUnavailable(t *testing.T) {
	e := newEnv(t)
	resp, b := e.do("GET", "/v1/watch", nil, nil)
	wantProblem(t, "GET /v1/watch without a hub", resp, b, http.StatusServiceUnavailable, api.ProblemCodeUnavailable)
	wantRetryAfter(t, "GET /v1/watch without a hub", resp)

	e.store.Close()
	resp, b = e.do("GET", "/readyz", nil, nil)
	wantProblem(t, "GET /readyz over a closed store", resp, b, http.StatusServiceUnavailable, api.ProblemCodeUnavailable)
	wantRetryAfter(t, "GET /readyz over a closed store", resp)
}

// TestMethodNotAllowedAllow: a 405 lists the route's methods in Allow, HEAD with GET.
func TestMethodNotAllowedAllow(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/v1/leases/job/acquire", "POST"},
		{"PATCH", "/v1/leases/job", "GET, HEAD, DELETE"},
		{"DELETE", "/v1/leases", "GET, HEAD"},
		{"POST", "/v1/resources/r", "GET, HEAD, PUT, DELETE"},
		{"POST", "/healthz", "GET, HEAD"},
		{"DELETE", "/openapi.yaml", "GET, HEAD"},
	} {
		resp, b := e.do(c.method, c.path, nil, nil)
		wantProblem(t, c.method+" "+c.path, resp, b, http.StatusMethodNotAllowed, "method_not_allowed")
		if got := resp.Header.Get("Allow"); got != c.want {
			t.Errorf("%s %s: Allow = %q, want %q", c.method, c.path, got, c.want)
		}
	}
}

// TestHead: HEAD answers wherever GET does, with GET's status and headers and no body.
func TestHead(t *testing.T) {
	e := newEnv(t)
	l := e.acquire("job", "w", time.Minute)
	if resp, b := e.do("PUT", "/v1/resources/r", strings.NewReader("v"), map[string]string{"Fencing-Token": strconv.FormatInt(l.Token, 10)}); resp.StatusCode/100 != 2 {
		t.Fatalf("PUT /v1/resources/r = %d %s", resp.StatusCode, b)
	}
	for _, path := range []string{"/healthz", "/readyz", "/openapi.yaml", "/metrics", "/v1/leases", "/v1/leases/job",
		"/v1/leases/job/events", "/v1/resources", "/v1/resources/r", "/v1/rejections", "/v1/keys", "/v1/leases/absent"} {
		get, gb := e.do("GET", path, nil, nil)
		head, hb := e.do("HEAD", path, nil, nil)
		if head.StatusCode != get.StatusCode || len(hb) != 0 {
			t.Errorf("HEAD %s = %d with %d bytes, want %d (GET's status) and no body", path, head.StatusCode, len(hb), get.StatusCode)
		}
		for _, h := range []string{"Content-Type", "ETag", "Fencing-Token", "Cache-Control"} {
			if head.Header.Get(h) != get.Header.Get(h) {
				t.Errorf("HEAD %s: %s = %q, GET's = %q", path, h, head.Header.Get(h), get.Header.Get(h))
			}
		}
		if cl := head.Header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(gb)) && path != "/metrics" {
			t.Errorf("HEAD %s: Content-Length = %s, GET's body is %d bytes", path, cl, len(gb))
		}
	}
}

// TestHeadWatch: HEAD on the event stream answers its headers and ends instead of streaming.
func TestHeadWatch(t *testing.T) {
	e := newServiceEnv(t, service.Config{})
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	e.ctx = ctx
	resp, b := e.do("HEAD", "/v1/watch", nil, nil)
	if resp.StatusCode != http.StatusOK || len(b) != 0 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("HEAD /v1/watch = %d %q with %d bytes, want 200 text/event-stream and no body", resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
	}
	// The client reuses the connection: a handler still streaming would never read this.
	if resp, _ := e.do("GET", "/healthz", nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz after HEAD /v1/watch = %d, want 200", resp.StatusCode)
	}
}

// TestResourceConditions: If-Match and If-None-Match on PUT (412), a conditional GET (304),
// 201 with Location on create (RFC 9110 §9.3.4), If-Match: * as "if it exists", and the cache
// headers of API answers.
func TestResourceConditions(t *testing.T) {
	e := newEnv(t)
	old := e.acquire("old", "w", time.Minute)
	l := e.acquire("job", "w", time.Minute)
	tok := map[string]string{"Fencing-Token": strconv.FormatInt(l.Token, 10)}
	with := func(h map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	resp, b := e.do("PUT", "/v1/resources/r", strings.NewReader("v1"), with(tok, "If-Match", `"1"`))
	wantProblem(t, "PUT If-Match on an absent resource", resp, b, http.StatusPreconditionFailed, "precondition_failed")
	resp, b = e.do("PUT", "/v1/resources/r", strings.NewReader("v1"), with(tok, "If-Match", "*"))
	wantProblem(t, "PUT If-Match: * on an absent resource", resp, b, http.StatusPreconditionFailed, "precondition_failed")
	resp, b = e.do("PUT", "/v1/resources/r", strings.NewReader("v1"), with(tok, "If-None-Match", "*"))
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Location") != "/v1/resources/r" || resp.Header.Get("ETag") != `"1"` {
		t.Fatalf("PUT If-None-Match: * (create) = %d Location %q ETag %q %s, want 201 /v1/resources/r \"1\"",
			resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("ETag"), b)
	}
	resp, b = e.do("PUT", "/v1/resources/r", strings.NewReader("v2"), with(tok, "If-None-Match", "*"))
	wantProblem(t, "PUT If-None-Match: * on an existing resource", resp, b, http.StatusPreconditionFailed, "precondition_failed")
	resp, b = e.do("PUT", "/v1/resources/r", strings.NewReader("v2"), with(tok, "If-Match", `"7"`))
	wantProblem(t, "PUT If-Match of another version", resp, b, http.StatusPreconditionFailed, "precondition_failed")
	// The fence first: a stale token is stale_token whatever the condition says.
	resp, b = e.do("PUT", "/v1/resources/r", strings.NewReader("v2"), map[string]string{
		"Fencing-Token": strconv.FormatInt(old.Token, 10), "If-Match": `"7"`})
	wantProblem(t, "PUT with a stale token and a failing If-Match", resp, b, http.StatusConflict, "stale_token")
	resp, b = e.do("PUT", "/v1/resources/r", strings.NewReader("v2"), with(tok, "If-Match", `"1"`))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") != `"2"` || resp.Header.Get("Location") != "" {
		t.Fatalf("PUT If-Match \"1\" = %d ETag %q %s, want 200 \"2\"", resp.StatusCode, resp.Header.Get("ETag"), b)
	}
	// If-Match: * holds for any version of a resource that exists (RFC 9110 §13.1.1).
	e.do("PUT", "/v1/resources/s", strings.NewReader("s1"), tok)
	resp, b = e.do("PUT", "/v1/resources/s", strings.NewReader("s2"), with(tok, "If-Match", "*"))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") != `"2"` {
		t.Fatalf("PUT If-Match: * on an existing resource = %d ETag %q %s, want 200 \"2\"", resp.StatusCode, resp.Header.Get("ETag"), b)
	}

	resp, b = e.do("GET", "/v1/resources/r", nil, nil)
	if resp.StatusCode != http.StatusOK || string(b) != "v2" || resp.Header.Get("ETag") != `"2"` || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("GET /v1/resources/r = %d %q ETag %q Cache-Control %q, want 200 v2 \"2\" no-cache", resp.StatusCode, b, resp.Header.Get("ETag"), resp.Header.Get("Cache-Control"))
	}
	resp, b = e.do("GET", "/v1/resources/r", nil, map[string]string{"If-None-Match": `"1", W/"2"`})
	if resp.StatusCode != http.StatusNotModified || len(b) != 0 || resp.Header.Get("ETag") != `"2"` {
		t.Errorf("GET If-None-Match current = %d %q ETag %q, want 304 without a body", resp.StatusCode, b, resp.Header.Get("ETag"))
	}
	if resp, b := e.do("GET", "/v1/resources/r", nil, map[string]string{"If-None-Match": `"1"`}); resp.StatusCode != http.StatusOK || string(b) != "v2" {
		t.Errorf("GET If-None-Match stale = %d %q, want 200 v2", resp.StatusCode, b)
	}
	for _, path := range []string{"/v1/leases", "/v1/leases/job", "/v1/leases/job/events", "/v1/resources"} {
		if resp, _ := e.do("GET", path, nil, nil); resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: Cache-Control = %q, want no-store", path, resp.Header.Get("Cache-Control"))
		}
	}
}

// TestSpecAnswers: the acquire 409 lease_lost has no Retry-After; a resource body is any
// bytes (a JSON object passes the validator untouched) and may be empty.
func TestSpecAnswers(t *testing.T) {
	e := newEnv(t)
	idem := map[string]string{"Content-Type": "application/json", "Idempotency-Key": "spec-answers-0001"}
	resp, b := e.do("POST", "/v1/leases/job/acquire", strings.NewReader(`{"holder":"w","ttl_ms":1000}`), idem)
	var g api.Grant
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &g) != nil || g.LeaseId == nil || *g.LeaseId == "" {
		t.Fatalf("acquire = %d %s, want 200 with a lease_id", resp.StatusCode, b)
	}
	e.clock.Advance(2 * time.Second)
	resp, b = e.do("POST", "/v1/leases/job/acquire", strings.NewReader(`{"holder":"w","ttl_ms":1000}`), idem)
	wantProblem(t, "acquire retried after its grant expired", resp, b, http.StatusConflict, api.ProblemCodeLeaseLost)
	if v := resp.Header.Get("Retry-After"); v != "" {
		t.Errorf("lease_lost: Retry-After = %q, want none", v)
	}

	l := e.acquire("w", "w", time.Minute)
	tok := strconv.FormatInt(l.Token, 10)
	for _, c := range []struct{ body, ct string }{{`{"a":[1,2]}`, "application/json"}, {"", "text/plain"}} {
		resp, b := e.do("PUT", "/v1/resources/any", strings.NewReader(c.body), map[string]string{"Fencing-Token": tok, "Content-Type": c.ct})
		if resp.StatusCode/100 != 2 {
			t.Fatalf("PUT %q (%s) = %d %s, want written", c.body, c.ct, resp.StatusCode, b)
		}
		if _, got := e.do("GET", "/v1/resources/any", nil, nil); string(got) != c.body {
			t.Errorf("GET after PUT %q = %q", c.body, got)
		}
	}
}
