package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
)

// outOfScope are the strings of the hr- side that a billing- key must never read.
var outOfScope = []string{"hr-", "alice", "carol"}

func leaks(body []byte) string {
	for _, s := range outOfScope {
		if strings.Contains(string(body), s) {
			return s
		}
	}
	return ""
}

// bisect finds, as key, the highest token a fenced write is not refused as token_not_issued
// for, by the probes of the review: a write to billing-probe whose If-Match always fails.
func bisect(t *testing.T, e *env, key string) int64 {
	t.Helper()
	lo, hi := int64(0), lease.MaxToken
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		resp, b := e.bearerDo(key, "PUT", "/v1/resources/billing-probe", "v",
			map[string]string{"Fencing-Token": strconv.FormatInt(mid, 10), "If-Match": `"99"`})
		var p api.Problem
		json.Unmarshal(b, &p)
		switch p.Code {
		case api.ProblemCodeTokenNotIssued:
			hi = mid - 1
		case api.ProblemCodePreconditionFailed:
			lo = mid
		default:
			t.Fatalf("probe with token %d = %d %s", mid, resp.StatusCode, b)
		}
		if s := leaks(b); s != "" {
			t.Errorf("probe with token %d = %s; it shows %q", mid, b, s)
		}
	}
	return lo
}

// TestScopeHoldsThroughTokens replays the review's attack (invariant 8): a writer limited to
// billing- finds the newest token by bisection, writes and reports rejections with an hr-
// lease's token, and a billing- reader looks everywhere for what came of it, and of a stale
// write to an hr- resource made with a billing- lease's token. No answer names an hr- lease,
// resource or holder.
func TestScopeHoldsThroughTokens(t *testing.T) {
	e := newEnv(t) // the clock stands still until told: the hr- tokens run ahead of it
	writer := servicetest.Key(t, e.store, auth.Writer, "billing-")
	reader := servicetest.Key(t, e.store, auth.Reader, "billing-")
	own := e.acquire("billing-a", "bob@billing", time.Hour)
	hr := e.acquire("hr-payroll-lock", "alice@hr-host-7", time.Hour)

	if got := bisect(t, e, e.key); got != hr.Token {
		t.Errorf("an admin's bisection found %d, want the newest token %d", got, hr.Token)
	}
	if got := bisect(t, e, writer); got != own.Token {
		t.Errorf("a billing- writer's bisection found %d, want %d (its own newest token, the clock's): it learns nothing of hr-", got, own.Token)
	}

	e.clock.Advance(time.Second)
	tok := strconv.FormatInt(hr.Token, 10)
	resp, b := e.bearerDo(writer, "PUT", "/v1/resources/billing-r2", "v", map[string]string{"Fencing-Token": tok})
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated || leaks(b) != "" {
		t.Errorf("PUT billing-r2 with hr-'s token as billing- = %d %s; want it written as by a token that named no lease", resp.StatusCode, b)
	}
	report := `{"resource":"billing-r2","presented_token":` + tok + `,"current_fence":` + strconv.FormatInt(hr.Token+1, 10) + `}`
	resp, b = e.bearerDo(writer, "POST", "/v1/rejections", report, nil)
	if resp.StatusCode != http.StatusAccepted || leaks(b) != "" {
		t.Errorf("POST /v1/rejections with hr-'s token as billing- = %d %s; want 202 naming no lease", resp.StatusCode, b)
	}
	if evs := e.events("hr-payroll-lock"); len(evs) != 1 {
		t.Errorf("hr-payroll-lock's events = %+v, want its grant alone: the billing- report is not on it", evs)
	}

	// What an admin does with hr- tokens on billing- resources, and with billing-a's token on
	// an hr- resource, is put down to the tokens' leases; a billing- reader sees none of it.
	e.clock.Advance(time.Second)
	hr2 := e.acquire("hr-other", "carol@hr", time.Hour)
	admin := func(res string, token int64, wantStatus int) {
		t.Helper()
		resp, b := e.do("PUT", "/v1/resources/"+res, strings.NewReader("v"), map[string]string{"Fencing-Token": strconv.FormatInt(token, 10)})
		if resp.StatusCode/100 != wantStatus/100 {
			t.Fatalf("PUT %s with token %d as admin = %d %s, want %d", res, token, resp.StatusCode, b, wantStatus)
		}
	}
	admin("billing-r7", hr2.Token, http.StatusOK)
	admin("billing-r7", hr.Token, http.StatusConflict)
	admin("hr-res", hr2.Token, http.StatusOK)
	admin("hr-res", own.Token, http.StatusConflict)
	if resp, b := e.do("GET", "/v1/rejections?resource=billing-r7", nil, nil); !strings.Contains(string(b), "hr-payroll-lock") {
		t.Fatalf("the admin's rejections of billing-r7 = %d %s, want hr-payroll-lock named (the test's premise)", resp.StatusCode, b)
	}
	if resp, b := e.do("GET", "/v1/leases/billing-a/events", nil, nil); !strings.Contains(string(b), "hr-res") {
		t.Fatalf("the admin's events of billing-a = %d %s, want the rejection on hr-res (the test's premise)", resp.StatusCode, b)
	}

	for _, path := range []string{"/v1/rejections", "/v1/rejections?resource=billing-r7", "/v1/rejections?lease=hr-payroll-lock",
		"/v1/rejections?lease=billing-a", "/v1/resources", "/v1/resources/billing-r7/writers", "/v1/resources/billing-r2/writers",
		"/v1/leases/billing-a/events"} {
		resp, b := e.bearerDo(reader, "GET", path, "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s as a billing- reader = %d %s", path, resp.StatusCode, b)
		}
		if s := leaks(b); s != "" {
			t.Errorf("GET %s as a billing- reader shows %q: %s", path, s, b)
		}
	}
	for _, path := range []string{"/", "/resources", "/resources/billing-r7", "/resources/billing-r2", "/rejections",
		"/rejections?lease=hr-payroll-lock", "/leases/billing-a"} {
		resp, b := e.bearerDo(reader, "GET", path, "", map[string]string{"Accept": "text/html"})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s as a billing- reader = %d %s", path, resp.StatusCode, b)
		}
		b = []byte(strings.ReplaceAll(string(b), `value="hr-payroll-lock"`, "")) // the filter asked for, shown back
		if s := leaks(b); s != "" {
			i := strings.Index(string(b), s)
			t.Errorf("dashboard %s as a billing- reader shows %q: …%s…", path, s, b[max(0, i-200):min(len(b), i+100)])
		}
	}
	// The rejections of billing- resources still show, as of tokens that named no lease.
	_, b = e.bearerDo(reader, "GET", "/v1/rejections?resource=billing-r7", "", nil)
	var list api.RejectionList
	if err := json.Unmarshal(b, &list); err != nil || len(list.Rejections) != 0 {
		t.Errorf("billing-r7's rejections as a billing- reader = %s; want none (its lease is hr-payroll-lock)", b)
	}
	_, b = e.bearerDo(reader, "GET", "/v1/resources/billing-r7/writers", "", nil)
	var ws api.ListResourceWriters200JSONResponse
	if err := json.Unmarshal(b, &ws); err != nil || len(ws.Writers) != 1 || deref(ws.Writers[0].Lease) != "" || deref(ws.Writers[0].Holder) != "" {
		t.Errorf("billing-r7's writers as a billing- reader = %s; want its one write, without lease or holder", b)
	}
}

// TestScopedWatch: a billing- reader's watch stream does not carry the rejection of an hr-
// resource made with billing-a's token (invariant 8), though it is an event of billing-a.
func TestScopedWatch(t *testing.T) {
	e := newServiceEnv(t, service.Config{})
	reader := servicetest.Key(t, e.store, auth.Reader, "billing-")
	own := e.acquire("billing-a", "bob@billing", time.Hour)
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	stream := e.watchAs(t, ctx, reader)

	hr := e.acquire("hr-payroll-lock", "alice@hr-host-7", time.Hour)
	for _, tok := range []int64{hr.Token, own.Token} { // the second is stale
		e.do("PUT", "/v1/resources/hr-res", strings.NewReader("v"), map[string]string{"Fencing-Token": strconv.FormatInt(tok, 10)})
	}
	e.acquire("billing-end", "bob@billing", time.Hour)
	sc := bufio.NewScanner(stream.Body)
	for sc.Scan() {
		if s := leaks(sc.Bytes()); s != "" {
			t.Errorf("the billing- reader's stream shows %q: %s", s, sc.Text())
		}
		if strings.Contains(sc.Text(), "billing-end") {
			return
		}
	}
	t.Fatalf("the stream ended before billing-end's grant: %v", sc.Err())
}

// watchAs opens /v1/watch with key; the stream ends with ctx, or with t.
func (e *env) watchAs(t *testing.T, ctx context.Context, key string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/watch", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("watch = %v, %v", stream, err)
	}
	t.Cleanup(func() { stream.Body.Close() })
	return stream
}
