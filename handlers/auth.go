package handlers

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/dashboard"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// AuthConfig configures API keys, dashboard sessions and the limits each key lives within.
// The zero value requires a key on every request but the public ones, with no rate limit or
// per-key caps.
type AuthConfig struct {
	// Off lets every request act as an admin without a key: for loopback experiments only
	// (the serve command refuses it on any other address).
	Off bool
	// Secret keys the HMACs of idempotency keys and CSRF tokens. Keep it outside the database
	// so a copy of the database does not give it away; nil takes a random one per process.
	Secret []byte
	// Rate and Burst bound the requests of each non-admin key (golang.org/x/time/rate);
	// Rate 0 does not limit.
	Rate  rate.Limit
	Burst int
	// MaxHeldPerKey, MaxWaitsPerKey, MaxWatchesPerKey and MaxSessionsPerKey cap what one
	// non-admin key may make the server hold: unexpired leases, acquires waiting in line, open
	// watch streams, open sessions. 0 does not cap.
	MaxHeldPerKey, MaxWaitsPerKey, MaxWatchesPerKey, MaxSessionsPerKey int
	// ResourceQuota bounds the fenced resources one non-admin key may have written last:
	// how many, and their bytes in all. Zero fields do not bound.
	ResourceQuota lease.Quota
	// SignInRate and SignInBurst bound the dashboard sign-ins from one client address, whether
	// they succeed or not; SignInRate 0 does not limit. A sign-in is also one request of its
	// key's Rate.
	SignInRate  rate.Limit
	SignInBurst int
	// MaxDashboardSessionsPerKey is how many dashboard sessions one key keeps open, admin keys
	// too: a sign-in past it ends the key's oldest. 0 does not cap.
	MaxDashboardSessionsPerKey int
	// PublicMetrics serves /metrics without a key.
	PublicMetrics bool
	// SessionIdle and SessionMax end dashboard sessions unused for that long, and that long
	// after sign-in whatever their use. Defaults: 1 h and 12 h.
	SessionIdle, SessionMax time.Duration
}

// keyCacheTTL bounds how long a key read from the store is trusted without reading it again.
// A revocation through this process takes effect at once; one made through another process
// sharing the database, within this time.
const keyCacheTTL = 5 * time.Second

// errKeyRevoked ends the requests and streams of a key when it is revoked.
var errKeyRevoked = errors.New("the API key was revoked")

// authn finds the principal of each request and enforces what one key may hold.
type authn struct {
	cfg   AuthConfig
	store store.Store
	clock lease.Clock

	gate *auth.Gate
	uses *auth.Uses

	mu    sync.Mutex
	cache map[[32]byte]cachedKey
	lives map[string]*keyLife // key id → ends when the key is revoked
}

type cachedKey struct {
	key  auth.Key
	read time.Time // by the server's clock
}

type keyLife struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newAuthn(cfg AuthConfig, st store.Store, clock lease.Clock) *authn {
	if cfg.Secret == nil {
		cfg.Secret = make([]byte, 32)
		rand.Read(cfg.Secret)
	}
	if cfg.SessionIdle == 0 {
		cfg.SessionIdle = time.Hour
	}
	if cfg.SessionMax == 0 {
		cfg.SessionMax = 12 * time.Hour
	}
	gate := auth.NewGate(auth.Limits{Rate: cfg.Rate, Burst: cfg.Burst, MaxHeld: cfg.MaxHeldPerKey, MaxWaits: cfg.MaxWaitsPerKey,
		MaxWatches: cfg.MaxWatchesPerKey, MaxSessions: cfg.MaxSessionsPerKey, ResourceQuota: cfg.ResourceQuota})
	return &authn{cfg: cfg, store: st, clock: clock, gate: gate, uses: auth.NewUses(st, clock), cache: map[[32]byte]cachedKey{}, lives: map[string]*keyLife{}}
}

type principalInfo struct {
	p       auth.Principal
	session []byte // the session's hash when the request came with a dashboard session
}

// principalOf returns the caller of a request that passed authentication; before that, or
// outside a request, a principal with no role: every check fails closed.
func principalOf(ctx context.Context) auth.Principal {
	if info := infoOf(ctx); info != nil {
		return info.principal.p
	}
	return auth.Principal{}
}

func sessionOf(ctx context.Context) []byte {
	if info := infoOf(ctx); info != nil {
		return info.principal.session
	}
	return nil
}

// public reports whether a path is served without a key.
func (a *authn) public(r *http.Request) bool {
	switch p := r.URL.Path; {
	case p == "/healthz", p == "/readyz", p == "/signin", strings.HasPrefix(p, "/static/"):
		return true
	case p == "/metrics":
		return a.cfg.PublicMetrics
	}
	return false
}

// middleware authenticates every request but the public ones, applies the key's rate limit,
// and ends the request when its key is revoked.
func (s *server) authenticate(next http.Handler) http.Handler {
	a := s.auth
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.public(r) {
			next.ServeHTTP(w, r)
			return
		}
		pi, err := a.principal(r)
		if err != nil {
			s.deny(w, r, err)
			return
		}
		if err := a.gate.AllowRate(pi.p); err != nil {
			s.metrics.RateLimited(pi.p.KeyID)
			s.writeProblem(w, r, err)
			return
		}
		if !a.cfg.Off {
			if err := a.uses.Used(r.Context(), pi.p.KeyID); err != nil {
				s.log.WarnContext(r.Context(), "key use", "err", err)
			}
		}
		info, r := ensureInfo(r)
		info.principal = pi
		next.ServeHTTP(w, r)
	})
}

// deny answers a request without a valid key: a browser asking for a page is sent to sign in,
// everything else gets 401 with a Bearer challenge.
func (s *server) deny(w http.ResponseWriter, r *http.Request, err error) {
	if r.Method == http.MethodGet && dashboard.WantsHTML(r) && r.Header.Get("LK-Fragment") == "" {
		http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="leasekeeper"`)
	s.writeProblem(w, r, err)
}

// principal finds who sent r: the bearer key, else the dashboard session cookie.
func (a *authn) principal(r *http.Request) (principalInfo, error) {
	if a.cfg.Off {
		return principalInfo{p: auth.Anonymous}, nil
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, secret, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
			return principalInfo{}, lease.Errorf(lease.CodeUnauthenticated, "the Authorization header must be \"Bearer <API key>\"")
		}
		k, err := a.key(r.Context(), strings.TrimSpace(secret))
		if err != nil {
			return principalInfo{}, err
		}
		return principalInfo{p: k.Principal()}, nil
	}
	if c, err := r.Cookie(dashboard.SessionCookie); err == nil && c.Value != "" {
		return a.sessionPrincipal(r.Context(), c.Value)
	}
	return principalInfo{}, lease.Errorf(lease.CodeUnauthenticated, "this request needs an API key: send \"Authorization: Bearer <key>\"")
}

// key returns the live key whose secret is given. Codes: unauthenticated.
func (a *authn) key(ctx context.Context, secret string) (auth.Key, error) {
	h := [32]byte(auth.Hash(secret))
	a.mu.Lock()
	c, ok := a.cache[h]
	a.mu.Unlock()
	if !ok || a.clock.Now().Sub(c.read) > keyCacheTTL {
		k, err := a.store.KeyByHash(ctx, h[:])
		if lease.IsCode(err, lease.CodeNotFound) {
			return auth.Key{}, lease.Errorf(lease.CodeUnauthenticated, "the API key is not known to this server")
		}
		if err != nil {
			return auth.Key{}, fmt.Errorf("look up API key: %w", err)
		}
		c = cachedKey{key: k, read: a.clock.Now()}
		a.mu.Lock()
		a.cache[h] = c
		a.mu.Unlock()
		if k.Revoked() {
			a.ended(k.ID)
		}
	}
	if c.key.Revoked() {
		return auth.Key{}, lease.Errorf(lease.CodeUnauthenticated, "the API key %s was revoked", c.key.ID)
	}
	return c.key, nil
}

// sessionPrincipal returns the principal of a live dashboard session. Codes: unauthenticated.
func (a *authn) sessionPrincipal(ctx context.Context, secret string) (principalInfo, error) {
	h := auth.Hash(secret)
	ses, err := a.store.SignIn(ctx, h)
	if lease.IsCode(err, lease.CodeNotFound) {
		return principalInfo{}, lease.Errorf(lease.CodeUnauthenticated, "the dashboard session has ended; sign in again")
	}
	if err != nil {
		return principalInfo{}, fmt.Errorf("look up session: %w", err)
	}
	now := a.clock.Now()
	if ses.Key.Revoked() || now.Sub(ses.LastSeen) > a.cfg.SessionIdle {
		a.store.DeleteSignIn(context.WithoutCancel(ctx), h)
		return principalInfo{}, lease.Errorf(lease.CodeUnauthenticated, "the dashboard session has ended; sign in again")
	}
	// Record use for the idle expiry, at most once a minute: a write per page view would be
	// wasteful.
	if now.Sub(ses.LastSeen) > time.Minute {
		if err := a.store.TouchSignIn(ctx, h); err != nil {
			return principalInfo{}, fmt.Errorf("touch session: %w", err)
		}
	}
	return principalInfo{p: ses.Key.Principal(), session: h}, nil
}

// untilRevoked returns ctx, ended with errKeyRevoked when the key of its principal is revoked
// through this process, for the requests that last: watch streams and acquires that wait in
// line end at once. A short request, checked when it arrived, is answered as one that came
// before the revocation; it does not register with its key, which cost every request a
// shared lock (all the clients of one key contend for its context's).
func (a *authn) untilRevoked(ctx context.Context) (context.Context, func()) {
	id := principalOf(ctx).KeyID
	if id == "" {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(a.life(id), func() { cancel(errKeyRevoked) })
	return ctx, func() { stop(); cancel(nil) }
}

// life returns a context that ends when the key is revoked through this process.
func (a *authn) life(id string) context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	l, ok := a.lives[id]
	if !ok {
		ctx, cancel := context.WithCancel(context.Background())
		l = &keyLife{ctx: ctx, cancel: cancel}
		a.lives[id] = l
	}
	return l.ctx
}

// ended forgets a revoked key: cached lookups go, and its requests and streams end.
func (a *authn) ended(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for h, c := range a.cache {
		if c.key.ID == id {
			delete(a.cache, h)
		}
	}
	if l, ok := a.lives[id]; ok {
		l.cancel()
		delete(a.lives, id)
	}
	a.gate.Forget(id)
}
