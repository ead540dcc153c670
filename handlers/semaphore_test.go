package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/api"
)

// TestSemaphore: acquire with a limit hands out that many slots, each with its own lease_id
// and token; the next is 409 lease_held, another limit 409 limit_mismatch; the state shows the
// slots; a slot renews and releases by its lease_id under the semaphore's name.
func TestSemaphore(t *testing.T) {
	e := newEnv(t)
	var ids []string
	for i := range 2 {
		r, err := e.c.AcquireLeaseWithResponse(e.ctx, "pool", nil, api.AcquireRequest{Holder: "w", TtlMs: 10000, Limit: ptr(2)})
		if err != nil || r.JSON200 == nil || deref(r.JSON200.Slot) != i || deref(r.JSON200.Limit) != 2 || r.JSON200.Name != "pool" {
			t.Fatalf("acquire #%d with limit 2 = %v, %+v; want slot %d", i, status(r), r.JSON200, i)
		}
		ids = append(ids, *r.JSON200.LeaseId)
	}
	resp, body := e.do("POST", "/v1/leases/pool/acquire", strings.NewReader(`{"holder":"w","ttl_ms":10000,"limit":2}`), nil)
	wantProblem(t, "acquire #3", resp, body, http.StatusConflict, api.ProblemCodeLeaseHeld)
	resp, body = e.do("POST", "/v1/leases/pool/acquire", strings.NewReader(`{"holder":"w","ttl_ms":10000,"limit":3}`), nil)
	wantProblem(t, "acquire with another limit", resp, body, http.StatusConflict, api.ProblemCodeLimitMismatch)
	resp, body = e.do("POST", "/v1/leases/pool/acquire", strings.NewReader(`{"holder":"w","ttl_ms":10000,"limit":0}`), nil)
	wantProblem(t, "acquire with limit 0", resp, body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)

	st := e.state("pool")
	if deref(st.Limit) != 2 || st.Slots == nil || len(*st.Slots) != 2 || !st.Held {
		t.Errorf("state = %+v, want a full semaphore of 2 slots", st)
	}
	if resp, body := e.do("POST", "/v1/leases/pool/renew", strings.NewReader(`{"lease_id":"`+ids[1]+`"}`), nil); resp.StatusCode != http.StatusOK {
		t.Errorf("renew slot 1 = %d %s", resp.StatusCode, body)
	}
	if resp, body := e.do("POST", "/v1/leases/pool/release", strings.NewReader(`{"lease_id":"`+ids[0]+`"}`), nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("release slot 0 = %d %s", resp.StatusCode, body)
	}
	if st := e.state("pool"); st.Held {
		t.Errorf("state after a release = %+v, want room for one", st)
	}
}
