package handlers_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/leasekeeper/leasekeeper/api"
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
