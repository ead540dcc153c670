package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
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

// TestGetToken: GET /v1/tokens/{token} tells a reader's token (shared, with its slot) from a
// writer's (exclusive), for any key that reads the name, and answers 404 not_found alike for a
// token never issued and for one on a name outside the key's prefixes (which it must not
// learn of); a token out of range is 400.
func TestGetToken(t *testing.T) {
	e := newEnv(t)
	r, err := e.c.AcquireLeaseWithResponse(e.ctx, "cfg", nil, api.AcquireRequest{Holder: "r0", TtlMs: 10000, Mode: ptr(api.AcquireRequestModeShared)})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("acquire shared = %v, %v", status(r), err)
	}
	reader := r.JSON200.Token
	if resp, body := e.do("POST", "/v1/leases/cfg/release", strings.NewReader(`{"lease_id":"`+deref(r.JSON200.LeaseId)+`"}`), nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("release = %d %s", resp.StatusCode, body)
	}
	writer := e.acquire("cfg", "w", 10e9).Token
	hidden := e.acquire("hr-pay", "alice", 10e9).Token

	for _, c := range []struct {
		token int64
		want  api.TokenInfo
	}{
		{reader, api.TokenInfo{Token: reader, Name: "cfg", Slot: ptr("cfg#0"), Mode: api.TokenInfoModeShared, Holder: "r0"}},
		{writer, api.TokenInfo{Token: writer, Name: "cfg", Mode: api.TokenInfoModeExclusive, Holder: "w"}},
	} {
		got, err := e.c.GetTokenWithResponse(e.ctx, c.token)
		if err != nil || got.JSON200 == nil {
			t.Fatalf("GetToken(%d) = %v %s, %v", c.token, status(got), got.Body, err)
		}
		g := *got.JSON200
		g.AcquiredAt = c.want.AcquiredAt
		if g.Token != c.want.Token || g.Name != c.want.Name || deref(g.Slot) != deref(c.want.Slot) || g.Mode != c.want.Mode || g.Holder != c.want.Holder {
			t.Errorf("GetToken(%d) = %+v, want %+v", c.token, g, c.want)
		}
	}
	scoped := servicetest.Key(t, e.store, auth.Reader, "cfg")
	resp, body := e.bearerDo(scoped, "GET", "/v1/tokens/"+strconv.FormatInt(reader, 10), "", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"mode":"shared"`) {
		t.Errorf("GET reader's token as a cfg-scoped reader = %d %s, want 200 shared", resp.StatusCode, body)
	}
	resp, outside := e.bearerDo(scoped, "GET", "/v1/tokens/"+strconv.FormatInt(hidden, 10), "", nil)
	wantProblem(t, "GET a token outside the key's scope", resp, outside, http.StatusNotFound, api.ProblemCodeNotFound)
	resp, never := e.bearerDo(scoped, "GET", "/v1/tokens/"+strconv.FormatInt(lease.MaxToken, 10), "", nil)
	wantProblem(t, "GET a token never issued", resp, never, http.StatusNotFound, api.ProblemCodeNotFound)
	same := func(body []byte, token int64) string { // the answer less what differs by request
		var p api.Problem
		json.Unmarshal(body, &p)
		return strings.ReplaceAll(string(p.Code)+" "+deref(p.Detail), strconv.FormatInt(token, 10), "T")
	}
	if strings.Contains(string(outside), "hr-") || strings.Contains(string(outside), "alice") || same(outside, hidden) != same(never, lease.MaxToken) {
		t.Errorf("a token outside the scope answers %s, one never issued %s: want the same answer", outside, never)
	}
	resp, body = e.do("GET", "/v1/tokens/9007199254740992", nil, nil)
	wantProblem(t, "GET a token above MaxToken", resp, body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
}

// TestEventsOfSharedName: GET /v1/leases/{name}/events of a name readers took answers its
// readers' events (each under its slot, marked shared) with its writers', oldest first; a
// semaphore's its slots'.
func TestEventsOfSharedName(t *testing.T) {
	e := newEnv(t)
	r, err := e.c.AcquireLeaseWithResponse(e.ctx, "db", nil, api.AcquireRequest{Holder: "r0", TtlMs: 10000, Mode: ptr(api.AcquireRequestModeShared)})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("acquire shared = %v, %v", status(r), err)
	}
	if resp, body := e.do("POST", "/v1/leases/db/release", strings.NewReader(`{"lease_id":"`+deref(r.JSON200.LeaseId)+`"}`), nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("release = %d %s", resp.StatusCode, body)
	}
	w := e.acquire("db", "w", 10e9)
	e.acquire("db2", "other", 10e9)
	var got []string
	for _, ev := range e.events("db") {
		got = append(got, fmt.Sprintf("%s %s %d %s", ev.Type, ev.Name, ev.Token, deref(ev.Mode)))
	}
	want := []string{
		fmt.Sprintf("acquired db#0 %d shared", r.JSON200.Token), fmt.Sprintf("released db#0 %d shared", r.JSON200.Token),
		fmt.Sprintf("acquired db %d ", w.Token),
	}
	if !slices.Equal(got, want) {
		t.Errorf("events of db = %q, want %q", got, want)
	}
	s, err := e.c.AcquireLeaseWithResponse(e.ctx, "pool", nil, api.AcquireRequest{Holder: "p", TtlMs: 10000, Limit: ptr(2)})
	if err != nil || s.JSON200 == nil {
		t.Fatalf("acquire slot = %v, %v", status(s), err)
	}
	if evs := e.events("pool"); len(evs) != 1 || evs[0].Name != "pool#0" || evs[0].Token != s.JSON200.Token {
		t.Errorf("events of pool = %+v, want its slot's acquired", evs)
	}
}

// TestReportSharedRejection: a resource of one's own reports a reader's write it refused with
// code shared_token, whatever its fence (the token may be above it); the server takes it only
// for a reader's token in the key's reach, and a stale report still needs a token below the fence.
func TestReportSharedRejection(t *testing.T) {
	e := newEnv(t)
	r, err := e.c.AcquireLeaseWithResponse(e.ctx, "cfg", nil, api.AcquireRequest{Holder: "r0", TtlMs: 10000, Mode: ptr(api.AcquireRequestModeShared)})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("acquire shared = %v, %v", status(r), err)
	}
	reader := strconv.FormatInt(r.JSON200.Token, 10)
	writer := strconv.FormatInt(e.acquire("other", "w", 10e9).Token, 10)
	report := func(token, fence, code string) (*http.Response, []byte) {
		return e.do("POST", "/v1/rejections", strings.NewReader(`{"resource":"files-cfg","presented_token":`+token+`,"current_fence":`+fence+code+`}`),
			map[string]string{"Content-Type": "application/json"})
	}
	if resp, body := report(reader, "0", `,"code":"shared_token"`); resp.StatusCode != http.StatusAccepted {
		t.Errorf("report of a reader's write = %d %s, want 202", resp.StatusCode, body)
	}
	resp, body := report(writer, "0", `,"code":"shared_token"`)
	wantProblem(t, "shared report of a writer's token", resp, body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
	resp, body = report(reader, "0", ``)
	wantProblem(t, "stale report of a token above the fence", resp, body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
	scoped := servicetest.Key(t, e.store, auth.Writer, "files-")
	resp, body = e.bearerDo(scoped, "POST", "/v1/rejections", `{"resource":"files-cfg","presented_token":`+reader+`,"current_fence":0,"code":"shared_token"}`, nil)
	wantProblem(t, "shared report by a key that does not reach the token's lease", resp, body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
	list, err := e.c.ListRejectionsWithResponse(e.ctx, &api.ListRejectionsParams{Resource: ptr("files-cfg")})
	if err != nil || list.JSON200 == nil || len(list.JSON200.Rejections) != 1 || list.JSON200.Rejections[0].PresentedToken != r.JSON200.Token {
		t.Errorf("ListRejections(files-cfg) = %v %s, %v; want the one reader's write", status(list), list.Body, err)
	}
}
