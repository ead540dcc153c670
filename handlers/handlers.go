// Package handlers is leasekeeper's HTTP edge: it implements the strict server generated from
// openapi.yaml, translates between wire types (api) and domain types (lease, store), answers
// every error as RFC 9457 problem+json, and serves metrics, health and the dashboard.
// Handlers translate; the rules live in lease and store.
package handlers

import (
	"bytes"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/authz"
	"github.com/leasekeeper/leasekeeper/dashboard"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/metrics"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/watch"
	"github.com/leasekeeper/leasekeeper/web"
	"github.com/leasekeeper/leasekeeper/wire"
)

// Config is what the HTTP layer needs. Store, Clock, Registry and Logger are required.
type Config struct {
	Store    store.Store
	Clock    lease.Clock
	Limits   lease.Limits
	Registry *prometheus.Registry
	Metrics  *metrics.Metrics
	Logger   *slog.Logger
	// Acquirer grants leases with waiting; nil means no waiting line (wait_ms is refused).
	Acquirer Acquirer
	// Hub streams events to watchers; nil disables /v1/watch.
	Hub *watch.Hub
	// Spec is openapi.yaml as served at /openapi.yaml.
	Spec []byte
	// Version is the build version shown in the dashboard's footer.
	Version string
	// MaxBody bounds request bodies; 0 means 1 MiB (+ a little for JSON framing).
	MaxBody int64
	// Auth configures API keys; its zero value requires one on every non-public request.
	Auth AuthConfig
	// Epoch names this start of the server (see lease.NewEpoch); every grant and renewal
	// answer carries it as server_epoch. Empty means a fresh one.
	Epoch string
	// BodyTimeout bounds the time a request's body takes to arrive, counted from the end of
	// its headers; a body still incomplete then is answered 408. 0 means 30 s.
	BodyTimeout time.Duration
	// WriteTimeout bounds the time an answer takes to be sent, counted from its start (the
	// status line), so that a client that stops reading frees what it holds; 0 means none. A
	// wait in line before the answer does not count, and a watch stream bounds each of its
	// writes by the hub's own timeout instead.
	WriteTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and header fields, answered 431 problem+json
	// past it; 0 means 64 KiB. Give the http.Server a larger MaxHeaderBytes of its own: what
	// passes that reaches this handler, past it Go answers by itself in text/plain.
	MaxHeaderBytes int
	// TrustedProxies are the addresses of TLS-terminating proxies in front of the server: a
	// request from one of them with X-Forwarded-Proto: https counts as made over TLS (session
	// cookies Secure, HSTS). The header is ignored from every other address.
	TrustedProxies []netip.Prefix
	// CORSOrigins are the browser origins (scheme://host[:port]) whose pages may call the API;
	// none by default. See withCORS.
	CORSOrigins []string
	// Tracer, when set, traces each request (and its wait in line) with the W3C trace context
	// its client sent; nil does not trace, at no cost.
	Tracer trace.TracerProvider
}

// server implements api.StrictServerInterface.
type server struct {
	store    store.Store
	acquirer Acquirer
	clock    lease.Clock
	limits   lease.Limits
	log      *slog.Logger
	metrics  *metrics.Metrics
	hub      *watch.Hub
	auth     *authn
	epoch    string
	tracer   trace.Tracer // nil: not tracing
	started  time.Time    // by clock, when New ran: the dashboard says how long ago the server started
	// writeTimeout: see Config.WriteTimeout.
	writeTimeout time.Duration
	proxies      []netip.Prefix
}

var _ api.StrictServerInterface = (*server)(nil)

// New returns the HTTP handler of the whole service.
func New(cfg Config) (http.Handler, error) {
	origins := make([]string, len(cfg.CORSOrigins))
	for i, o := range cfg.CORSOrigins {
		n, err := NormalizeOrigin(o)
		if err != nil {
			return nil, err
		}
		origins[i] = n
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = lease.MaxValueLen
	}
	if cfg.MaxHeaderBytes == 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = 30 * time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(cfg.Registry, cfg.Store)
	}
	if cfg.Acquirer == nil {
		cfg.Acquirer = noLine{cfg.Store}
	}
	if cfg.Epoch == "" {
		cfg.Epoch = lease.NewEpoch()
	}
	s := &server{store: cfg.Store, acquirer: cfg.Acquirer, clock: cfg.Clock, limits: cfg.Limits, log: cfg.Logger, metrics: cfg.Metrics, hub: cfg.Hub,
		auth: newAuthn(cfg.Auth, cfg.Store, cfg.Clock), epoch: cfg.Epoch, started: cfg.Clock.Now(), writeTimeout: cfg.WriteTimeout,
		proxies: cfg.TrustedProxies}
	if cfg.Tracer != nil {
		s.tracer = cfg.Tracer.Tracer(tracerName)
	}

	sameOrigin, err := s.sameOrigin(origins)
	if err != nil {
		return nil, err
	}

	spec, err := validationSpec()
	if err != nil {
		return nil, err
	}

	r := chi.NewRouter()
	mws := []func(http.Handler) http.Handler{s.securityHeaders, withRequestID}
	if s.tracer != nil {
		mws = append(mws, s.traced)
	}
	r.Use(mws...)
	r.Use(s.accessLog, s.recoverer, headAsGet(r), s.headerLimit(cfg.MaxHeaderBytes), s.utf8Query, bodyDeadline(cfg.BodyTimeout), limitBody(cfg.MaxBody),
		withCORS(origins), s.authenticate)
	dash := dashboard.New(dashboard.Config{Store: cfg.Store, Acquirer: cfg.Acquirer, Clock: cfg.Clock, Logger: cfg.Logger, Edge: dashEdge{s}, Metrics: s.metrics,
		Site: web.Site{AssetVersion: web.AssetVersion(), Version: cfg.Version, AuthOff: cfg.Auth.Off}, CSRFKey: auth.MAC(s.auth.cfg.Secret, "csrf"),
		Started: s.started, Epoch: s.epoch, SignInRate: cfg.Auth.SignInRate, SignInBurst: cfg.Auth.SignInBurst,
		SessionMax: s.auth.cfg.SessionMax, Gate: s.auth.gate, MaxSessionsPerKey: cfg.Auth.MaxDashboardSessionsPerKey})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		if dashboard.WantsHTML(r) {
			dash.NotFound(w, r)
			return
		}
		s.writeProblem(w, r, lease.Errorf(lease.CodeNotFound, "no route for %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", allowed(r, req.URL.Path))
		s.writeProblem(w, req, lease.Errorf(wire.CodeMethodNotAllowed, "%s is not allowed on %s", req.Method, req.URL.Path))
	})
	r.Handle("/metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{Registry: cfg.Registry}))
	r.Get("/openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Write(cfg.Spec)
	})

	routes, err := newSpecRoutes(spec)
	if err != nil {
		return nil, err
	}
	dash.Routes(r)
	r.Group(func(r chi.Router) {
		r.Use(noStore, sameOrigin, s.jsonBody, s.validate(routes))
		strict := api.NewStrictHandlerWithOptions(s, []api.StrictMiddlewareFunc{authz.Middleware(principalOf)}, api.StrictHTTPServerOptions{
			RequestErrorHandlerFunc:  s.requestError,
			ResponseErrorHandlerFunc: s.responseError,
		})
		api.HandlerWithOptions(strict, api.ChiServerOptions{BaseRouter: r, ErrorHandlerFunc: s.requestError})
	})
	return r, nil
}

// noStore keeps API answers out of caches: lease state is stale the moment it is sent. A
// resource's value, which has a validator, replaces it with no-cache.
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// sameOrigin refuses state-changing API requests that a browser sends on behalf of another
// site (a form post or a fetch from a page elsewhere), judged by Sec-Fetch-Site and Origin.
// Clients that are not browsers send neither header and pass, and so do reads, whose answers
// a page elsewhere cannot see anyway. Pages on the CORS origins are trusted: they are the
// browser apps the operator listed to use the API.
func (s *server) sameOrigin(trusted []string) (func(http.Handler) http.Handler, error) {
	p := http.NewCrossOriginProtection()
	for _, o := range trusted {
		if err := p.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("CORS origin %q: %w", o, err)
		}
	}
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeProblem(w, r, lease.Errorf(lease.CodeForbidden, "a cross-site browser request may not change anything here"))
	}))
	return p.Handler, nil
}

// recoverer turns a panic into a logged 500 problem instead of a dropped connection.
func (s *server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.writeProblem(w, r, fmt.Errorf("panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// overTLS reports whether r came over TLS: to this server, or to a trusted proxy that says so.
func (s *server) overTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if len(s.proxies) == 0 || !strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		return false
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	for _, p := range s.proxies {
		if p.Contains(ap.Addr().Unmap()) {
			return true
		}
	}
	return false
}

// securityHeaders gives every answer the headers that keep browsers from sniffing, framing or
// running it. The policy allows nothing; dashboard pages replace it with their own.
func (s *server) securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What h.Set does, with one array for the four values where Set makes a slice for
		// each; the keys are in the canonical form Set would give them.
		v := [...]string{"nosniff", "DENY", "same-origin", "default-src 'none'; frame-ancestors 'none'; sandbox"}
		h := w.Header()
		h["X-Content-Type-Options"] = v[0:1:1]
		h["X-Frame-Options"] = v[1:2:2]
		h["Referrer-Policy"] = v[2:3:3]
		h["Content-Security-Policy"] = v[3:4:4]
		if s.overTLS(r) {
			// Served over TLS: browsers are to come back only over TLS for a year.
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		next.ServeHTTP(w, r)
	})
}

// DefaultMaxHeaderBytes is the default of Config.MaxHeaderBytes.
const DefaultMaxHeaderBytes = 64 << 10

// headerLimit answers 431 problem+json to a request whose line and header fields (counted as
// sent: name, ": ", value, CRLF) are more than n bytes.
func (s *server) headerLimit(n int) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			size := len(r.Method) + len(r.RequestURI) + len(r.Proto) + len(r.Host) + 10
			for k, vs := range r.Header {
				for _, v := range vs {
					size += len(k) + len(v) + 4
				}
			}
			if size > n {
				w.Header().Set("Connection", "close")
				s.writeProblem(w, r, lease.Errorf(wire.CodeHeaderTooLarge, "the request's header fields are %d bytes, more than the %d this server takes", size, n))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// utf8Query refuses a request whose query string is not UTF-8 once decoded (wire.StrictQuery),
// on every route, the dashboard's included, as jsonBody refuses such a body: a filter or a
// prefix of other bytes would match nothing on SQLite and fail the statement on PostgreSQL.
func (s *server) utf8Query(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			if err := wire.StrictQuery(r.URL.Query()); err != nil {
				s.writeProblem(w, r, err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// bodyDeadline gives a request's body d to arrive: a body shorter than its Content-Length, or
// one sent too slowly, ends in a read error that answers 408 (see bodyError) instead of holding
// a handler. Requests without a body get no deadline: theirs would fall on the server's read
// that notices the client leaving, and end a watch stream. (Once a body is read to its end,
// net/http lifts the deadline itself before starting that read.)
func bodyDeadline(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Body == nil || r.Body == http.NoBody {
				next.ServeHTTP(w, r)
				return
			}
			// A socket deadline is on the operating system's clock, not the server's.
			if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(d)); err == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, timeout: d}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// deadlineBody marks the read errors of a body read under a deadline.
type deadlineBody struct {
	io.ReadCloser
	timeout time.Duration
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = &bodyError{err: err, timeout: b.timeout}
	}
	return n, err
}

// bodyError is a request body that did not arrive whole: the client was too slow (timeout) or
// stopped sending before the end. It is the client's failure, answered 408 or 400.
type bodyError struct {
	err     error
	timeout time.Duration
}

func (e *bodyError) Error() string { return "read request body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// problem turns the failure into the domain error that answers it.
func (e *bodyError) problem() *lease.Error {
	if errors.Is(e.err, os.ErrDeadlineExceeded) {
		return lease.Errorf(wire.CodeRequestTimeout, "the request body did not arrive within %v", e.timeout)
	}
	return lease.Errorf(lease.CodeInvalid, "the request body was cut off (%v)", e.err)
}

func limitBody(n int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Body != nil {
				r.Body = http.MaxBytesReader(w, r.Body, n)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// accessLog logs one line per request with the route pattern, never the raw path alone, and
// observes the request duration by route (long-lived requests apart).
func (s *server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info, r := ensureInfo(r) // withRequestID's, before this
		info.resp = statusWriter{ResponseWriter: w, timeout: s.writeTimeout}
		ww := &info.resp
		if s.writeTimeout > 0 {
			// The deadline of the connection's previous answer still stands: until this
			// answer starts, nothing written (a 100 Continue) may fall on it.
			http.NewResponseController(w).SetWriteDeadline(time.Time{})
		}
		next.ServeHTTP(ww, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		status := ww.status
		if status == 0 {
			status = http.StatusOK
		}
		d := time.Since(start)
		s.metrics.ObserveRequest(r.Method, route, status, d, info.long)
		if !s.log.Enabled(r.Context(), slog.LevelInfo) {
			return // the attributes below would be built for nothing
		}
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method), slog.String("route", route), slog.Int("status", status),
			slog.Duration("duration", d), slog.Int("bytes", ww.bytes),
			slog.String("request_id", requestID(r.Context())), slog.String("remote", r.RemoteAddr))
	})
}

// statusWriter passes a response on and notes its status and size for accessLog, as chi's
// middleware.WrapResponseWriter did, without its two allocations a request: it lives in the
// request's reqInfo. http.ResponseController finds what else the response can do (flush,
// deadlines, hijack) through Unwrap.
//
// With a timeout, the answer must be sent within it from its status line on: a client that
// does not read it loses the connection instead of pinning the answer's buffers.
type statusWriter struct {
	http.ResponseWriter
	status, bytes int
	wrote         bool
	timeout       time.Duration
}

func (w *statusWriter) WriteHeader(code int) {
	// Informational answers (1xx but 101) come before the real one.
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		w.ResponseWriter.WriteHeader(code)
	} else if !w.wrote {
		w.status, w.wrote = code, true
		if w.timeout > 0 {
			// A socket deadline is on the operating system's clock, not the server's.
			http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.timeout))
		}
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

// ReadFrom keeps io.Copy to the response (a static file) on net/http's own ReadFrom, which
// sends files without copying them through a buffer of the copier's.
func (w *statusWriter) ReadFrom(src io.Reader) (int64, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	n, err := io.Copy(w.ResponseWriter, src)
	w.bytes += int(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// jsonBody prepares the body of a POST to the JSON API: it must be labelled JSON (or not
// labelled; see jsonMediaType), else 415, and be exactly one JSON value: trailing data is
// refused here, since the decoders downstream stop after the first value, and so is what
// encoding/json would change without a word (see wire.StrictJSON).
func (s *server) jsonBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/") || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		if !jsonMediaType(r.Header) {
			w.Header().Set("Accept-Post", "application/json")
			s.writeProblem(w, r, lease.Errorf(wire.CodeUnsupportedMediaType, "the body must be application/json, not %q", r.Header.Get("Content-Type")))
			return
		}
		// Most clients say so already: then there is nothing to set (Set makes a new slice).
		if ct := r.Header["Content-Type"]; len(ct) != 1 || ct[0] != "application/json" {
			r.Header.Set("Content-Type", "application/json")
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		if wire.TrailingData(body) {
			s.writeProblem(w, r, lease.Errorf(lease.CodeInvalid, "the body must be one JSON value, with nothing after it"))
			return
		}
		if err := wire.StrictJSON(body); err != nil {
			s.writeProblem(w, r, err)
			return
		}
		// The validator reads the body again, and gives the request a new one from GetBody
		// when there is one, instead of a reader and a function of its own.
		r.GetBody = func() (io.ReadCloser, error) {
			rd := new(bodyReader)
			rd.Reset(body)
			return rd, nil
		}
		r.Body, _ = r.GetBody()
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// bodyReader reads a body already in memory: one allocation, where io.NopCloser over a
// bytes.Reader is two.
type bodyReader struct{ bytes.Reader }

func (*bodyReader) Close() error { return nil }

// jsonMediaType reports whether a request's Content-Type says JSON: application/json, with
// parameters (a charset only of utf-8: JSON is UTF-8). A body without a Content-Type is taken as JSON too: a
// client that labels nothing has not said it sends something else.
func jsonMediaType(h http.Header) bool {
	ct := h["Content-Type"]
	switch {
	case len(ct) == 0:
		return true
	case len(ct) > 1:
		return false
	case ct[0] == "application/json":
		return true
	}
	mt, params, err := mime.ParseMediaType(ct[0])
	cs, ok := params["charset"]
	return err == nil && mt == "application/json" && (!ok || strings.EqualFold(cs, "utf-8"))
}
