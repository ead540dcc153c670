package handlers_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/api"
)

// TestShared: acquire with "mode":"shared" grants readers side by side, each with its own
// lease_id and token, and says so; an exclusive acquire is then 409 lease_held; mode with limit
// is 400; the state lists the holders; a fenced write with a reader's token is 409 shared_token,
// recorded as a rejection; an unknown mode is 400.
func TestShared(t *testing.T) {
	e := newEnv(t)
	var tokens []int64
	for i := range 2 {
		r, err := e.c.AcquireLeaseWithResponse(e.ctx, "cfg", nil, api.AcquireRequest{Holder: "r" + strconv.Itoa(i), TtlMs: 10000,
			Mode: ptr(api.AcquireRequestModeShared)})
		if err != nil || r.JSON200 == nil || deref(r.JSON200.Mode) != api.LeaseModeShared || deref(r.JSON200.Slot) != i || r.JSON200.Name != "cfg" {
			t.Fatalf("acquire shared #%d = %v, %+v; want a shared grant of slot %d", i, status(r), r.JSON200, i)
		}
		tokens = append(tokens, r.JSON200.Token)
	}
	resp, body := e.do("POST", "/v1/leases/cfg/acquire", strings.NewReader(`{"holder":"w","ttl_ms":10000}`), nil)
	wantProblem(t, "acquire exclusive beside readers", resp, body, http.StatusConflict, api.ProblemCodeLeaseHeld)
	resp, body = e.do("POST", "/v1/leases/cfg/acquire", strings.NewReader(`{"holder":"w","ttl_ms":10000,"mode":"shared","limit":2}`), nil)
	wantProblem(t, "acquire with mode and limit", resp, body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
	resp, body = e.do("POST", "/v1/leases/cfg/acquire", strings.NewReader(`{"holder":"w","ttl_ms":10000,"mode":"read"}`), nil)
	wantProblem(t, "acquire with an unknown mode", resp, body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)

	st := e.state("cfg")
	if deref(st.Mode) != api.LeaseStateModeShared || !st.Held || st.Holders == nil || len(*st.Holders) != 2 || (*st.Holders)[1].Holder != "r1" {
		t.Errorf("state = %+v, want shared, held by r0 and r1", st)
	}
	resp, body = e.do("PUT", "/v1/resources/db", strings.NewReader("v"), map[string]string{"Fencing-Token": strconv.FormatInt(tokens[0], 10)})
	p := wantProblem(t, "fenced write with a reader's token", resp, body, http.StatusConflict, api.ProblemCodeSharedToken)
	if deref(p.PresentedToken) != tokens[0] {
		t.Errorf("presented_token = %d, want %d", deref(p.PresentedToken), tokens[0])
	}
	list, err := e.c.ListRejectionsWithResponse(e.ctx, &api.ListRejectionsParams{Resource: ptr("db")})
	if err != nil || list.JSON200 == nil || len(list.JSON200.Rejections) != 1 || list.JSON200.Rejections[0].PresentedToken != tokens[0] {
		t.Errorf("ListRejections(db) = %v %s, %v; want the reader's refused write", status(list), list.Body, err)
	}
}
