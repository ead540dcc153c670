package handlers_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/dashboard"
	"github.com/leasekeeper/leasekeeper/handlers"
)

const appOrigin = "https://app.example"

// corsEnv is a server whose API pages on appOrigin may call.
func corsEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, func(cfg *handlers.Config) {
		cfg.CORSOrigins = []string{"https://APP.example/", "http://other.example:8081"}
	})
}

// preflight sends what a browser sends before a non-simple cross-origin request (headers
// lower case and sorted, as the Fetch standard has them).
func preflight(t *testing.T, e *env, path, origin, method, headers string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, http.MethodOptions, e.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", method)
	if headers != "" {
		req.Header.Set("Access-Control-Request-Headers", headers)
	}
	resp, err := http.DefaultClient.Do(req) // no key: browsers send none with a preflight
	if err != nil {
		t.Fatalf("OPTIONS %s: %v", path, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func corsHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			out[k] = strings.Join(v, ", ")
		}
	}
	return out
}

func TestCORS(t *testing.T) {
	e := corsEnv(t)
	fromApp := map[string]string{"Origin": appOrigin, "Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}

	t.Run("Preflight", func(t *testing.T) {
		resp := preflight(t, e, "/v1/leases/job/acquire", appOrigin, "POST", "authorization,content-type,idempotency-key")
		h := resp.Header
		if resp.StatusCode/100 != 2 || h.Get("Access-Control-Allow-Origin") != appOrigin ||
			!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
			h.Get("Access-Control-Allow-Headers") != "authorization,content-type,idempotency-key" ||
			h.Get("Access-Control-Max-Age") == "" || h.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("preflight from %s = %d %v, want 2xx allowing POST with those headers, without credentials", appOrigin, resp.StatusCode, corsHeaders(h))
		}
		for _, hdr := range []string{"fencing-token,if-match,if-none-match,lease-name", "last-event-id"} {
			if resp := preflight(t, e, "/v1/resources/r", appOrigin, "PUT", hdr); resp.Header.Get("Access-Control-Allow-Headers") != hdr {
				t.Errorf("preflight PUT with %s = %v, want them allowed", hdr, corsHeaders(resp.Header))
			}
		}
		if resp := preflight(t, e, "/v1/leases/job", "http://other.example:8081", "DELETE", ""); resp.Header.Get("Access-Control-Allow-Origin") != "http://other.example:8081" {
			t.Errorf("preflight DELETE from the second origin = %v, want it allowed", corsHeaders(resp.Header))
		}
		if resp := preflight(t, e, "/v1/leases/job/acquire", appOrigin, "POST", "x-unknown"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight with a header not on the list = %v, want no CORS headers", corsHeaders(resp.Header))
		}
		if n := gathered(t, e.reg).count("leasekeeper_http_request_duration_seconds", map[string]string{"method": "OPTIONS", "route": "/v1/*"}); n == 0 {
			t.Errorf("no request-duration series for preflights under route /v1/*")
		}
	})

	t.Run("AllowedOrigin", func(t *testing.T) {
		resp, body := e.do("POST", "/v1/leases/app-job/acquire", strings.NewReader(`{"holder":"page","ttl_ms":60000}`), fromApp)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("acquire from %s (cross-site, allowed) = %d %s, want 200", appOrigin, resp.StatusCode, body)
		}
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != appOrigin {
			t.Errorf("Access-Control-Allow-Origin = %q, want %q", got, appOrigin)
		}
		expose := strings.ToLower(resp.Header.Get("Access-Control-Expose-Headers"))
		for _, h := range []string{"fencing-token", "etag", "retry-after", "location"} {
			if !strings.Contains(expose, h) {
				t.Errorf("Access-Control-Expose-Headers = %q, want %s in it", expose, h)
			}
		}
		// An error answer is readable too: the page learns why.
		resp, body = e.do("POST", "/v1/leases/app-job/acquire", strings.NewReader(`{"holder":"other","ttl_ms":60000}`), fromApp)
		wantProblem(t, "second acquire from the app", resp, body, http.StatusConflict, api.ProblemCodeLeaseHeld)
		if resp.Header.Get("Access-Control-Allow-Origin") != appOrigin || resp.Header.Get("Retry-After") == "" {
			t.Errorf("409 to the app: %v Retry-After %q, want it readable with Retry-After", corsHeaders(resp.Header), resp.Header.Get("Retry-After"))
		}
	})

	t.Run("ErrOtherOrigin", func(t *testing.T) {
		if resp := preflight(t, e, "/v1/leases/job/acquire", "https://evil.example", "POST", "authorization,content-type"); len(corsHeaders(resp.Header)) != 0 {
			t.Errorf("preflight from a foreign origin = %v, want no CORS headers", corsHeaders(resp.Header))
		}
		evil := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}
		resp, body := e.do("POST", "/v1/leases/evil/acquire", strings.NewReader(`{"holder":"evil","ttl_ms":60000}`), evil)
		wantProblem(t, "acquire from a foreign origin", resp, body, http.StatusForbidden, api.ProblemCodeForbidden)
		if len(corsHeaders(resp.Header)) != 0 {
			t.Errorf("refusal to a foreign origin carries %v, want no CORS headers", corsHeaders(resp.Header))
		}
		if resp, _ := e.do("GET", "/v1/leases", nil, evil); resp.StatusCode != http.StatusOK || len(corsHeaders(resp.Header)) != 0 {
			t.Errorf("GET from a foreign origin = %d %v, want 200 that its page cannot read", resp.StatusCode, corsHeaders(resp.Header))
		}
	})

	t.Run("NotOutsideAPI", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/metrics", "/"} {
			if resp, _ := e.do("GET", path, nil, map[string]string{"Origin": appOrigin}); len(corsHeaders(resp.Header)) != 0 {
				t.Errorf("GET %s from %s carries %v, want no CORS headers (only /v1 is shared)", path, appOrigin, corsHeaders(resp.Header))
			}
		}
	})

	t.Run("NoCookies", func(t *testing.T) {
		hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req, _ := http.NewRequest("POST", e.url+"/signin", strings.NewReader(url.Values{"key": {e.key}, "next": {"/"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var session *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == dashboard.SessionCookie {
				session = c
			}
		}
		if session == nil {
			t.Fatalf("sign-in = %d without a session cookie", resp.StatusCode)
		}
		get := func(origin string) int {
			req, _ := http.NewRequest("GET", e.url+"/v1/leases", nil)
			req.AddCookie(session)
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if got := get(""); got != http.StatusOK {
			t.Fatalf("GET /v1/leases with the session cookie = %d, want 200", got)
		}
		if got := get(appOrigin); got != http.StatusUnauthorized {
			t.Errorf("GET /v1/leases from %s with the session cookie = %d, want 401: a page elsewhere must bring a key", appOrigin, got)
		}
	})
}

// TestCORSOff: without origins there is no CORS at all, and the cross-site refusal stands.
func TestCORSOff(t *testing.T) {
	e := newEnv(t)
	if resp := preflight(t, e, "/v1/leases/job/acquire", appOrigin, "POST", "authorization"); len(corsHeaders(resp.Header)) != 0 {
		t.Errorf("preflight with CORS off = %d %v, want no CORS headers", resp.StatusCode, corsHeaders(resp.Header))
	}
	resp, body := e.do("POST", "/v1/leases/job/acquire", strings.NewReader(`{"holder":"page","ttl_ms":60000}`),
		map[string]string{"Origin": appOrigin, "Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"})
	wantProblem(t, "cross-site acquire with CORS off", resp, body, http.StatusForbidden, api.ProblemCodeForbidden)
}

func TestNormalizeOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://app.example":       "https://app.example",
		"HTTPS://App.Example:8443/": "https://app.example:8443",
		" http://localhost:3000 ":   "http://localhost:3000",
	} {
		if got, err := handlers.NormalizeOrigin(in); err != nil || got != want {
			t.Errorf("NormalizeOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "*", "app.example", "ftp://app.example", "https://*.example", "https://app.example/path",
		"https://u@app.example", "https://app.example?q=1", "https://"} {
		if got, err := handlers.NormalizeOrigin(bad); err == nil {
			t.Errorf("NormalizeOrigin(%q) = %q, want an error", bad, got)
		}
	}
	_, err := handlers.New(handlers.Config{CORSOrigins: []string{"*"}})
	if err == nil {
		t.Error("handlers.New(CORSOrigins: *) = nil error, want the origin refused")
	}
}
