package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// access is who may call an operation, as the matrix expects it (written apart from the
// server's own rule table, so that a wrong rule there fails here).
type access int

const (
	public     access = iota // no key needed
	readAll                  // any key; lists show only what the key may read
	readNamed                // any key whose prefixes cover the name
	writeNamed               // writer or admin, name in scope
	writeAny                 // writer or admin, whatever its prefixes (no name involved)
	adminOnly                // admin
)

// matrixOp is one operation of openapi.yaml as the matrix sends it. Names are under "in-",
// the prefix of the in-scope writer; the out-of-scope writer has "other-".
type matrixOp struct {
	access access
	method string
	path   string
	body   string
	header map[string]string
}

func matrixOps(revokable string) map[string]matrixOp {
	acq := `{"holder":"w","ttl_ms":60000}`
	return map[string]matrixOp{
		"listLeases":          {readAll, "GET", "/v1/leases", "", nil},
		"getLease":            {readNamed, "GET", "/v1/leases/in-job", "", nil},
		"revokeLease":         {adminOnly, "DELETE", "/v1/leases/in-job", "", nil},
		"acquireLease":        {writeNamed, "POST", "/v1/leases/in-new/acquire", acq, nil},
		"acquireAll":          {writeNamed, "POST", "/v1/acquire", `{"names":["in-all-1","in-all-2"],"holder":"w","ttl_ms":60000}`, nil},
		"renewLease":          {writeNamed, "POST", "/v1/leases/in-job/renew", `{"lease_id":"lk_nope"}`, nil},
		"releaseLease":        {writeNamed, "POST", "/v1/leases/in-job/release", `{"lease_id":"lk_nope"}`, nil},
		"openSession":         {writeAny, "POST", "/v1/sessions", `{"holder":"w","ttl_ms":60000}`, nil},
		"renewSession":        {writeAny, "POST", "/v1/sessions/ses_0123456789abcdef/renew", `{"session_id":"lks_nope"}`, nil},
		"closeSession":        {writeAny, "POST", "/v1/sessions/ses_0123456789abcdef/close", `{"session_id":"lks_nope"}`, nil},
		"requestHandover":     {writeNamed, "POST", "/v1/leases/in-job/handover", `{"reason":"the matrix asks"}`, nil},
		"listLeaseEvents":     {readNamed, "GET", "/v1/leases/in-job/events", "", nil},
		"listResources":       {readAll, "GET", "/v1/resources", "", nil},
		"putResource":         {writeNamed, "PUT", "/v1/resources/in-res", "v", map[string]string{"Fencing-Token": "1"}},
		"getResource":         {readNamed, "GET", "/v1/resources/in-res", "", nil},
		"listResourceWriters": {readNamed, "GET", "/v1/resources/in-res/writers", "", nil},
		"listRejections":      {readAll, "GET", "/v1/rejections", "", nil},
		"getToken":            {readAll, "GET", "/v1/tokens/1", "", nil},
		"reportRejection":     {writeNamed, "POST", "/v1/rejections", `{"resource":"in-res","presented_token":1,"current_fence":2}`, nil},
		"watch":               {readAll, "GET", "/v1/watch", "", nil},
		"deleteResource":      {adminOnly, "DELETE", "/v1/resources/in-res", "", nil},
		"createKey":           {adminOnly, "POST", "/v1/keys", `{"label":"made by the matrix","role":"reader"}`, nil},
		"listKeys":            {adminOnly, "GET", "/v1/keys", "", nil},
		"revokeKey":           {adminOnly, "DELETE", "/v1/keys/" + revokable, "", nil},
		"healthz":             {public, "GET", "/healthz", "", nil},
		"readyz":              {public, "GET", "/readyz", "", nil},
	}
}

// headOps are the HEAD operations of openapi.yaml, each with the GET it is answered as: the
// matrix sends them as HEAD requests and wants what it wants of the GET.
var headOps = map[string]string{
	"headLeases": "listLeases", "headLease": "getLease", "headLeaseEvents": "listLeaseEvents",
	"headResources": "listResources", "headResource": "getResource", "headResourceWriters": "listResourceWriters",
	"headRejections": "listRejections", "headWatch": "watch", "headKeys": "listKeys", "headHealthz": "healthz",
	"headReadyz": "readyz", "headToken": "getToken",
}

// TestAuthorizationMatrix sends every operation of openapi.yaml as each kind of caller and
// checks the answer: 401 without a valid key, 403 without the right, neither with it. An
// operation added to the spec without a case here fails the test.
func TestAuthorizationMatrix(t *testing.T) {
	e := newServiceEnv(t, service.Config{})
	e.acquire("in-job", "holder", time.Minute)
	e.do("PUT", "/v1/resources/in-res", strings.NewReader("v0"), map[string]string{"Fencing-Token": "1"})
	revoked := servicetest.Key(t, e.store, auth.Writer)
	if _, err := e.store.RevokeKey(e.ctx, keyID(t, e, revoked), "test"); err != nil {
		t.Fatal(err)
	}
	callers := []struct {
		name string
		key  string
		role auth.Role
		in   bool // may act on "in-" names
	}{
		{"NoKey", "", "", false},
		{"UnknownKey", auth.NewSecret(), "", false},
		{"RevokedKey", revoked, "", false},
		{"Reader", servicetest.Key(t, e.store, auth.Reader), auth.Reader, true},
		{"WriterInScope", servicetest.Key(t, e.store, auth.Writer, "in-"), auth.Writer, true},
		{"WriterOutOfScope", servicetest.Key(t, e.store, auth.Writer, "other-"), auth.Writer, false},
		{"Admin", e.key, auth.Admin, true},
	}
	spare := servicetest.Key(t, e.store, auth.Reader) // what revokeKey revokes
	ops := matrixOps(keyID(t, e, spare))
	for head, get := range headOps {
		op := ops[get]
		op.method = http.MethodHead
		ops[head] = op
	}

	spec, err := openapi3.NewLoader().LoadFromData(leasekeeper.OpenAPI()) // openapi.yaml as written
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			if _, ok := ops[op.OperationID]; !ok {
				t.Errorf("%s %s (%s) has no case in the authorization matrix", method, path, op.OperationID)
			}
			ids = append(ids, op.OperationID)
		}
	}
	sort.Strings(ids)
	if len(ids) != len(ops) {
		t.Errorf("the spec has %d operations, the matrix %d", len(ids), len(ops))
	}
	cells := 0
	for _, id := range ids {
		op := ops[id]
		for _, c := range callers {
			t.Run(id+"/"+c.name, func(t *testing.T) {
				cells++
				want := expected(op.access, c.key != "" && c.role != "", c.role, c.in)
				got, body := matrixCall(t, e.url, op, c.key)
				switch {
				case want == http.StatusOK && (got == http.StatusUnauthorized || got == http.StatusForbidden || got >= 500):
					t.Errorf("%s %s as %s = %d %s, want it allowed", op.method, op.path, c.name, got, body)
				case want != http.StatusOK && got != want:
					t.Errorf("%s %s as %s = %d %s, want %d", op.method, op.path, c.name, got, body, want)
				}
			})
		}
	}
	t.Logf("authorization matrix: %d operations × %d callers = %d cells", len(ids), len(callers), cells)
}

// newServiceEnv is an env over the whole service (waiting line, watch hub) on the real clock.
func newServiceEnv(t *testing.T, cfg service.Config) *env {
	t.Helper()
	srv, st := servicetest.Start(t, cfg, sqlite.Options{})
	key := servicetest.KeyOf(srv.URL)
	hc := servicetest.Bearer(key)
	c, err := api.NewClientWithResponses(srv.URL, api.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: context.Background(), url: srv.URL, c: c, store: st, key: key, hc: hc}
}

// expected is the status class the matrix wants: 401, 403, or 200 for "allowed".
func expected(a access, valid bool, role auth.Role, in bool) int {
	switch {
	case a == public:
		return http.StatusOK
	case !valid:
		return http.StatusUnauthorized
	case a == readAll:
		return http.StatusOK
	case a == readNamed && in:
		return http.StatusOK
	case a == writeNamed && in && role != auth.Reader:
		return http.StatusOK
	case a == writeAny && role != auth.Reader:
		return http.StatusOK
	case a == adminOnly && role == auth.Admin:
		return http.StatusOK
	}
	return http.StatusForbidden
}

// matrixCall sends one request with key (none when empty) and returns the status and the
// start of the body. A watch stream is cut as soon as its status arrives.
func matrixCall(t *testing.T, url string, op matrixOp, key string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var body io.Reader
	if op.body != "" {
		body = strings.NewReader(op.body)
	}
	req, err := http.NewRequestWithContext(ctx, op.method, url+op.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if op.body != "" && op.method == "POST" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range op.header {
		req.Header.Set(k, v)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", op.method, op.path, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, "(stream)"
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	if resp.StatusCode == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("%s %s = 401 without a Bearer challenge (WWW-Authenticate %q)", op.method, op.path, resp.Header.Get("WWW-Authenticate"))
	}
	return resp.StatusCode, string(b)
}

// keyID finds the id of a key by its secret.
func keyID(t *testing.T, e *env, secret string) string {
	t.Helper()
	k, err := e.store.KeyByHash(e.ctx, auth.Hash(secret))
	if err != nil {
		t.Fatalf("KeyByHash: %v", err)
	}
	return k.ID
}

// bearerDo sends a request with key and returns the status and body.
func (e *env) bearerDo(key, method, path, body string, header map[string]string) (*http.Response, []byte) {
	e.t.Helper()
	h := map[string]string{"Authorization": "Bearer " + key}
	if body != "" && method == "POST" {
		h["Content-Type"] = "application/json"
	}
	for k, v := range header {
		h[k] = v
	}
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	return e.do(method, path, r, h)
}

func TestAuthProblems(t *testing.T) {
	e := newEnv(t)
	resp, b := e.do("GET", "/v1/leases", nil, map[string]string{"Authorization": "Basic dXNlcjpwYXNz"})
	wantProblem(t, "GET /v1/leases with Basic auth", resp, b, http.StatusUnauthorized, api.ProblemCodeUnauthenticated)
	reader := servicetest.Key(t, e.store, auth.Reader)
	resp, b = e.bearerDo(reader, "POST", "/v1/leases/job/acquire", `{"holder":"w","ttl_ms":60000}`, nil)
	p := wantProblem(t, "acquire as a reader", resp, b, http.StatusForbidden, api.ProblemCodeForbidden)
	if !strings.Contains(*p.Detail, "writer") {
		t.Errorf("403 detail = %q, want it to name the missing role", *p.Detail)
	}
	scoped := servicetest.Key(t, e.store, auth.Writer, "billing-")
	resp, b = e.bearerDo(scoped, "POST", "/v1/leases/payroll/acquire", `{"holder":"w","ttl_ms":60000}`, nil)
	p = wantProblem(t, "acquire out of scope", resp, b, http.StatusForbidden, api.ProblemCodeForbidden)
	if !strings.Contains(*p.Detail, "billing-") {
		t.Errorf("403 detail = %q, want it to name the key's prefixes", *p.Detail)
	}
	// A fenced write naming a lease out of scope is refused too.
	resp, b = e.bearerDo(scoped, "PUT", "/v1/resources/billing-out", "v", map[string]string{"Fencing-Token": "1", "Lease-Name": "payroll"})
	wantProblem(t, "PUT with Lease-Name out of scope", resp, b, http.StatusForbidden, api.ProblemCodeForbidden)
	// Health answers without a key (invariant 8, docs/DESIGN.md); everything else needs one.
	plain := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/openapi.yaml": 401, "/metrics": 401, "/": 401, "/signin": 200} {
		resp, err := plain.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s without a key = %d, want %d", path, resp.StatusCode, want)
		}
	}
	if resp, _ := e.do("GET", "/metrics", nil, map[string]string{"Authorization": "Bearer nope"}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /metrics with a bad key = %d, want 401", resp.StatusCode)
	}
}

// TestScopedKeySeesOnlyItsNames checks lists, the events of a name and the watch stream of a key
// limited to prefixes.
func TestScopedKeySeesOnlyItsNames(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"a-1", "b-1", "c-1"} {
		e.acquire(n, "w", time.Minute)
	}
	two := servicetest.Key(t, e.store, auth.Reader, "a-", "b-")
	one := servicetest.Key(t, e.store, auth.Reader, "b-")
	for _, tc := range []struct {
		key, query string
		want       string
	}{
		{two, "", "a-1,b-1"},
		{two, "?prefix=b", "b-1"},
		{two, "?prefix=c", ""},
		{one, "", "b-1"},
		{e.key, "", "a-1,b-1,c-1"},
	} {
		resp, b := e.bearerDo(tc.key, "GET", "/v1/leases"+tc.query, "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("list%s = %d %s", tc.query, resp.StatusCode, b)
		}
		if got := names(t, b); got != tc.want {
			t.Errorf("list%s as a scoped key = %q, want %q", tc.query, got, tc.want)
		}
	}
	if resp, _ := e.bearerDo(one, "GET", "/v1/leases/a-1", "", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("get a-1 as a b- key = %d, want 403", resp.StatusCode)
	}
	// Rejections are shown to a key whose prefixes cover their resource (or their lease).
	for _, res := range []string{"a-res", "c-res"} {
		l := e.acquire(res+"-lease", "w", time.Minute)
		tok := strconv.FormatInt(l.Token, 10)
		e.do("PUT", "/v1/resources/"+res, strings.NewReader("v"), map[string]string{"Fencing-Token": tok})
		e.do("PUT", "/v1/resources/"+res, strings.NewReader("late"), map[string]string{"Fencing-Token": "1"})
	}
	for key, want := range map[string]string{two: "a-res", one: "", e.key: "c-res,a-res"} {
		resp, b := e.bearerDo(key, "GET", "/v1/rejections", "", nil)
		var list api.RejectionList
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &list) != nil {
			t.Fatalf("list rejections = %d %s", resp.StatusCode, b)
		}
		var got []string
		for _, r := range list.Rejections {
			got = append(got, r.Resource)
		}
		if strings.Join(got, ",") != want {
			t.Errorf("rejections seen by a key = %q, want %q", strings.Join(got, ","), want)
		}
	}
}

func names(t *testing.T, body []byte) string {
	t.Helper()
	var list api.LeaseList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range list.Leases {
		out = append(out, l.Name)
	}
	return strings.Join(out, ",")
}
