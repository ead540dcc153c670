package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/watch"
)

// TestCreatedLocation checks that what a POST creates is answered 201 with its Location, and
// that the Location names what was created (never a secret).
func TestCreatedLocation(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("POST", "/v1/keys", strings.NewReader(`{"label":"loc","role":"reader"}`), map[string]string{"Content-Type": "application/json"})
	var k api.CreatedKey
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &k) != nil || resp.Header.Get("Location") != "/v1/keys/"+k.Record.Id {
		t.Errorf("POST /v1/keys = %d Location %q %s, want 201 with /v1/keys/<id>", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	resp, body = e.do("POST", "/v1/sessions", strings.NewReader(`{"holder":"w","ttl_ms":60000}`), map[string]string{"Content-Type": "application/json"})
	var s api.Session
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &s) != nil || resp.Header.Get("Location") != "/v1/sessions/"+s.Session {
		t.Errorf("POST /v1/sessions = %d Location %q %s, want 201 with /v1/sessions/<session>", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	if s.SessionId != nil && strings.Contains(resp.Header.Get("Location"), *s.SessionId) {
		t.Error("the session's Location carries its secret session_id")
	}
	resp, body = e.do("PUT", "/v1/resources/nofence", strings.NewReader("v"), nil)
	wantProblem(t, "PUT without Fencing-Token", resp, body, http.StatusPreconditionRequired, api.ProblemCodePreconditionRequired)
}

// TestStaticNoListing checks that /static/ serves its files but never lists a folder.
func TestStaticNoListing(t *testing.T) {
	e := newEnv(t)
	for _, p := range []string{"/static/", "/static//", "/static/./"} {
		resp, body := e.do("GET", p, nil, nil)
		if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "<a href") {
			t.Errorf("GET %s = %d %.80q, want 404 without a listing", p, resp.StatusCode, body)
		}
	}
}

// TestWatchAdminReserve checks that the watch endpoint lets an admin key into the hub's
// reserve when other keys' streams fill it, and no one else.
func TestWatchAdminReserve(t *testing.T) {
	e := newEnvWith(t, func(c *handlers.Config) {
		c.Hub = watch.NewHub(c.Store, watch.Options{MaxWatchers: 1, AdminReserve: 1})
	})
	reader := servicetest.Key(t, e.store, auth.Reader)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	open := func(key string) int {
		req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/watch", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET /v1/watch: %v", err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp.StatusCode
	}
	for i, c := range []struct {
		key  string
		want int
	}{{reader, http.StatusOK}, {reader, http.StatusTooManyRequests}, {e.key, http.StatusOK}, {e.key, http.StatusTooManyRequests}} {
		if got := open(c.key); got != c.want {
			t.Errorf("watch %d = %d, want %d", i+1, got, c.want)
		}
	}
}
