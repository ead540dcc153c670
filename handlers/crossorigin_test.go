package handlers_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// TestCrossSiteRefused replays what a page on another site can make a browser send: simple
// requests (text/plain, so no CORS preflight) that would change state. They are refused; the
// same requests without browser headers, or from a page of this server, are not.
func TestCrossSiteRefused(t *testing.T) {
	e := newEnv(t)
	crossSite := map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
	acquire := `{"holder":"evil","ttl_ms":60000}`

	t.Run("ErrForbidden", func(t *testing.T) {
		held := e.acquire("held", "w1", time.Minute)
		before := e.snapshot()
		for _, c := range []struct {
			name, method, path, body string
			header                   map[string]string
		}{
			{"Acquire", http.MethodPost, "/v1/leases/job/acquire", acquire, crossSite},
			{"AcquireSameSite", http.MethodPost, "/v1/leases/job/acquire", acquire,
				map[string]string{"Content-Type": "text/plain", "Origin": "http://sub.example", "Sec-Fetch-Site": "same-site"}},
			{"AcquireOriginOnly", http.MethodPost, "/v1/leases/job/acquire", acquire,
				map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"}},
			{"ReportRejection", http.MethodPost, "/v1/rejections", `{"resource":"ledger","presented_token":1,"current_fence":2}`, crossSite},
			{"Release", http.MethodPost, "/v1/leases/held/release", `{"lease_id":"` + *held.LeaseId + `"}`, crossSite},
			{"Revoke", http.MethodDelete, "/v1/leases/held", "", crossSite},
			{"PutResource", http.MethodPut, "/v1/resources/ledger", "x",
				map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site", "Fencing-Token": strconv.FormatInt(held.Token, 10)}},
		} {
			resp, body := e.do(c.method, c.path, strings.NewReader(c.body), c.header)
			wantProblem(t, c.name+" "+c.method+" "+c.path, resp, body, http.StatusForbidden, api.ProblemCodeForbidden)
		}
		if diff := cmp.Diff(before, e.snapshot()); diff != "" {
			t.Errorf("refused cross-site requests changed the data (-before +after):\n%s", diff)
		}
	})

	t.Run("ReadsOK", func(t *testing.T) {
		for _, path := range []string{"/v1/leases/held", "/v1/leases", "/v1/rejections", "/readyz"} {
			if resp, body := e.do(http.MethodGet, path, nil, crossSite); resp.StatusCode != http.StatusOK {
				t.Errorf("cross-site GET %s = %d %s, want 200", path, resp.StatusCode, body)
			}
		}
		live, _ := servicetest.Start(t, service.Config{}, sqlite.Options{}) // with the watch hub
		ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, live.URL+"/v1/watch", nil)
		for k, v := range crossSite {
			req.Header.Set(k, v)
		}
		resp, err := live.Client().Do(req)
		if err != nil {
			t.Fatalf("cross-site GET /v1/watch: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Errorf("cross-site GET /v1/watch = %d %q, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	})

	t.Run("SameOriginOK", func(t *testing.T) {
		resp, body := e.do(http.MethodPost, "/v1/leases/from-page/acquire", strings.NewReader(acquire),
			map[string]string{"Content-Type": "application/json", "Origin": e.url, "Sec-Fetch-Site": "same-origin"})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("same-origin acquire = %d %s, want 200", resp.StatusCode, body)
		}
		resp, body = e.do(http.MethodPost, "/v1/leases/origin-only/acquire", strings.NewReader(acquire),
			map[string]string{"Content-Type": "application/json", "Origin": e.url})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("acquire with this server's Origin (no Sec-Fetch-Site) = %d %s, want 200", resp.StatusCode, body)
		}
	})

	t.Run("NoBrowserHeadersOK", func(t *testing.T) {
		resp, body := e.do(http.MethodPost, "/v1/leases/curl/acquire", strings.NewReader(acquire), map[string]string{"Content-Type": "application/json"})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("acquire like curl = %d %s, want 200", resp.StatusCode, body)
		}
		r, err := e.c.ReportRejectionWithResponse(e.ctx, api.RejectionReport{Resource: "ext", PresentedToken: 1, CurrentFence: 2})
		if err != nil || r.JSON202 == nil {
			t.Errorf("ReportRejection() through the generated client = %v, %v; want 202", status(r), err)
		}
	})
}
