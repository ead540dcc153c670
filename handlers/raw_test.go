package handlers_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/wiretime"
)

// snapshot is everything a refused request must leave unchanged.
type snapshot struct {
	Leases     []api.LeaseState
	Events     []api.Event
	Resources  []api.ResourceInfo
	Rejections []api.Rejection
}

func (e *env) snapshot() snapshot {
	e.t.Helper()
	var s snapshot
	l, err := e.c.ListLeasesWithResponse(e.ctx, &api.ListLeasesParams{Limit: ptr(1000)})
	if err != nil || l.JSON200 == nil {
		e.t.Fatalf("ListLeases() = %v, %v", status(l), err)
	}
	s.Leases = l.JSON200.Leases
	ev, err := e.store.Events(e.ctx, store.EventFilter{Limit: store.MaxLimit})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, x := range ev.Items {
		s.Events = append(s.Events, api.Event{Seq: x.Seq, Type: api.EventType(x.Type), Name: x.Name, Token: x.Token, At: wiretime.From(x.At)})
	}
	r, err := e.c.ListResourcesWithResponse(e.ctx, &api.ListResourcesParams{Limit: ptr(1000)})
	if err != nil || r.JSON200 == nil {
		e.t.Fatalf("ListResources() = %v, %v", status(r), err)
	}
	s.Resources = r.JSON200.Resources
	rj, err := e.c.ListRejectionsWithResponse(e.ctx, &api.ListRejectionsParams{Limit: ptr(1000)})
	if err != nil || rj.JSON200 == nil {
		e.t.Fatalf("ListRejections() = %v, %v", status(rj), err)
	}
	s.Rejections = rj.JSON200.Rejections
	return s
}

// TestMalformedRequests sends requests that break the contract in every way we could think of.
// Each must answer 4xx application/problem+json with the right code, never a 500, and leave
// the stored data as it was.
func TestMalformedRequests(t *testing.T) {
	e := newEnv(t)
	held := e.acquire("job", "w1", time.Minute)
	id := *held.LeaseId
	if r, err := e.c.PutResourceWithBodyWithResponse(e.ctx, "res", &api.PutResourceParams{FencingToken: &held.Token}, "text/plain", strings.NewReader("v")); err != nil || r.JSON201 == nil {
		t.Fatalf("PutResource() = %v, %v", status(r), err)
	}
	before := e.snapshot()

	bigJSON := `{"holder":"w","ttl_ms":5000,"metadata":{"x":"` + strings.Repeat("a", 1<<20) + `"}}`
	bigMeta := `{"holder":"w","ttl_ms":5000,"metadata":{"x":"` + strings.Repeat("a", 4<<10) + `"}}`
	const (
		bad  = http.StatusBadRequest
		conf = http.StatusConflict
	)
	inv := api.ProblemCodeInvalidRequest
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		header map[string]string
		status int
		code   api.ProblemCode
	}{
		// Acquire bodies.
		{"Acquire/MalformedJSON", "POST", "/v1/leases/new/acquire", `{"holder":`, nil, bad, inv},
		{"Acquire/NotJSON", "POST", "/v1/leases/new/acquire", `holder=w&ttl_ms=5000`, nil, bad, inv},
		{"Acquire/EmptyBody", "POST", "/v1/leases/new/acquire", ``, nil, bad, inv},
		{"Acquire/Null", "POST", "/v1/leases/new/acquire", `null`, nil, bad, inv},
		{"Acquire/Array", "POST", "/v1/leases/new/acquire", `[]`, nil, bad, inv},
		{"Acquire/TTLString", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":"5000"}`, nil, bad, inv},
		{"Acquire/TTLFloat", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":5000.5}`, nil, bad, inv},
		{"Acquire/TTLHuge", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":1e400}`, nil, bad, inv},
		{"Acquire/HolderNumber", "POST", "/v1/leases/new/acquire", `{"holder":7,"ttl_ms":5000}`, nil, bad, inv},
		{"Acquire/UnknownField", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":5000,"ttl":1}`, nil, bad, inv},
		{"Acquire/MissingHolder", "POST", "/v1/leases/new/acquire", `{"ttl_ms":5000}`, nil, bad, inv},
		{"Acquire/MissingTTL", "POST", "/v1/leases/new/acquire", `{"holder":"w"}`, nil, bad, inv},
		{"Acquire/TTLZero", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":0}`, nil, bad, inv},
		{"Acquire/TTLBelowMin", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":999}`, nil, bad, inv},
		{"Acquire/TTLAboveMax", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":3600001}`, nil, bad, inv},
		{"Acquire/TTLNegative", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":-5000}`, nil, bad, inv},
		{"Acquire/TTLMaxInt64", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":9223372036854775807}`, nil, bad, inv},
		{"Acquire/LockDelayNegative", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":5000,"lock_delay_ms":-1}`, nil, bad, inv},
		{"Acquire/LockDelayAboveMax", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":5000,"lock_delay_ms":60001}`, nil, bad, inv},
		{"Acquire/WaitNegative", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":5000,"wait_ms":-1}`, nil, bad, inv},
		{"Acquire/WaitWithoutLine", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":5000,"wait_ms":10}`, nil, bad, api.ProblemCodeWaitingUnsupported},
		{"Acquire/HolderEmpty", "POST", "/v1/leases/new/acquire", `{"holder":"","ttl_ms":5000}`, nil, bad, inv},
		{"Acquire/Holder257", "POST", "/v1/leases/new/acquire", `{"holder":"` + strings.Repeat("h", 257) + `","ttl_ms":5000}`, nil, bad, inv},
		{"Acquire/HolderControl", "POST", "/v1/leases/new/acquire", `{"holder":"w\u0007","ttl_ms":5000}`, nil, bad, inv},
		{"Acquire/MetadataArray", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":5000,"metadata":[1]}`, nil, bad, inv},
		{"Acquire/MetadataString", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":5000,"metadata":"x"}`, nil, bad, inv},
		{"Acquire/MetadataOver4KiB", "POST", "/v1/leases/new/acquire", bigMeta, nil, bad, inv},
		{"Acquire/IdempotencyKeyTooLong", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":5000}`, map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}, bad, inv},
		{"Acquire/IdempotencyKeyTooShort", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":5000}`, map[string]string{"Idempotency-Key": strings.Repeat("k", 15)}, bad, inv},
		{"Acquire/IdempotencyKeyNotASCII", "POST", "/v1/leases/new/acquire", `{"holder":"w","ttl_ms":5000}`, map[string]string{"Idempotency-Key": "clé-" + strings.Repeat("k", 20)}, bad, inv},
		{"Acquire/Oversized", "POST", "/v1/leases/new/acquire", bigJSON, nil, http.StatusRequestEntityTooLarge, api.ProblemCodePayloadTooLarge},
		{"Acquire/HeldByAnother", "POST", "/v1/leases/job/acquire", `{"holder":"w2","ttl_ms":5000}`, nil, conf, api.ProblemCodeLeaseHeld},

		// Names in the path.
		{"Name/EncodedSlash", "POST", "/v1/leases/a%2Fb/acquire", `{"holder":"w","ttl_ms":5000}`, nil, bad, inv},
		{"Name/Space", "POST", "/v1/leases/a%20b/acquire", `{"holder":"w","ttl_ms":5000}`, nil, bad, inv},
		{"Name/Len201", "POST", "/v1/leases/" + strings.Repeat("n", 201) + "/acquire", `{"holder":"w","ttl_ms":5000}`, nil, bad, inv},
		{"Name/FirstDot", "POST", "/v1/leases/.job/acquire", `{"holder":"w","ttl_ms":5000}`, nil, bad, inv},
		{"Name/Unicode", "POST", "/v1/leases/caf%C3%A9/acquire", `{"holder":"w","ttl_ms":5000}`, nil, bad, inv},
		{"Name/Percent", "POST", "/v1/leases/a%25b/acquire", `{"holder":"w","ttl_ms":5000}`, nil, bad, inv},
		{"Name/GetLen201", "GET", "/v1/leases/" + strings.Repeat("n", 201), ``, nil, bad, inv},
		{"Name/RevokeBad", "DELETE", "/v1/leases/a%20b", ``, nil, bad, inv},
		{"Name/EventsBad", "GET", "/v1/leases/-x/events", ``, nil, bad, inv},
		{"Name/RenewBad", "POST", "/v1/leases/a~b/renew", `{"lease_id":"` + id + `"}`, nil, bad, inv},
		{"Name/ResourceBad", "PUT", "/v1/resources/a%2Fb", `v`, map[string]string{"Fencing-Token": "1"}, bad, inv},

		// Renew and release bodies.
		{"Renew/MalformedJSON", "POST", "/v1/leases/job/renew", `{`, nil, bad, inv},
		{"Renew/EmptyBody", "POST", "/v1/leases/job/renew", ``, nil, bad, inv},
		{"Renew/IDNumber", "POST", "/v1/leases/job/renew", `{"lease_id":5}`, nil, bad, inv},
		{"Renew/IDEmpty", "POST", "/v1/leases/job/renew", `{"lease_id":""}`, nil, bad, inv},
		{"Renew/IDTooLong", "POST", "/v1/leases/job/renew", `{"lease_id":"` + strings.Repeat("x", 129) + `"}`, nil, bad, inv},
		{"Renew/UnknownField", "POST", "/v1/leases/job/renew", `{"lease_id":"` + id + `","token":1}`, nil, bad, inv},
		{"Renew/TTLAboveMax", "POST", "/v1/leases/job/renew", `{"lease_id":"` + id + `","ttl_ms":3600001}`, nil, bad, inv},
		{"Renew/TTLNegative", "POST", "/v1/leases/job/renew", `{"lease_id":"` + id + `","ttl_ms":-1}`, nil, bad, inv},
		{"Renew/WrongID", "POST", "/v1/leases/job/renew", `{"lease_id":"lk_wrong"}`, nil, conf, api.ProblemCodeLeaseLost},
		{"Release/MissingID", "POST", "/v1/leases/job/release", `{}`, nil, bad, inv},
		{"Release/EmptyBody", "POST", "/v1/leases/job/release", ``, nil, bad, inv},
		{"Release/WrongName", "POST", "/v1/leases/other/release", `{"lease_id":"` + id + `"}`, nil, conf, api.ProblemCodeLeaseLost},

		// Query parameters.
		{"List/LimitZero", "GET", "/v1/leases?limit=0", ``, nil, bad, inv},
		{"List/LimitAboveMax", "GET", "/v1/leases?limit=1001", ``, nil, bad, inv},
		{"List/LimitNotANumber", "GET", "/v1/leases?limit=ten", ``, nil, bad, inv},
		{"List/StateUnknown", "GET", "/v1/leases?state=maybe", ``, nil, bad, inv},
		{"List/BadCursor", "GET", "/v1/leases?cursor=!!", ``, nil, bad, inv},
		{"List/PrefixTooLong", "GET", "/v1/leases?prefix=" + strings.Repeat("p", 201), ``, nil, bad, inv},
		{"Events/BadCursor", "GET", "/v1/leases/job/events?cursor=!!", ``, nil, bad, inv},
		{"Events/CursorNotSeq", "GET", "/v1/leases/job/events?cursor=YWJj", ``, nil, bad, inv},
		{"Rejections/BadSince", "GET", "/v1/rejections?since=yesterday", ``, nil, bad, inv},
		{"Rejections/BadCursor", "GET", "/v1/rejections?cursor=!!", ``, nil, bad, inv},

		// Fenced writes and reports.
		{"Put/NoToken", "PUT", "/v1/resources/res", `x`, nil, http.StatusPreconditionRequired, api.ProblemCodePreconditionRequired},
		{"Put/TokenNotANumber", "PUT", "/v1/resources/res", `x`, map[string]string{"Fencing-Token": "abc"}, bad, inv},
		{"Put/TokenAboveMax", "PUT", "/v1/resources/res", `x`, map[string]string{"Fencing-Token": "9223372036854775807"}, bad, inv},
		{"Put/BadLeaseName", "PUT", "/v1/resources/res", `x`, map[string]string{"Fencing-Token": "1", "Lease-Name": "a b"}, bad, inv},
		{"Put/BadContentType", "PUT", "/v1/resources/res", `x`, map[string]string{"Fencing-Token": "99999999999999", "Content-Type": "text/plain; ;;="}, bad, inv},
		{"Put/Oversized", "PUT", "/v1/resources/res", strings.Repeat("v", 1<<20+1), map[string]string{"Fencing-Token": "99999999999999"}, http.StatusRequestEntityTooLarge, api.ProblemCodePayloadTooLarge},
		{"Report/UnknownField", "POST", "/v1/rejections", `{"resource":"r","presented_token":1,"current_fence":2,"x":1}`, nil, bad, inv},
		{"Report/Missing", "POST", "/v1/rejections", `{"resource":"r"}`, nil, bad, inv},
		{"Report/NegativeToken", "POST", "/v1/rejections", `{"resource":"r","presented_token":-1,"current_fence":2}`, nil, bad, inv},
		{"Report/NotBelowFence", "POST", "/v1/rejections", `{"resource":"r","presented_token":2,"current_fence":2}`, nil, bad, inv},

		// Routing.
		{"Route/WrongMethod", "GET", "/v1/leases/job/acquire", ``, nil, http.StatusMethodNotAllowed, "method_not_allowed"},
		{"Route/WrongMethodPatch", "PATCH", "/v1/leases/job", `{}`, nil, http.StatusMethodNotAllowed, "method_not_allowed"},
		{"Route/WrongMethodDeleteList", "DELETE", "/v1/leases", ``, nil, http.StatusMethodNotAllowed, "method_not_allowed"},
		{"Route/Unknown", "GET", "/v1/nope", ``, nil, http.StatusNotFound, api.ProblemCodeNotFound},
		{"Route/UnknownNested", "POST", "/v1/leases/job/steal", `{}`, nil, http.StatusNotFound, api.ProblemCodeNotFound},
		{"Route/UnknownVersion", "GET", "/v2/leases", ``, nil, http.StatusNotFound, api.ProblemCodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body *bytes.Reader
			if tt.body != "" {
				body = bytes.NewReader([]byte(tt.body))
			}
			header := map[string]string{}
			if tt.method == "POST" {
				header["Content-Type"] = "application/json"
			}
			for k, v := range tt.header {
				header[k] = v
			}
			var resp *http.Response
			var got []byte
			if body == nil {
				resp, got = e.do(tt.method, tt.path, nil, header)
			} else {
				resp, got = e.do(tt.method, tt.path, body, header)
			}
			if resp.StatusCode >= 500 {
				t.Fatalf("%s %.60s = %d %s, want a 4xx", tt.method, tt.path, resp.StatusCode, got)
			}
			wantProblem(t, tt.method+" "+tt.name, resp, got, tt.status, tt.code)
		})
	}
	if diff := cmp.Diff(before, e.snapshot()); diff != "" {
		t.Errorf("refused requests changed the stored data (-before +after):\n%s", diff)
	}
}

// TestDurationOverflow: ttl_ms, lock_delay_ms and wait_ms are milliseconds in int64; converted
// to a time.Duration they overflow. A value that wraps around into the allowed range must still
// be refused, not granted with a duration the client never asked for.
func TestDurationOverflow(t *testing.T) {
	// -288230376151701744 ms × 10^6 wraps to exactly +10 s; 288230376151741744 ms to +30 s;
	// 18446744073709 ms (2^64 ns, rounded to ms) wraps to a little under 1 s.
	tests := []struct{ name, body string }{
		{"ErrInvalid/NegativeTTLWrapsTo10s", `{"holder":"w","ttl_ms":-288230376151701744}`},
		{"ErrInvalid/LockDelayWrapsTo30s", `{"holder":"w","ttl_ms":5000,"lock_delay_ms":288230376151741744}`},
		{"ErrInvalid/WaitWrapsTo30s", `{"holder":"w","ttl_ms":5000,"wait_ms":288230376151741744}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			resp, got := e.do(http.MethodPost, "/v1/leases/job/acquire", strings.NewReader(tt.body), map[string]string{"Content-Type": "application/json"})
			wantProblem(t, tt.name, resp, got, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
		})
	}
}

// TestTrailingJSON: a body with something after the JSON object is malformed, and must not be
// half-read and granted.
func TestTrailingJSON(t *testing.T) {
	for _, body := range []string{`{"holder":"w","ttl_ms":5000}{}`, `{"holder":"w","ttl_ms":5000} x`} {
		t.Run("ErrInvalid", func(t *testing.T) {
			e := newEnv(t)
			resp, got := e.do(http.MethodPost, "/v1/leases/job/acquire", strings.NewReader(body), map[string]string{"Content-Type": "application/json"})
			wantProblem(t, "POST "+body, resp, got, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
		})
	}
}
