// Package dashboard is leasekeeper's server-rendered dashboard: the page handlers (overview,
// lease, sessions, rejections, resources, keys, sign-in) that read the store once per request
// and render the pure templ components of web. The HTTP edge (handlers) mounts it on its
// router behind its own middleware and hands it the seams it needs (Edge): who sent a request,
// how an error reads, and the key operations the dashboard shares with the API.
package dashboard

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"golang.org/x/time/rate"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/metrics"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/web"
)

// Edge is what the dashboard takes from the HTTP edge that mounts it.
type Edge interface {
	// Principal is the caller of a request that passed authentication; a principal with no
	// role before that.
	Principal(ctx context.Context) auth.Principal
	// SignIn is the hash of the request's dashboard sign-in, nil when it came with a key.
	SignIn(ctx context.Context) []byte
	// RequestID is the request's ID, shown on error pages.
	RequestID(ctx context.Context) string
	// Problem is the status and the detail the API answers err with (logging what it logs).
	Problem(ctx context.Context, err error) (status int, detail string)
	// OverTLS reports whether the request came over TLS (its cookies are then Secure).
	OverTLS(r *http.Request) bool
	// Key returns the live key whose secret is given. Codes: unauthenticated.
	Key(ctx context.Context, secret string) (auth.Key, error)
	// NewKey creates a key for the caller and returns its secret. Codes: invalid_request.
	NewKey(ctx context.Context, label string, role auth.Role, prefixes []string) (string, auth.Key, error)
	// RevokeKey revokes a key for the caller. Codes: invalid_request, not_found.
	RevokeKey(ctx context.Context, id string) error
	// KeyLastUsed is when key id was last used: the later of stored (the store's, written at
	// most once a minute) and the edge's own memory of it.
	KeyLastUsed(id string, stored time.Time) time.Time
}

// Acquirer is the waiting line, as far as the pages show it.
type Acquirer interface {
	// Waiters returns how many requests wait in line for name.
	Waiters(name string) int
}

// Config is what the dashboard needs. Store, Clock, Logger, Edge, Gate and Metrics are required.
type Config struct {
	Store    store.Store
	Acquirer Acquirer
	Clock    lease.Clock
	Logger   *slog.Logger
	Edge     Edge
	// Metrics count the operations the pages make (a revoke).
	Metrics *metrics.Metrics
	// Gate is the keys' rate, which a sign-in counts against.
	Gate *auth.Gate
	// Site is what every page shows around its content.
	Site web.Site
	// CSRFKey keys the tokens of the pages' forms.
	CSRFKey []byte
	// Started is when the server started, by Clock; Epoch names that start.
	Started time.Time
	Epoch   string
	// SignInRate and SignInBurst bound the sign-ins from one client address; SignInRate 0 does
	// not limit.
	SignInRate  rate.Limit
	SignInBurst int
	// SessionMax ends a sign-in that long after it began; MaxSessionsPerKey is how many sign-ins
	// one key keeps open (0 does not cap).
	SessionMax        time.Duration
	MaxSessionsPerKey int
}

// SessionCookie is the dashboard sign-in's cookie.
const SessionCookie = "lk_session"

// Dashboard serves the dashboard's pages.
type Dashboard struct{ d *dashboard }

// New returns the dashboard of cfg.
func New(cfg Config) *Dashboard {
	s := &server{store: cfg.Store, acquirer: cfg.Acquirer, clock: cfg.Clock, log: cfg.Logger, edge: cfg.Edge,
		metrics: cfg.Metrics, epoch: cfg.Epoch, started: cfg.Started,
		auth: &signInAuth{Edge: cfg.Edge, gate: cfg.Gate, signIns: newSignInGuard(cfg.SignInRate, cfg.SignInBurst),
			cfg: signInConfig{SessionMax: cfg.SessionMax, MaxDashboardSessionsPerKey: cfg.MaxSessionsPerKey}}}
	return &Dashboard{d: &dashboard{s: s, site: cfg.Site, csrfKey: cfg.CSRFKey}}
}

// Routes mounts the pages on r.
func (d *Dashboard) Routes(r chi.Router) { d.d.routes(r) }

// NotFound answers a request for a page that does not exist with the error page.
func (d *Dashboard) NotFound(w http.ResponseWriter, r *http.Request) {
	d.d.page(w, r, http.StatusNotFound, nil, web.ErrorInfo{Status: http.StatusNotFound,
		Detail: "There is no page at " + r.URL.Path + "."})
}

// WantsHTML reports whether an error for r should be a page rather than problem+json.
func WantsHTML(r *http.Request) bool {
	return !strings.HasPrefix(r.URL.Path, "/v1/") && strings.Contains(r.Header.Get("Accept"), "text/html")
}

// server is what the pages use of the server around them.
type server struct {
	store    store.Store
	acquirer Acquirer
	clock    lease.Clock
	log      *slog.Logger
	edge     Edge
	metrics  *metrics.Metrics
	auth     *signInAuth
	epoch    string
	started  time.Time
}

func (s *server) overTLS(r *http.Request) bool { return s.edge.OverTLS(r) }

func (s *server) newKey(ctx context.Context, label string, role auth.Role, prefixes []string) (string, auth.Key, error) {
	return s.edge.NewKey(ctx, label, role, prefixes)
}

func (s *server) revokeKey(ctx context.Context, id string) error { return s.edge.RevokeKey(ctx, id) }

// signInAuth is what sign-in checks: the client's rate of attempts, the key, and its rate.
type signInAuth struct {
	Edge
	gate    *auth.Gate
	signIns *signInGuard
	cfg     signInConfig
}

type signInConfig struct {
	SessionMax                 time.Duration
	MaxDashboardSessionsPerKey int
}

func (a *signInAuth) key(ctx context.Context, secret string) (auth.Key, error) {
	return a.Key(ctx, secret)
}
func (a *signInAuth) allowRate(p auth.Principal) error { return a.gate.AllowRate(p) }
func (a *signInAuth) retryAfterRate() int              { return a.gate.RetryAfterRate() }

func (d *dashboard) principalOf(ctx context.Context) auth.Principal { return d.s.edge.Principal(ctx) }
func (d *dashboard) sessionOf(ctx context.Context) []byte           { return d.s.edge.SignIn(ctx) }
