package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/rs/cors"
)

// NormalizeOrigin checks that s is a browser origin, scheme://host[:port] with scheme http or
// https and nothing after the host, and returns it in the lower case browsers send. A wildcard
// is refused: every origin on the list may act with the keys its pages hold, so each is named.
func NormalizeOrigin(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return "", fmt.Errorf("CORS origin %q: %w", s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Contains(u.Host, "*") ||
		u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("CORS origin %q: want scheme://host[:port] (http or https, no path, no wildcard), e.g. https://app.example.com", s)
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// corsAllowedHeaders are the request headers a page on an allowed origin may send to /v1.
var corsAllowedHeaders = []string{"Authorization", "Content-Type", "Fencing-Token", "Lease-Name",
	"If-Match", "If-None-Match", "Idempotency-Key", "Last-Event-ID"}

// corsExposedHeaders are the answer headers such a page may read besides the safelisted ones.
var corsExposedHeaders = []string{"Fencing-Token", "ETag", "Retry-After", "Location"}

// withCORS lets pages on the given origins call the API (/v1) from a browser: it answers
// their preflights and marks the answers readable by them. Any other origin gets no CORS
// headers, so its pages can neither send the API's non-simple requests nor read the answers.
// With no origins, nothing changes.
//
// Credentials are not allowed: a page on an allowed origin brings an API key in
// Authorization. A request from such an origin also loses its cookies before authentication,
// so the dashboard's session (SameSite=Strict, but an allowed origin may be same-site) never
// authorizes a request another origin's page composed.
func withCORS(origins []string) func(http.Handler) http.Handler {
	if len(origins) == 0 {
		return func(next http.Handler) http.Handler { return next }
	}
	allowed := make(map[string]bool, len(origins))
	for _, o := range origins {
		allowed[o] = true
	}
	c := cors.New(cors.Options{
		AllowedOrigins: origins,
		AllowedMethods: []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete},
		AllowedHeaders: corsAllowedHeaders,
		ExposedHeaders: corsExposedHeaders,
		MaxAge:         600,
	})
	return func(next http.Handler) http.Handler {
		api := c.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if o := r.Header.Get("Origin"); allowed[o] && !sameHost(o, r.Host) {
				r.Header.Del("Cookie")
			}
			next.ServeHTTP(w, r)
		}))
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasPrefix(r.URL.Path, "/v1/") {
				next.ServeHTTP(w, r)
				return
			}
			// A preflight is answered here, before routing: name its route for the access log
			// and metrics, which would otherwise call it unmatched.
			if rc := chi.RouteContext(r.Context()); rc != nil && r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				rc.RoutePatterns = append(rc.RoutePatterns[:0], "/v1/*")
			}
			api.ServeHTTP(w, r)
		})
	}
}

// sameHost reports whether origin names host, the request's own.
func sameHost(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, host)
}
