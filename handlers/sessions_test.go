package handlers_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
)

// TestSessions: a session is opened (its ID shown once), leases are acquired under it and
// renewed and released with it; the errors answer with their codes.
func TestSessions(t *testing.T) {
	e := newEnv(t)
	o, err := e.c.OpenSessionWithResponse(e.ctx, api.SessionRequest{Holder: "proc-1", TtlMs: 10000})
	if err != nil || o.JSON201 == nil || o.JSON201.SessionId == nil || !strings.HasPrefix(o.JSON201.Session, lease.SessionRefPrefix) {
		t.Fatalf("OpenSession = %v, %v; want 201 with a session_id and its name", status(o), err)
	}
	id, ref := *o.JSON201.SessionId, o.JSON201.Session
	var ids []string
	for _, name := range []string{"a", "b"} {
		r, err := e.c.AcquireLeaseWithResponse(e.ctx, name, nil, api.AcquireRequest{Holder: "proc-1", SessionId: &id})
		if err != nil || r.JSON200 == nil || deref(r.JSON200.Session) != ref || r.JSON200.ExpiresAt != o.JSON201.ExpiresAt {
			t.Fatalf("AcquireLease(%s, session) = %v, %+v; want a lease of session %s expiring with it", name, status(r), r.JSON200, ref)
		}
		ids = append(ids, *r.JSON200.LeaseId)
	}
	resp, body := e.do("POST", "/v1/leases/a/renew", strings.NewReader(`{"lease_id":"`+ids[0]+`"}`), nil)
	wantProblem(t, "renew a lease under a session", resp, body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)

	e.clock.Advance(5 * time.Second)
	rn, err := e.c.RenewSessionWithResponse(e.ctx, ref, api.SessionIDRequest{SessionId: id})
	if err != nil || rn.JSON200 == nil || deref(rn.JSON200.Leases) != 2 || rn.JSON200.SessionId != nil {
		t.Fatalf("RenewSession = %v, %+v; want 2 leases renewed, no session_id", status(rn), rn.JSON200)
	}
	if st := e.state("b"); !st.Held || *st.ExpiresAt != rn.JSON200.ExpiresAt {
		t.Errorf("b after the session's renewal = %+v, want held until %v", st, rn.JSON200.ExpiresAt)
	}
	cl, err := e.c.CloseSessionWithResponse(e.ctx, ref, api.SessionIDRequest{SessionId: id})
	if err != nil || cl.JSON200 == nil || deref(cl.JSON200.Leases) != 2 || cl.JSON200.ClosedAt == nil {
		t.Fatalf("CloseSession = %v, %+v; want 2 leases released", status(cl), cl.JSON200)
	}
	for _, name := range []string{"a", "b"} {
		evs := e.events(name)
		if st := e.state(name); st.Held || evs[len(evs)-1].Type != "released" || deref(evs[len(evs)-1].Session) != ref {
			t.Errorf("%s after the close = %+v, last event %+v; want released, naming %s", name, st, evs[len(evs)-1], ref)
		}
	}

	other := lease.NewSessionID()
	for _, tc := range []struct {
		name, path, body string
		status           int
		code             api.ProblemCode
	}{
		{"ErrRenewClosed", "/v1/sessions/" + ref + "/renew", `{"session_id":"` + id + `"}`, http.StatusConflict, api.ProblemCodeSessionLost},
		{"ErrAcquireClosed", "/v1/leases/c/acquire", `{"holder":"p","ttl_ms":0,"session_id":"` + id + `"}`, http.StatusConflict, api.ProblemCodeSessionLost},
		{"ErrIDOfAnotherSession", "/v1/sessions/" + ref + "/close", `{"session_id":"` + other + `"}`, http.StatusNotFound, api.ProblemCodeNotFound},
		{"ErrUnknownSession", "/v1/leases/c/acquire", `{"holder":"p","ttl_ms":0,"session_id":"` + other + `"}`, http.StatusNotFound, api.ProblemCodeNotFound},
		{"ErrTTLAndSession", "/v1/leases/c/acquire", `{"holder":"p","ttl_ms":5000,"session_id":"` + id + `"}`, http.StatusBadRequest, api.ProblemCodeInvalidRequest},
		{"ErrNoTTL", "/v1/leases/c/acquire", `{"holder":"p"}`, http.StatusBadRequest, api.ProblemCodeInvalidRequest},
		{"ErrSessionTTL", "/v1/sessions", `{"holder":"p","ttl_ms":1}`, http.StatusBadRequest, api.ProblemCodeInvalidRequest},
		{"ErrBadRef", "/v1/sessions/nope/renew", `{"session_id":"` + id + `"}`, http.StatusBadRequest, api.ProblemCodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := e.do("POST", tc.path, strings.NewReader(tc.body), nil)
			wantProblem(t, "POST "+tc.path, resp, body, tc.status, tc.code)
		})
	}
}

// TestSessionOtherKeyForbidden: a writer may not renew, close or acquire under another key's
// session (its leases may lie outside the writer's prefixes); an admin may close it.
func TestSessionOtherKeyForbidden(t *testing.T) {
	e := newEnv(t)
	as := func(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }
	owner, other := servicetest.Key(t, e.store, auth.Writer, "a-"), servicetest.Key(t, e.store, auth.Writer)
	resp, body := e.do("POST", "/v1/sessions", strings.NewReader(`{"holder":"p","ttl_ms":10000}`), as(owner))
	var ss api.Session
	if err := json.Unmarshal(body, &ss); resp.StatusCode != http.StatusCreated || err != nil {
		t.Fatalf("open = %d %s", resp.StatusCode, body)
	}
	idBody := `{"session_id":"` + *ss.SessionId + `"}`
	for _, path := range []string{"/v1/sessions/" + ss.Session + "/renew", "/v1/sessions/" + ss.Session + "/close"} {
		resp, body := e.do("POST", path, strings.NewReader(idBody), as(other))
		wantProblem(t, "POST "+path+" by another writer", resp, body, http.StatusForbidden, api.ProblemCodeForbidden)
	}
	resp, body = e.do("POST", "/v1/leases/b-job/acquire", strings.NewReader(`{"holder":"p","ttl_ms":0,"session_id":"`+*ss.SessionId+`"}`), as(other))
	wantProblem(t, "acquire under another key's session", resp, body, http.StatusForbidden, api.ProblemCodeForbidden)
	if resp, body := e.do("POST", "/v1/sessions/"+ss.Session+"/close", strings.NewReader(idBody), nil); resp.StatusCode != http.StatusOK {
		t.Errorf("close by an admin = %d %s", resp.StatusCode, body)
	}
}
