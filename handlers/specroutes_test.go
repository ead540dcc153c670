package handlers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/go-chi/chi/v5"
	validator "github.com/oapi-codegen/nethttp-middleware"
)

// referenceValidate is the request validation the server had before specRoutes: oapi-codegen's
// validator middleware, which finds the operation with kin-openapi's gorilla/mux router.
func referenceValidate(s *server, spec *openapi3.T) func(http.Handler) http.Handler {
	onErr := func(_ context.Context, err error, w http.ResponseWriter, r *http.Request, _ validator.ErrorHandlerOpts) {
		s.writeProblem(w, r, validationError(err))
	}
	full := validator.OapiRequestValidatorWithOptions(spec, &validator.Options{
		ErrorHandlerWithOpts: onErr, DoNotValidateServers: true, SilenceServersWarning: true,
		Options: openapi3filter.Options{MultiError: false},
	})
	noBody := validator.OapiRequestValidatorWithOptions(spec, &validator.Options{
		ErrorHandlerWithOpts: onErr, DoNotValidateServers: true, SilenceServersWarning: true,
		Options: openapi3filter.Options{ExcludeRequestBody: true},
	})
	return func(next http.Handler) http.Handler {
		withBody, without := full(next), noBody(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/resources/") {
				without.ServeHTTP(w, r)
				return
			}
			withBody.ServeHTTP(w, r)
		})
	}
}

// validatingRouter routes every operation of spec as New does, through jsonBody and validate,
// to a handler that echoes what validation left of the request.
func validatingRouter(t *testing.T, s *server, spec *openapi3.T, validate func(http.Handler) http.Handler) http.Handler {
	t.Helper()
	echo := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read body: %v", err)
		}
		var names []string
		for k := range r.Header {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			fmt.Fprintf(w, "%s: %q\n", k, r.Header[k])
		}
		fmt.Fprintf(w, "%s %s?%s\n%s", r.Method, r.URL.Path, r.URL.RawQuery, body)
	}
	r := chi.NewRouter()
	r.Group(func(r chi.Router) {
		r.Use(s.jsonBody, validate)
		for path, item := range spec.Paths.Map() {
			for method := range item.Operations() {
				r.MethodFunc(method, path, echo)
			}
		}
	})
	return r
}

// The operation table answers every request as the router it replaced did: the same status,
// problem and request passed on, over every route of the spec with path parameters good and
// bad (encoded, empty, too long), bodies good and bad, and headers and queries out of bounds.
func TestSpecRoutesAnswerAsTheReference(t *testing.T) {
	s := &server{log: slog.New(slog.DiscardHandler)}
	spec, routes, fallback := countedRoutes(t)
	refSpec, err := validationSpec()
	if err != nil {
		t.Fatal(err)
	}
	got := validatingRouter(t, s, spec, s.validate(routes))
	want := validatingRouter(t, s, refSpec, referenceValidate(s, refSpec))

	params := []string{"job", "a.b_c:d-e", "", "a%2Fb", "a%20b", "%41bc", "%C3%A9", ".x", "-x",
		strings.Repeat("n", 200), strings.Repeat("n", 201), "ses_0123456789abcdef", "ses_0123",
		"key_abcdefghijklmnop", "key_ABCDEFGHIJKLMNOP", "a%25b", "a'b", "a;b=c"}
	type target struct {
		path string
		full bool // with every body and header set, else one of each
	}
	var targets []target
	for _, tmpl := range spec.Paths.InMatchingOrder() {
		for _, p := range params {
			path := tmpl
			for strings.Contains(path, "{") {
				i, j := strings.Index(path, "{"), strings.Index(path, "}")
				path = path[:i] + p + path[j+1:]
			}
			targets = append(targets, target{path, true}, target{path + "/", false}, target{path + "/x", false})
			if p == "job" {
				for _, q := range []string{"?wait_ms=x", "?limit=0&after=zz", "?limit=5", "?prefix=a&limit=99999"} {
					targets = append(targets, target{path + q, true})
				}
			}
		}
	}
	bodies := []string{`{"holder":"a","ttl_ms":1000}`, "", `{}`, `[]`, `null`, `7`, `"s"`, `x`,
		`{"holder":"a","ttl_ms":1000,"limit":3,"wait_ms":5}`, `{"holder":"a","ttl_ms":1000} {}`,
		`{"holder":"","ttl_ms":-1}`, `{"holder":"a","ttl_ms":1000,"zz":1}`, `{"lease_id":"l"}`,
		`{"lease_id":"l","ttl_ms":2000,"metadata":{"a":1}}`, `{"lease_id":""}`, `{"to":"w","reason":"r"}`,
		`{"ttl_ms":1000}`, `{"name":"k","role":"writer"}`, `{"holder":"a","ttl_ms":1000`}
	headers := []map[string]string{
		nil,
		{"Fencing-Token": "3", "Lease-Name": "job", "Content-Type": "text/plain"},
		{"Fencing-Token": "-1", "Idempotency-Key": "short", "If-Match": `"1"`},
		{"Fencing-Token": "x", "Idempotency-Key": strings.Repeat("k", 20), "Content-Type": "application/json"},
	}
	n := 0
	for _, tg := range targets {
		for _, method := range []string{"GET", "POST", "PUT", "DELETE", "PATCH"} {
			bs, hs := bodies[:1], headers[:1]
			switch {
			case tg.full && method == "POST":
				bs, hs = bodies, []map[string]string{headers[0], headers[2]}
			case tg.full && method == "PUT":
				bs, hs = bodies[:3], headers
			}
			for _, body := range bs {
				for _, h := range hs {
					req := func() *http.Request {
						r := httptest.NewRequest(method, tg.path, strings.NewReader(body))
						for k, v := range h {
							r.Header.Set(k, v)
						}
						return r
					}
					g, w := httptest.NewRecorder(), httptest.NewRecorder()
					got.ServeHTTP(g, req())
					want.ServeHTTP(w, req())
					n++
					if g.Code != w.Code || g.Body.String() != w.Body.String() ||
						g.Header().Get("Content-Type") != w.Header().Get("Content-Type") {
						t.Fatalf("%s %s %q %v = %d %s, the reference answers %d %s", method, tg.path, body, h,
							g.Code, g.Body, w.Code, w.Body)
					}
				}
			}
		}
	}
	t.Logf("%d requests answered alike, %d of them placed by the router", n, fallback.n)
	if fallback.n*4 > n {
		t.Errorf("the router placed %d of %d requests; the table should place most", fallback.n, n)
	}
}

// countedRoutes returns the validation spec and its table, whose router counts the requests
// the table leaves to it.
func countedRoutes(t *testing.T) (*openapi3.T, *specRoutes, *countingRouter) {
	t.Helper()
	spec, err := validationSpec()
	if err != nil {
		t.Fatal(err)
	}
	routes, err := newSpecRoutes(spec)
	if err != nil {
		t.Fatal(err)
	}
	fallback := &countingRouter{Router: routes.fallback}
	routes.fallback = fallback
	return spec, routes, fallback
}

// countingRouter counts the requests it is asked to place.
type countingRouter struct {
	routers.Router
	n int
}

func (c *countingRouter) FindRoute(r *http.Request) (*routers.Route, map[string]string, error) {
	c.n++
	return c.Router.FindRoute(r)
}

// A well-formed request on a hot route is placed by the table alone, with its raw parameters.
func TestSpecRoutesPlaceHotRoutesThemselves(t *testing.T) {
	_, routes, fallback := countedRoutes(t)
	for _, tc := range []struct{ method, pattern, path, param, value string }{
		{"POST", "/v1/leases/{name}/acquire", "/v1/leases/job-1/acquire", "name", "job-1"},
		{"POST", "/v1/leases/{name}/renew", "/v1/leases/a%2Fb/renew", "name", "a%2Fb"},
		{"POST", "/v1/leases/{name}/release", "/v1/leases/a%20b/release", "name", "a%20b"},
		{"PUT", "/v1/resources/{resource}", "/v1/resources/r.1", "resource", "r.1"},
		{"GET", "/v1/leases", "/v1/leases", "", ""},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		r.Pattern = tc.pattern
		route, params, err := routes.find(r)
		if err != nil || route.Path != tc.pattern || route.Method != tc.method || route.Operation == nil ||
			params[tc.param] != tc.value || len(params) != strings.Count(tc.pattern, "{") {
			t.Errorf("find(%s %s) = %v %v %v, want %s with %s=%q", tc.method, tc.path, route, params, err, tc.pattern, tc.param, tc.value)
		}
		routes.release(params) // the next find takes it back, with nothing left of this one
	}
	if fallback.n != 0 {
		t.Errorf("the router placed %d requests, want none", fallback.n)
	}
}

// The table refuses a spec whose paths overlap, where chi and kin-openapi's router could
// choose different operations for one request.
func TestSpecRoutesRefuseOverlappingPaths(t *testing.T) {
	spec, err := validationSpec()
	if err != nil {
		t.Fatal(err)
	}
	item := spec.Paths.Value("/v1/leases/{name}/acquire")
	spec.Paths.Set("/v1/leases/mine/{verb}", item)
	if _, err := newSpecRoutes(spec); err == nil || !strings.Contains(err.Error(), "match the same requests") {
		t.Errorf("newSpecRoutes(overlapping paths) = %v, want an error naming them", err)
	}
}

// The validation cost of one request on the hot routes, through chi and jsonBody to a handler
// that does nothing: with the router the server used before (reference) and with the table.
func BenchmarkValidate(b *testing.B) {
	s := &server{log: slog.New(slog.DiscardHandler)}
	requests := []struct{ name, method, path, body string }{
		{"acquire", "POST", "/v1/leases/job/acquire", `{"holder":"worker-3@host-a","ttl_ms":15000}`},
		{"renew", "POST", "/v1/leases/job/renew", `{"lease_id":"01JDQ3K5Z8M2N4P6R8T0V2X4Y6"}`},
		{"release", "POST", "/v1/leases/job/release", `{"lease_id":"01JDQ3K5Z8M2N4P6R8T0V2X4Y6"}`},
		{"fenced", "PUT", "/v1/resources/config", strings.Repeat("v", 100)},
	}
	for _, v := range []string{"reference", "table"} {
		spec, err := validationSpec()
		if err != nil {
			b.Fatal(err)
		}
		validate := referenceValidate(s, spec)
		if v == "table" {
			routes, err := newSpecRoutes(spec)
			if err != nil {
				b.Fatal(err)
			}
			validate = s.validate(routes)
		}
		r := chi.NewRouter()
		r.Group(func(r chi.Router) {
			r.Use(s.jsonBody, validate)
			for path, item := range spec.Paths.Map() {
				for method := range item.Operations() {
					r.MethodFunc(method, path, func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
				}
			}
		})
		for _, q := range requests {
			b.Run(q.name+"/"+v, func(b *testing.B) {
				w := httptest.NewRecorder()
				body := strings.NewReader(q.body)
				req := httptest.NewRequest(q.method, q.path, body)
				req.Header.Set("Fencing-Token", "7")
				b.ReportAllocs()
				for b.Loop() {
					body.Reset(q.body)
					req := req.Clone(req.Context())
					req.Body = io.NopCloser(body)
					r.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatalf("%s %s = %d %s", q.method, q.path, w.Code, w.Body)
					}
				}
			})
		}
	}
}

// A path cut by the wrong template (more or fewer segments, another literal, an empty
// parameter) does not fit it, and is left to the router.
func TestSpecRouteParams(t *testing.T) {
	_, routes, _ := countedRoutes(t)
	op := routes.ops[routeKey{"POST", "/v1/leases/{name}/acquire"}]
	for path, want := range map[string]bool{
		"/v1/leases/a/acquire":   true,
		"/v1/leases/a/acquire/":  false,
		"/v1/leases/a/acquire/x": false,
		"/v1/leases/a":           false,
		"/v1/leases/a/renew":     false,
		"/v1/leases//acquire":    false,
		"v1/leases/a/acquire":    false,
		"":                       false,
	} {
		params := map[string]string{}
		ok := op.params(params, path)
		if ok != want || ok && params["name"] != "a" {
			t.Errorf("params(%q) = %v, %v; want fit %v", path, params, ok, want)
		}
	}
}

// Validation looks for body defaults only in a spec that declares one, and then still writes
// them into the body: here a default of ttl_ms, and one of a schema under allOf.
func TestBodyDefaultsStillSet(t *testing.T) {
	s := &server{log: slog.New(slog.DiscardHandler)}
	for _, where := range []string{"property", "allOf"} {
		t.Run(where, func(t *testing.T) {
			spec, err := validationSpec()
			if err != nil {
				t.Fatal(err)
			}
			ttl := spec.Components.Schemas["RenewRequest"].Value.Properties["ttl_ms"].Value
			if where == "allOf" {
				ttl.AllOf = openapi3.SchemaRefs{{Value: &openapi3.Schema{
					Properties: openapi3.Schemas{"x": {Value: &openapi3.Schema{Default: 1.0}}}}}}
				if routes, err := newSpecRoutes(spec); err != nil || !routes.defaults {
					t.Fatalf("newSpecRoutes(a default under allOf) = defaults %v, %v; want true", routes != nil && routes.defaults, err)
				}
				return
			}
			ttl.Default = 5000.0
			routes, err := newSpecRoutes(spec)
			if err != nil || !routes.defaults {
				t.Fatalf("newSpecRoutes(a default) = defaults %v, %v; want true", routes != nil && routes.defaults, err)
			}
			w := httptest.NewRecorder()
			validatingRouter(t, s, spec, s.validate(routes)).ServeHTTP(w,
				httptest.NewRequest("POST", "/v1/leases/job/renew", strings.NewReader(`{"lease_id":"l"}`)))
			if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"ttl_ms":5000`) {
				t.Errorf("renew without ttl_ms = %d %s, want the default ttl_ms in the body", w.Code, w.Body)
			}
		})
	}
}
