package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/wiretime"
)

// TestRequestHandover: the request is answered 202 with what was recorded, the holder's
// renewal carries it, the history shows it, the lease stays held; bad requests are 400, a
// free name 409 not_held, an unknown one 404.
func TestRequestHandover(t *testing.T) {
	e := newEnv(t)
	g := e.acquire("job", "w1", 10*time.Second)
	e.clock.Advance(time.Second)
	r, err := e.c.RequestHandoverWithResponse(e.ctx, "job", api.HandoverRequest{To: ptr("w2"), Reason: ptr("deploy")})
	if err != nil || r.JSON202 == nil {
		t.Fatalf("RequestHandover = %v, %v; want 202", status(r), err)
	}
	h := *r.JSON202
	if h.Name != "job" || h.Holder != "w1" || h.Token != g.Token || deref(h.To) != "w2" || deref(h.Reason) != "deploy" ||
		h.RequestedAt != wiretime.From(t0.Add(time.Second)) || !strings.Contains(deref(h.RequestedBy), "key_") {
		t.Errorf("RequestHandover = %+v, want job/w1/token %d to w2 for deploy, by the admin key, at t0+1s", h, g.Token)
	}
	rn, err := e.c.RenewLeaseWithResponse(e.ctx, "job", api.RenewRequest{LeaseId: *g.LeaseId})
	if err != nil || rn.JSON200 == nil || rn.JSON200.HandoverRequested == nil || !cmp.Equal(*rn.JSON200.HandoverRequested, h) {
		t.Fatalf("RenewLease = %v, %+v; want handover_requested %+v", status(rn), rn.JSON200, h)
	}
	if st := e.state("job"); !st.Held || st.Holder != "w1" {
		t.Errorf("state = %+v, want still held by w1: nothing is forced", st)
	}
	evs := e.events("job")
	if len(evs) != 3 || evs[1].Type != "handover_requested" || evs[1].Handover == nil || deref(evs[1].Handover.To) != "w2" ||
		deref(evs[1].Handover.Reason) != "deploy" || evs[1].Actor == nil {
		t.Errorf("events = %+v, want acquired, handover_requested (to w2, for deploy, with its actor), renewed", evs)
	}

	for _, tc := range []struct {
		name, path, body string
		status           int
		code             api.ProblemCode
	}{
		{"ErrBadTarget", "/v1/leases/job/handover", `{"to":""}`, http.StatusBadRequest, api.ProblemCodeInvalidRequest},
		{"ErrLongReason", "/v1/leases/job/handover", `{"reason":"` + strings.Repeat("x", 1025) + `"}`, http.StatusBadRequest, api.ProblemCodeInvalidRequest},
		{"ErrUnknownField", "/v1/leases/job/handover", `{"from":"w1"}`, http.StatusBadRequest, api.ProblemCodeInvalidRequest},
		{"ErrToTheHolder", "/v1/leases/job/handover", `{"to":"w1"}`, http.StatusBadRequest, api.ProblemCodeInvalidRequest},
		{"ErrNotFound", "/v1/leases/never/handover", `{}`, http.StatusNotFound, api.ProblemCodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := e.do("POST", tc.path, strings.NewReader(tc.body), nil)
			wantProblem(t, "POST "+tc.path, resp, body, tc.status, tc.code)
		})
	}
	if resp, _ := e.do("POST", "/v1/leases/job/release", strings.NewReader(`{"lease_id":"`+*g.LeaseId+`"}`), nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("release = %d", resp.StatusCode)
	}
	resp, body := e.do("POST", "/v1/leases/job/handover", strings.NewReader(`{}`), nil)
	wantProblem(t, "handover of a free lease", resp, body, http.StatusConflict, api.ProblemCodeNotHeld)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
