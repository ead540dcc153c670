package handlers

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

// routeMethods are the methods a route may answer, in the order Allow lists them.
var routeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// headAsGet answers HEAD wherever GET is routed (RFC 9110 §9.3.2): the request goes on as a
// GET, so the same checks, validation and headers apply, and net/http drops the body, since
// the connection's request is still the HEAD. The access log, outside, keeps the HEAD.
func headAsGet(routes chi.Routes) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodHead && !routes.Match(chi.NewRouteContext(), http.MethodHead, r.URL.Path) &&
				routes.Match(chi.NewRouteContext(), http.MethodGet, r.URL.Path) {
				r = r.Clone(r.Context())
				r.Method = http.MethodGet
			}
			next.ServeHTTP(w, r)
		})
	}
}

// allowed lists the methods routed at path for a 405's Allow header (RFC 9110 §15.5.6): chi
// knows them but gives them only to its own default handler. HEAD goes with GET (headAsGet).
func allowed(routes chi.Routes, path string) string {
	var out []string
	for _, m := range routeMethods {
		probe := m
		if m == http.MethodHead {
			probe = http.MethodGet
		}
		if routes.Match(chi.NewRouteContext(), probe, path) {
			out = append(out, m)
		}
	}
	return strings.Join(out, ", ")
}
