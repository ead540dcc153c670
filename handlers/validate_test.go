package handlers_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/api"
)

// The requests the spec refuses on the hot routes (acquire, renew, release, fenced write), with
// the answers they have always had: validation runs on them, and says the same.
func TestValidationOnHotRoutes(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("n", 201)
	fenced := map[string]string{"Fencing-Token": "1"}
	for _, tc := range []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		code, detail             string
		allow                    string
	}{
		{"acquire unknown field", "POST", "/v1/leases/job/acquire", `{"holder":"a","ttl_ms":1000,"bogus":1}`, nil,
			400, "invalid_request", `body: property "bogus" is unsupported`, ""},
		{"acquire missing holder", "POST", "/v1/leases/job/acquire", `{"ttl_ms":1000}`, nil,
			400, "invalid_request", `body: Error at "/holder": property "holder" is missing`, ""},
		{"acquire holder wrong type", "POST", "/v1/leases/job/acquire", `{"holder":7,"ttl_ms":1000}`, nil,
			400, "invalid_request", `body: Error at "/holder": value must be a string`, ""},
		{"acquire limit out of bounds", "POST", "/v1/leases/job/acquire", `{"holder":"a","ttl_ms":1000,"limit":0}`, nil,
			400, "invalid_request", `body: Error at "/limit": number must be at least 1`, ""},
		{"acquire empty body", "POST", "/v1/leases/job/acquire", ``, nil,
			400, "invalid_request", `body: value is required but missing`, ""},
		{"acquire not JSON", "POST", "/v1/leases/job/acquire", `holder=a`, nil,
			400, "invalid_request", `body: invalid character 'h' looking for beginning of value`, ""},
		{"acquire two values", "POST", "/v1/leases/job/acquire", `{"holder":"a","ttl_ms":1000} {}`, nil,
			400, "invalid_request", `the body must be one JSON value, with nothing after it`, ""},
		{"acquire short idempotency key", "POST", "/v1/leases/job/acquire", `{"holder":"a","ttl_ms":1000}`,
			map[string]string{"Idempotency-Key": "short"},
			400, "invalid_request", `parameter Idempotency-Key (header): minimum string length is 16`, ""},
		{"acquire name too long", "POST", "/v1/leases/" + long + "/acquire", `{"holder":"a","ttl_ms":1000}`, nil,
			400, "invalid_request", `parameter name (path): string doesn't match the regular expression "^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$"`, ""},
		{"acquire name with a space", "POST", "/v1/leases/a%20b/acquire", `{"holder":"a","ttl_ms":1000}`, nil,
			400, "invalid_request", `parameter name (path): string doesn't match the regular expression "^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$"`, ""},
		{"acquire name with an encoded slash", "POST", "/v1/leases/a%2Fb/acquire", `{"holder":"a","ttl_ms":1000}`, nil,
			400, "invalid_request", `parameter name (path): string doesn't match the regular expression "^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$"`, ""},
		{"acquire name starting with a dot", "POST", "/v1/leases/.job/acquire", `{"holder":"a","ttl_ms":1000}`, nil,
			400, "invalid_request", `parameter name (path): string doesn't match the regular expression "^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$"`, ""},
		{"renew missing lease_id", "POST", "/v1/leases/job/renew", `{}`, nil,
			400, "invalid_request", `body: Error at "/lease_id": property "lease_id" is missing`, ""},
		{"renew empty lease_id", "POST", "/v1/leases/job/renew", `{"lease_id":""}`, nil,
			400, "invalid_request", `body: Error at "/lease_id": minimum string length is 1`, ""},
		{"renew array", "POST", "/v1/leases/job/renew", `[]`, nil,
			400, "invalid_request", `body: value must be an object`, ""},
		{"renew bad name", "POST", "/v1/leases/-x/renew", `{"lease_id":"l"}`, nil,
			400, "invalid_request", `parameter name (path): string doesn't match the regular expression "^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$"`, ""},
		{"release missing lease_id", "POST", "/v1/leases/job/release", `{"x":1}`, nil,
			400, "invalid_request", `body: property "x" is unsupported`, ""},
		{"release bad name", "POST", "/v1/leases/a%21/release", `{"lease_id":"l"}`, nil,
			400, "invalid_request", `parameter name (path): string doesn't match the regular expression "^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$"`, ""},
		{"fenced without token", "PUT", "/v1/resources/r1", `v`, nil,
			428, "precondition_required", `a fenced write needs a Fencing-Token header`, ""},
		{"fenced negative token", "PUT", "/v1/resources/r1", `v`, map[string]string{"Fencing-Token": "-1"},
			400, "invalid_request", `parameter Fencing-Token (header): number must be at least 0`, ""},
		{"fenced token not a number", "PUT", "/v1/resources/r1", `v`, map[string]string{"Fencing-Token": "x"},
			400, "invalid_request", `parameter Fencing-Token (header): value x: an invalid integer: invalid syntax`, ""},
		{"fenced bad resource", "PUT", "/v1/resources/r%20", `v`, fenced,
			400, "invalid_request", `parameter resource (path): string doesn't match the regular expression "^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$"`, ""},
		{"unknown route", "POST", "/v1/leases/job/acquire/more", `{}`, nil,
			404, "not_found", `no route for POST /v1/leases/job/acquire/more`, ""},
		{"empty name", "POST", "/v1/leases//acquire", `{"holder":"a","ttl_ms":1000}`, nil,
			404, "not_found", `no matching operation was found`, ""},
		{"trailing slash", "POST", "/v1/leases/job/renew/", `{"lease_id":"l"}`, nil,
			404, "not_found", `no route for POST /v1/leases/job/renew/`, ""},
		{"wrong method on acquire", "GET", "/v1/leases/job/acquire", ``, nil,
			405, "method_not_allowed", `GET is not allowed on /v1/leases/job/acquire`, "POST"},
		{"wrong method on a resource", "POST", "/v1/resources/r1", `v`, fenced,
			405, "method_not_allowed", `POST is not allowed on /v1/resources/r1`, "GET, HEAD, PUT, DELETE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body *strings.Reader
			if tc.body != "" || tc.method != "GET" {
				body = strings.NewReader(tc.body)
			}
			var resp *http.Response
			var b []byte
			if body == nil {
				resp, b = e.do(tc.method, tc.path, nil, tc.header)
			} else {
				resp, b = e.do(tc.method, tc.path, body, tc.header)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("%s %s = %d %s, want %d", tc.method, tc.path, resp.StatusCode, b, tc.status)
			}
			var p api.Problem
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatalf("body %q: %v", b, err)
			}
			if string(p.Code) != tc.code || p.Detail == nil || *p.Detail != tc.detail {
				t.Errorf("%s %s = %s %q, want %s %q", tc.method, tc.path, p.Code, deref(p.Detail), tc.code, tc.detail)
			}
			if got := resp.Header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow = %q, want %q", got, tc.allow)
			}
		})
	}
}
