package handlers_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
)

// TestAcquireAll: POST /v1/acquire grants every name, in the order asked, each with its own
// lease_id and token, renewed and released on its own; a held name refuses the set with 409
// lease_held naming it, Retry-After, and nothing granted.
func TestAcquireAll(t *testing.T) {
	e := newEnv(t)
	r, err := e.c.AcquireAllWithResponse(e.ctx, nil, api.AcquireAllRequest{Names: []string{"b", "a"}, Holder: "w", TtlMs: 10000})
	if err != nil || r.JSON200 == nil || len(r.JSON200.Leases) != 2 {
		t.Fatalf("acquire [b a] = %v, %v; want 200 with two leases", status(r), err)
	}
	ls := r.JSON200.Leases
	if ls[0].Name != "b" || ls[1].Name != "a" || ls[1].Token <= ls[0].Token || deref(ls[0].LeaseId) == deref(ls[1].LeaseId) ||
		ls[0].Holder != "w" || ls[0].TtlMs != 10000 {
		t.Errorf("leases = %+v; want b then a, growing tokens, two lease_ids, holder w, ttl 10000", ls)
	}
	if resp, body := e.do("POST", "/v1/leases/a/renew", strings.NewReader(`{"lease_id":"`+deref(ls[1].LeaseId)+`"}`), nil); resp.StatusCode != http.StatusOK {
		t.Errorf("renew a by its lease_id = %d %s", resp.StatusCode, body)
	}

	resp, body := e.do("POST", "/v1/acquire", strings.NewReader(`{"names":["c","a","d","b"],"holder":"x","ttl_ms":5000}`), nil)
	p := wantProblem(t, "acquire [c a d b] with a and b held", resp, body, http.StatusConflict, api.ProblemCodeLeaseHeld)
	if p.Held == nil || !slices.Equal(*p.Held, []string{"a", "b"}) || deref(p.Holder) != "w" || resp.Header.Get("Retry-After") != "10" {
		t.Errorf("problem = %s, Retry-After %q; want held [a b], holder w, Retry-After 10", body, resp.Header.Get("Retry-After"))
	}
	for _, n := range []string{"c", "d"} {
		if resp, body := e.do("GET", "/v1/leases/"+n, nil, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s after a refused set = %d %s, want 404: never granted", n, resp.StatusCode, body)
		}
	}
	if resp, body := e.do("POST", "/v1/leases/b/release", strings.NewReader(`{"lease_id":"`+deref(ls[0].LeaseId)+`"}`), nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("release b = %d %s", resp.StatusCode, body)
	}
	if st := e.state("a"); !st.Held {
		t.Errorf("a after b's release = %+v, want still held", st)
	}
}

// TestAcquireAllInvalid: a set that breaks the contract is 400 invalid_request, never a 500,
// and grants nothing.
func TestAcquireAllInvalid(t *testing.T) {
	e := newEnv(t)
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprintf("n%d", i))
	}
	for _, c := range []struct{ name, body string }{
		{"Empty", `{"names":[],"holder":"w","ttl_ms":5000}`},
		{"Missing", `{"holder":"w","ttl_ms":5000}`},
		{"Duplicate", `{"names":["a","b","a"],"holder":"w","ttl_ms":5000}`},
		{"InvalidName", `{"names":["a","b/c"],"holder":"w","ttl_ms":5000}`},
		{"TooMany", `{"names":[` + strings.Join(many, ",") + `],"holder":"w","ttl_ms":5000}`},
		{"UnknownMode", `{"names":["a"],"mode":"reader","holder":"w","ttl_ms":5000}`},
		{"TTLTooShort", `{"names":["a"],"holder":"w","ttl_ms":5}`},
		{"TTLWithSession", `{"names":["a"],"holder":"w","ttl_ms":5000,"session_id":"lks_x"}`},
		{"NoHolder", `{"names":["a"],"holder":"","ttl_ms":5000}`},
		{"WaitTooLong", `{"names":["a"],"holder":"w","ttl_ms":5000,"wait_ms":999999999}`},
		{"UnknownField", `{"names":["a"],"holder":"w","ttl_ms":5000,"limit":2}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := e.do("POST", "/v1/acquire", strings.NewReader(c.body), nil)
			wantProblem(t, "acquire "+c.body, resp, body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
		})
	}
	for _, key := range []string{strings.Repeat("k", 15), strings.Repeat("k", 256), "clé-" + strings.Repeat("k", 20)} {
		resp, body := e.do("POST", "/v1/acquire", strings.NewReader(`{"names":["a"],"holder":"w","ttl_ms":5000}`), map[string]string{"Idempotency-Key": key})
		wantProblem(t, fmt.Sprintf("acquire [a] with Idempotency-Key %q", key), resp, body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
	}
	if resp, body := e.do("GET", "/v1/leases/a", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET a = %d %s, want 404: nothing granted", resp.StatusCode, body)
	}
	resp, body := e.do("POST", "/v1/acquire", strings.NewReader(`{"names":["a"],"mode":"exclusive","holder":"w","ttl_ms":5000}`), nil)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("acquire [a] in mode exclusive = %d %s, want 200", resp.StatusCode, body)
	}
}

// TestAcquireAllScope: a writer needs every name of the set in its scope; one outside refuses
// the set with 403 and grants nothing. A key's cap counts every grant of a set: one that would
// pass it is 429 too_many_leases, whole.
func TestAcquireAllScope(t *testing.T) {
	e := newServiceEnv(t, service.Config{Auth: handlers.AuthConfig{MaxHeldPerKey: 3}})
	w := servicetest.Key(t, e.store, auth.Writer, "in-")
	resp, body := e.bearerDo(w, "POST", "/v1/acquire", `{"names":["in-a","other-b"],"holder":"w","ttl_ms":5000}`, nil)
	wantProblem(t, "acquire [in-a other-b] by a writer of in-", resp, body, http.StatusForbidden, api.ProblemCodeForbidden)
	if r, b := e.do("GET", "/v1/leases/in-a", nil, nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("GET in-a = %d %s, want 404", r.StatusCode, b)
	}
	if resp, body := e.bearerDo(w, "POST", "/v1/acquire", `{"names":["in-a","in-b"],"holder":"w","ttl_ms":5000}`, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("acquire [in-a in-b] by a writer of in- = %d %s, want 200", resp.StatusCode, body)
	}
	resp, body = e.bearerDo(w, "POST", "/v1/acquire", `{"names":["in-c","in-d"],"holder":"w","ttl_ms":5000}`, nil)
	wantProblem(t, "acquire 2 more by a key capped at 3 holding 2", resp, body, http.StatusTooManyRequests, api.ProblemCodeTooManyLeases)
	wantRetryAfter(t, "acquire 2 more by a key capped at 3 holding 2", resp)
	if r, b := e.do("GET", "/v1/leases/in-c", nil, nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("GET in-c = %d %s, want 404", r.StatusCode, b)
	}
}

// TestAcquireAllWaits: with wait_ms the request waits in the line of every name and answers
// 200 with both leases once the held one is released; a server without a waiting line answers
// 400 waiting_unsupported.
func TestAcquireAllWaits(t *testing.T) {
	e := newServiceEnv(t, service.Config{})
	b := e.acquire("b", "x", time.Minute)
	type answer struct {
		status int
		body   []byte
	}
	done := make(chan answer, 1)
	go func() {
		resp, body := e.do("POST", "/v1/acquire", strings.NewReader(`{"names":["a","b"],"holder":"w","ttl_ms":60000,"wait_ms":30000}`), nil)
		done <- answer{resp.StatusCode, body}
	}()
	waitFor(t, "the request in b's line", func() bool { return e.state("b").Waiters == 1 })
	if resp, body := e.do("POST", "/v1/leases/b/release", strings.NewReader(`{"lease_id":"`+deref(b.LeaseId)+`"}`), nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("release b = %d %s", resp.StatusCode, body)
	}
	select {
	case a := <-done:
		if a.status != http.StatusOK || !strings.Contains(string(a.body), `"name":"a"`) || !strings.Contains(string(a.body), `"name":"b"`) {
			t.Errorf("waiting acquire = %d %s, want 200 with a and b", a.status, a.body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting acquire was not answered after b's release")
	}

	noLine := newEnv(t)
	resp, body := noLine.do("POST", "/v1/acquire", strings.NewReader(`{"names":["a"],"holder":"w","ttl_ms":60000,"wait_ms":1000}`), nil)
	wantProblem(t, "acquire with wait_ms on a server without a line", resp, body, http.StatusBadRequest, api.ProblemCodeWaitingUnsupported)
}

// TestAcquireAllShared: mode shared grants every name as a shared lease beside other readers,
// all or none: a name held exclusive refuses the set (naming it) and grants no other name, and
// an exclusive acquire of a name read is refused until its readers let go.
func TestAcquireAllShared(t *testing.T) {
	e := newEnv(t)
	shared := api.AcquireAllRequestModeShared
	read := func(holder string, names ...string) *api.AcquireAllResponse {
		t.Helper()
		r, err := e.c.AcquireAllWithResponse(e.ctx, nil, api.AcquireAllRequest{Names: names, Holder: holder, TtlMs: 10000, Mode: &shared})
		if err != nil {
			t.Fatalf("acquire %v shared = %v", names, err)
		}
		return r
	}
	r1 := read("r1", "a", "b")
	r2 := read("r2", "b", "a")
	for _, r := range []*api.AcquireAllResponse{r1, r2} {
		if r.JSON200 == nil || len(r.JSON200.Leases) != 2 {
			t.Fatalf("acquire shared = %v %s, want 200 with two leases", status(r), r.Body)
		}
		for _, l := range r.JSON200.Leases {
			if deref(l.Mode) != api.LeaseModeShared {
				t.Errorf("lease %s mode = %v, want shared", l.Name, deref(l.Mode))
			}
		}
	}
	if st := e.state("a"); !st.Held || len(deref(st.Holders)) != 2 {
		t.Errorf("a read by r1 and r2 = %+v, want held with 2 holders", st)
	}
	resp, body := e.do("POST", "/v1/leases/a/acquire", strings.NewReader(`{"holder":"w","ttl_ms":5000}`), nil)
	wantProblem(t, "acquire a exclusive while read", resp, body, http.StatusConflict, api.ProblemCodeLeaseHeld)

	if resp, body := e.do("POST", "/v1/leases/c/acquire", strings.NewReader(`{"holder":"w","ttl_ms":5000}`), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("acquire c = %d %s", resp.StatusCode, body)
	}
	resp, body = e.do("POST", "/v1/acquire", strings.NewReader(`{"names":["d","a","c"],"mode":"shared","holder":"r3","ttl_ms":5000}`), nil)
	p := wantProblem(t, "acquire [d a c] shared with c held exclusive", resp, body, http.StatusConflict, api.ProblemCodeLeaseHeld)
	if p.Held == nil || !slices.Equal(*p.Held, []string{"c"}) {
		t.Errorf("problem = %s, want held [c]", body)
	}
	if resp, body := e.do("GET", "/v1/leases/d", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET d after a refused shared set = %d %s, want 404: never granted", resp.StatusCode, body)
	}
	if st := e.state("a"); len(deref(st.Holders)) != 2 {
		t.Errorf("a after a refused shared set = %+v, want its 2 readers only", st)
	}
}

// TestAcquireAllIdempotent: a retry of POST /v1/acquire with the same Idempotency-Key and body
// answers the same leases (tokens and lease_ids) and takes no new grant; the same key with
// another body is 400 invalid_request, as for a single acquire; once one of the grants ended
// the retry is 409 lease_lost.
func TestAcquireAllIdempotent(t *testing.T) {
	e := newEnv(t)
	key := &api.AcquireAllParams{IdempotencyKey: ptr("retry-all-0123456789abcdef")}
	body := api.AcquireAllRequest{Names: []string{"b", "a"}, Holder: "w", TtlMs: 10000}
	first, err := e.c.AcquireAllWithResponse(e.ctx, key, body)
	if err != nil || first.JSON200 == nil {
		t.Fatalf("acquire [b a] with a key = %v, %v", status(first), err)
	}
	t.Run("OKRetry", func(t *testing.T) {
		e.clock.Advance(time.Second)
		again, err := e.c.AcquireAllWithResponse(e.ctx, key, body)
		if err != nil || again.JSON200 == nil {
			t.Fatalf("retry = %v %s, %v; want the first answer", status(again), again.Body, err)
		}
		if diff := cmp.Diff(first.JSON200, again.JSON200); diff != "" {
			t.Errorf("retry answer differs (-first +retry):\n%s", diff)
		}
		if r, _ := e.c.ListLeaseEventsWithResponse(e.ctx, "a", nil); r.JSON200 == nil || len(r.JSON200.Events) != 1 {
			t.Errorf("events of a after the retry = %s, want the one acquired event", r.Body)
		}
	})
	for _, c := range []struct {
		name string
		body api.AcquireAllRequest
	}{
		{"ErrInvalidOtherHolder", api.AcquireAllRequest{Names: []string{"b", "a"}, Holder: "w2", TtlMs: 10000}},
		{"ErrInvalidOtherOrder", api.AcquireAllRequest{Names: []string{"a", "b"}, Holder: "w", TtlMs: 10000}},
		{"ErrInvalidOtherNames", api.AcquireAllRequest{Names: []string{"c", "d"}, Holder: "w", TtlMs: 10000}},
		{"ErrInvalidMoreNames", api.AcquireAllRequest{Names: []string{"b", "a", "c"}, Holder: "w", TtlMs: 10000}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := e.c.AcquireAllWithResponse(e.ctx, key, c.body)
			if err != nil {
				t.Fatal(err)
			}
			wantProblem(t, "acquire with the key reused", r.HTTPResponse, r.Body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
		})
	}
	if resp, body := e.do("GET", "/v1/leases/c", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET c = %d %s, want 404: a refused reuse of the key grants nothing", resp.StatusCode, body)
	}
	t.Run("ErrHeldWithoutKey", func(t *testing.T) {
		r, err := e.c.AcquireAllWithResponse(e.ctx, nil, body)
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "acquire without the key", r.HTTPResponse, r.Body, http.StatusConflict, api.ProblemCodeLeaseHeld)
	})
	t.Run("ErrLostAfterRelease", func(t *testing.T) {
		a := first.JSON200.Leases[1]
		if rel, err := e.c.ReleaseLeaseWithResponse(e.ctx, "a", api.ReleaseRequest{LeaseId: *a.LeaseId}); err != nil || rel.StatusCode() != http.StatusNoContent {
			t.Fatalf("release a by its replayed lease_id = %v, %v", status(rel), err)
		}
		r, err := e.c.AcquireAllWithResponse(e.ctx, key, body)
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "retry after a's release", r.HTTPResponse, r.Body, http.StatusConflict, api.ProblemCodeLeaseLost)
		if st := e.state("a"); st.Held {
			t.Errorf("a after the refused retry = %+v, want free: a retry takes no new grant", st)
		}
	})
}
