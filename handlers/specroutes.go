package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/leasekeeper/leasekeeper/api"
)

// validationSpec is openapi.yaml as the request validator uses it.
func validationSpec() (*openapi3.T, error) {
	spec, err := api.GetSpec()
	if err != nil {
		return nil, fmt.Errorf("load embedded spec: %w", err)
	}
	spec.Servers = nil // validate paths, not hosts
	// Keys are checked by s.authenticate and the strict middleware; the validator's own
	// security check would only read ahead into the body.
	spec.Security = nil
	for _, item := range spec.Paths.Map() {
		for _, op := range item.Operations() {
			op.Security = nil
		}
	}
	return spec, nil
}

// specRoutes finds the operation of openapi.yaml a request is for, so that it can be validated.
//
// The API's routes are registered on chi from the same spec, and validation runs after chi has
// routed the request: chi's route pattern (r.Pattern) and the method name the operation, found
// in a table built once. Its path parameters are cut from the escaped path by the operation's
// template, as kin-openapi's own router gives them (raw, still percent-encoded). A request the
// table cannot place goes to that router (gorilla/mux, a regular expression per path, tried in
// turn), which is what every request went through before and costs several times more.
type specRoutes struct {
	ops      map[routeKey]*specRoute
	fallback routers.Router
	// maps are path parameter maps for reuse (see release): kin-openapi takes the parameters
	// as a map, and a new one for every request cost two allocations.
	maps sync.Pool
	// defaults is whether a request body schema declares a default, which the validator
	// writes into the body; without any, validation skips the work of looking for them.
	defaults bool
}

type routeKey struct{ method, pattern string }

// specRoute is one operation, with its path template cut at the slashes.
type specRoute struct {
	route *routers.Route
	segs  []string // "" where the template has a {parameter}
	names []string // the parameters' names, in order
}

// newSpecRoutes indexes every operation of spec by method and path template. The spec's paths
// may not overlap (two templates matching one path), since chi and the table would then
// disagree with kin-openapi's router on which one a request is for.
func newSpecRoutes(spec *openapi3.T) (*specRoutes, error) {
	fallback, err := gorillamux.NewRouter(spec)
	if err != nil {
		return nil, fmt.Errorf("route the spec: %w", err)
	}
	t := &specRoutes{ops: map[routeKey]*specRoute{}, fallback: fallback,
		maps: sync.Pool{New: func() any { return map[string]string{} }}, defaults: bodyDefaults(spec)}
	var templates []*specRoute
	for _, path := range spec.Paths.InMatchingOrder() {
		item := spec.Paths.Value(path)
		tmpl := &specRoute{}
		for i, seg := range strings.Split(path, "/") {
			if i == 0 {
				continue
			}
			if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
				tmpl.segs = append(tmpl.segs, "")
				tmpl.names = append(tmpl.names, seg[1:len(seg)-1])
				continue
			}
			if strings.ContainsAny(seg, "{}") {
				return nil, fmt.Errorf("path %s: a parameter must fill its whole segment", path)
			}
			tmpl.segs = append(tmpl.segs, seg)
		}
		for _, other := range templates {
			if overlap(tmpl.segs, other.segs) {
				return nil, fmt.Errorf("paths %s and %s match the same requests", path, other.route.Path)
			}
		}
		tmpl.route = &routers.Route{Spec: spec, Path: path, PathItem: item}
		templates = append(templates, tmpl)
		for method, op := range item.Operations() {
			route := *tmpl.route
			route.Method, route.Operation = method, op
			t.ops[routeKey{method, path}] = &specRoute{route: &route, segs: tmpl.segs, names: tmpl.names}
		}
	}
	return t, nil
}

// bodyDefaults reports whether a schema of a request body of spec, or of any part of one,
// declares a default.
func bodyDefaults(spec *openapi3.T) bool {
	seen := map[*openapi3.Schema]bool{}
	var has func(refs ...*openapi3.SchemaRef) bool
	has = func(refs ...*openapi3.SchemaRef) bool {
		for _, ref := range refs {
			if ref == nil || ref.Value == nil || seen[ref.Value] {
				continue
			}
			s := ref.Value
			seen[s] = true
			if s.Default != nil || has(s.Items, s.Not, s.AdditionalProperties.Schema) ||
				has(s.AllOf...) || has(s.AnyOf...) || has(s.OneOf...) {
				return true
			}
			for _, p := range s.Properties {
				if has(p) {
					return true
				}
			}
		}
		return false
	}
	for _, item := range spec.Paths.Map() {
		for _, op := range item.Operations() {
			if op.RequestBody == nil || op.RequestBody.Value == nil {
				continue
			}
			for _, mt := range op.RequestBody.Value.Content {
				if has(mt.Schema) {
					return true
				}
			}
		}
	}
	return false
}

// overlap reports whether some path matches both templates.
func overlap(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != "" && b[i] != "" && a[i] != b[i] {
			return false
		}
	}
	return true
}

// find returns the operation r is for and its path parameters, or the router's error
// (routers.ErrPathNotFound, routers.ErrMethodNotAllowed). Give the parameters to release
// once nothing holds them any more.
func (t *specRoutes) find(r *http.Request) (*routers.Route, map[string]string, error) {
	if op := t.ops[routeKey{r.Method, r.Pattern}]; op != nil {
		params := t.maps.Get().(map[string]string)
		if op.params(params, r.URL.EscapedPath()) {
			return op.route, params, nil
		}
		t.release(params)
	}
	return t.fallback.FindRoute(r)
}

// release takes back parameters that find returned, emptied, for another request.
func (t *specRoutes) release(params map[string]string) {
	if params != nil {
		clear(params)
		t.maps.Put(params)
	}
}

// params cuts path by the template into the empty map params, and reports whether it fits.
// A parameter takes one non-empty segment, as in gorilla/mux's default pattern [^/]+.
func (op *specRoute) params(params map[string]string, path string) bool {
	if path == "" || path[0] != '/' {
		return false
	}
	rest, n := path[1:], 0
	for i, seg := range op.segs {
		cur, next, more := strings.Cut(rest, "/")
		if more != (i < len(op.segs)-1) {
			return false
		}
		switch {
		case seg == "":
			if cur == "" {
				return false
			}
			params[op.names[n]] = cur
			n++
		case cur != seg:
			return false
		}
		rest = next
	}
	return true
}

// validate enforces the spec (patterns, bounds, required fields, no unknown fields) before the
// generated code runs. Fenced writes take any content type, so their bodies are not checked
// against a schema; everything else about them is.
func (s *server) validate(routes *specRoutes) func(http.Handler) http.Handler {
	// KeepValidatedValue as the nethttp-middleware validator this replaces set it.
	full := &openapi3filter.Options{KeepValidatedValue: true, SkipSettingDefaults: !routes.defaults}
	noBody := &openapi3filter.Options{KeepValidatedValue: true, ExcludeRequestBody: true}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			route, params, err := routes.find(r)
			// Nothing keeps the parameters after validation but its error, translated below.
			defer routes.release(params)
			if err == nil {
				opts := full
				if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/resources/") {
					opts = noBody
				}
				err = validateRequest(r.Context(), &openapi3filter.RequestValidationInput{
					Request: r, PathParams: params, Route: route, Options: opts,
				})
			}
			if err != nil {
				s.writeProblem(w, r, validationError(err))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// validateRequest is openapi3filter.ValidateRequest with its errors as the request validator
// middleware of oapi-codegen gave them: anything but a request or security error is wrapped.
func validateRequest(ctx context.Context, in *openapi3filter.RequestValidationInput) error {
	err := openapi3filter.ValidateRequest(ctx, in)
	switch err.(type) {
	case nil, *openapi3filter.RequestError, *openapi3filter.SecurityRequirementsError, openapi3.MultiError:
		return err
	default:
		return fmt.Errorf("error validating route: %w", err)
	}
}
