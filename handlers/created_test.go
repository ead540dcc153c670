package handlers_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/api"
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
