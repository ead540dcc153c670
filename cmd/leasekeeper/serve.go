package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/time/rate"

	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/internal/gcfloor"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/queue"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/postgres"
	"github.com/leasekeeper/leasekeeper/watch"
)

// serveConfig is the server's configuration: flags, with environment fallbacks.
type serveConfig struct {
	addr, db     string
	dbMaxConns   int
	limits       lease.Limits
	retention    store.Retention
	logFormat    string
	logLevel     slog.Level
	shutdownWait time.Duration
	bodyTimeout  time.Duration
	writeTimeout time.Duration
	tlsCert      string // both or neither
	tlsKey       string
	queue        queue.Limits
	maxWatchers  int
	adminWatches int
	auth         handlers.AuthConfig
	adminKeyFile string
	secretFile   string
	debugAddr    string
	corsOrigins  []string
	watched      []string // --metrics-lease
	otlp         string   // --otlp-endpoint
	tracing      bool     // --otlp-endpoint or OTEL_EXPORTER_OTLP_ENDPOINT set
	proxies      []netip.Prefix
}

func parseServe(args []string, getenv func(string) string, stdout, stderr io.Writer) (serveConfig, error) {
	c := serveConfig{limits: lease.DefaultLimits(), queue: queue.DefaultLimits()}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	setUsage(fs)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	// A bad value in the environment fails the start, as a bad flag does: ignored, it would
	// leave the server running on a limit nobody chose.
	var envErr error
	envDur := func(name string, def time.Duration) time.Duration {
		v := getenv(name)
		if v == "" {
			return def
		}
		d, err := parseDuration(v)
		if err != nil {
			envErr = errors.Join(envErr, fmt.Errorf("%s=%s: %w", name, v, err))
			return def
		}
		return d
	}
	envInt := func(name string, def int64) int64 {
		v := getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			envErr = errors.Join(envErr, fmt.Errorf("%s=%s: not a whole number", name, v))
			return def
		}
		return n
	}
	fs.StringVar(&c.addr, "addr", env("LEASEKEEPER_ADDR", "127.0.0.1:8080"), "listen address (env LEASEKEEPER_ADDR)")
	fs.StringVar(&c.db, "db", env("LEASEKEEPER_DB", "./leasekeeper.db"), "SQLite database file, or a postgres:// URL for PostgreSQL (env LEASEKEEPER_DB)")
	dbMaxConns := fs.String("db-max-conns", env("LEASEKEEPER_DB_MAX_CONNS", "0"), fmt.Sprintf("PostgreSQL: the most connections of this replica's pool; 0: %d; the URL's pool_max_conns wins (env LEASEKEEPER_DB_MAX_CONNS)", postgres.DefaultMaxConns))
	durationVar(fs, &c.limits.MinTTL, "min-ttl", envDur("LEASEKEEPER_MIN_TTL", c.limits.MinTTL), "shortest ttl a client may ask for (env LEASEKEEPER_MIN_TTL)")
	durationVar(fs, &c.limits.MaxTTL, "max-ttl", envDur("LEASEKEEPER_MAX_TTL", c.limits.MaxTTL), "longest ttl a client may ask for (env LEASEKEEPER_MAX_TTL)")
	durationVar(fs, &c.limits.MaxWait, "max-wait", envDur("LEASEKEEPER_MAX_WAIT", c.limits.MaxWait), "longest wait_ms a client may ask for (env LEASEKEEPER_MAX_WAIT)")
	durationVar(fs, &c.limits.MaxLockDelay, "max-lock-delay", envDur("LEASEKEEPER_MAX_LOCK_DELAY", c.limits.MaxLockDelay), "longest lock_delay_ms a client may ask for (env LEASEKEEPER_MAX_LOCK_DELAY)")
	durationVar(fs, &c.retention.Age, "retention", envDur("LEASEKEEPER_RETENTION", 7*24*time.Hour), "how long history and rejections are kept (env LEASEKEEPER_RETENTION)")
	fs.IntVar(&c.retention.Rows, "max-history", 1_000_000, "most events, rejections, ended grants and ended sessions kept, of each (older ones are pruned; each name's last grant stays)")
	fs.StringVar(&c.logFormat, "log-format", env("LEASEKEEPER_LOG_FORMAT", "text"), "text or json (env LEASEKEEPER_LOG_FORMAT)")
	fs.IntVar(&c.queue.PerName, "max-waiters-per-name", c.queue.PerName, "most acquire requests waiting for one name")
	fs.IntVar(&c.queue.Total, "max-waiters", c.queue.Total, "most acquire requests waiting for any name")
	fs.IntVar(&c.maxWatchers, "max-watchers", 1000, "most open watch streams")
	fs.IntVar(&c.adminWatches, "admin-watchers", 10, "watch streams beyond -max-watchers that only admin keys may open")
	level := fs.String("log-level", env("LEASEKEEPER_LOG_LEVEL", "info"), "debug, info, warn or error (env LEASEKEEPER_LOG_LEVEL)")
	durationVar(fs, &c.shutdownWait, "shutdown-timeout", 10*time.Second, "how long shutdown waits for in-flight requests")
	authMode := fs.String("auth", env("LEASEKEEPER_AUTH", "on"), "on: every request needs an API key; off: none do (loopback addresses only, for experiments) (env LEASEKEEPER_AUTH)")
	fs.StringVar(&c.adminKeyFile, "admin-key-file", getenv("LEASEKEEPER_ADMIN_KEY_FILE"), "where the first admin key of a new database is written (default <db>.admin-key; env LEASEKEEPER_ADMIN_KEY_FILE)")
	fs.StringVar(&c.secretFile, "secret-file", getenv("LEASEKEEPER_SECRET_FILE"), "the server's HMAC secret, created on first start (default <db>.secret; env LEASEKEEPER_SECRET_FILE)")
	keyRate := fs.Float64("key-rate", 1000, "requests a second each non-admin API key may send (0: no limit)")
	fs.IntVar(&c.auth.Burst, "key-burst", 2000, "burst of requests above -key-rate a non-admin key may send")
	fs.IntVar(&c.auth.MaxHeldPerKey, "max-leases-per-key", 10000, "most unexpired leases one non-admin key may hold (0: no cap)")
	fs.IntVar(&c.auth.MaxWaitsPerKey, "max-waiters-per-key", 100, "most acquires one non-admin key may have waiting in line (0: no cap)")
	fs.IntVar(&c.auth.MaxWatchesPerKey, "max-watchers-per-key", 100, "most watch streams one non-admin key may have open (0: no cap)")
	fs.IntVar(&c.auth.MaxSessionsPerKey, "max-sessions-per-key", 1000, "most open sessions one non-admin key may have (0: no cap)")
	fs.IntVar(&c.auth.ResourceQuota.Resources, "max-resources-per-key", int(envInt("LEASEKEEPER_MAX_RESOURCES_PER_KEY", 1000)),
		"most fenced resources one non-admin key may have written last (0: no cap; env LEASEKEEPER_MAX_RESOURCES_PER_KEY)")
	fs.Int64Var(&c.auth.ResourceQuota.Bytes, "max-resource-bytes-per-key", envInt("LEASEKEEPER_MAX_RESOURCE_BYTES_PER_KEY", 64<<20),
		"most bytes the values of one non-admin key's resources may hold in all (0: no cap; env LEASEKEEPER_MAX_RESOURCE_BYTES_PER_KEY)")
	signInRate := fs.Float64("signin-rate", 1, "dashboard sign-ins a second one client address may make, right or wrong (0: no limit)")
	fs.IntVar(&c.auth.SignInBurst, "signin-burst", 10, "burst of sign-ins above -signin-rate one client address may make")
	fs.IntVar(&c.auth.MaxDashboardSessionsPerKey, "max-dashboard-sessions-per-key", 10, "dashboard sessions one key keeps; signing in once more ends its oldest (0: no cap)")
	fs.BoolVar(&c.auth.PublicMetrics, "public-metrics", false, "serve /metrics without an API key")
	fs.StringVar(&c.tlsCert, "tls-cert", env("LEASEKEEPER_TLS_CERT", ""), "serve HTTPS with this PEM certificate (chain), reread when it changes; needs --tls-key (env LEASEKEEPER_TLS_CERT)")
	fs.StringVar(&c.tlsKey, "tls-key", env("LEASEKEEPER_TLS_KEY", ""), "the PEM private key of --tls-cert (env LEASEKEEPER_TLS_KEY)")
	fs.StringVar(&c.debugAddr, "debug-addr", "", "serve Go's profiler (net/http/pprof) on this loopback address, e.g. 127.0.0.1:6060 (default: off)")
	durationVar(fs, &c.bodyTimeout, "body-timeout", envDur("LEASEKEEPER_BODY_TIMEOUT", 30*time.Second), "how long a request body may take to arrive, then 408 (env LEASEKEEPER_BODY_TIMEOUT)")
	durationVar(fs, &c.writeTimeout, "write-timeout", envDur("LEASEKEEPER_WRITE_TIMEOUT", 30*time.Second), "how long an answer may take to be read once it starts, then the connection closes; watch streams bound each write instead (env LEASEKEEPER_WRITE_TIMEOUT)")
	corsFlag, corsEnv := &originList{}, &originList{}
	if err := corsEnv.Set(getenv("LEASEKEEPER_CORS_ORIGIN")); err != nil {
		envErr = errors.Join(envErr, fmt.Errorf("LEASEKEEPER_CORS_ORIGIN: %w", err))
	}
	fs.Var(corsFlag, "cors-origin", "a browser origin (scheme://host[:port]) whose pages may call the API; repeat it or separate origins with commas (default: none; env LEASEKEEPER_CORS_ORIGIN)")
	fs.StringVar(&c.otlp, "otlp-endpoint", "", "export traces over OTLP/HTTP to this base URL (/v1/traces is added), e.g. http://collector:4318 (default: off, or to OTEL_EXPORTER_OTLP_ENDPOINT when that is set)")
	watchedFlag, watchedEnv := &nameList{}, &nameList{}
	if err := watchedEnv.Set(getenv("LEASEKEEPER_METRICS_LEASES")); err != nil {
		envErr = errors.Join(envErr, fmt.Errorf("LEASEKEEPER_METRICS_LEASES: %w", err))
	}
	fs.Var(watchedFlag, "metrics-lease", fmt.Sprintf("a lease name (a leader's) whose holding /metrics reports as leasekeeper_watched_lease_held{name}; repeat it or separate names with commas, at most %d (env LEASEKEEPER_METRICS_LEASES)", service.MaxWatchedLeases))
	proxies := &proxyList{}
	if err := proxies.Set(getenv("LEASEKEEPER_TRUSTED_PROXY")); err != nil {
		envErr = errors.Join(envErr, fmt.Errorf("LEASEKEEPER_TRUSTED_PROXY: %w", err))
	}
	flagProxies := &proxyList{}
	fs.Var(flagProxies, "trusted-proxy", "address or CIDR of a TLS-terminating proxy whose X-Forwarded-Proto: https counts as TLS (Secure cookies, HSTS); repeat it or separate with commas (default: none; env LEASEKEEPER_TRUSTED_PROXY)")
	if envErr != nil {
		return c, &exitError{code: 2, err: envErr}
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return c, err
	}
	c.auth.Rate = rate.Limit(*keyRate)
	n, err := strconv.Atoi(*dbMaxConns)
	if err != nil || n < 0 || n > maxDBConns {
		return c, &exitError{code: 2, err: fmt.Errorf("-db-max-conns (env LEASEKEEPER_DB_MAX_CONNS) must be a whole number from 0 to %d, not %q", maxDBConns, *dbMaxConns)}
	}
	c.dbMaxConns = n
	c.auth.SignInRate = rate.Limit(*signInRate)
	// The flag, when given, replaces the environment's list, as every other flag does.
	c.proxies = flagProxies.prefixes
	if len(c.proxies) == 0 {
		c.proxies = proxies.prefixes
	}
	c.corsOrigins = corsFlag.origins
	if len(c.corsOrigins) == 0 {
		c.corsOrigins = corsEnv.origins
	}
	c.tracing = c.otlp != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	if c.otlp != "" {
		if u, err := url.Parse(c.otlp); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, &exitError{code: 2, err: fmt.Errorf("-otlp-endpoint must be an http:// or https:// URL, not %q", c.otlp)}
		}
	}
	c.watched = watchedFlag.names
	if len(c.watched) == 0 {
		c.watched = watchedEnv.names
	}
	if len(c.watched) > service.MaxWatchedLeases {
		return c, &exitError{code: 2, err: fmt.Errorf("-metrics-lease: at most %d names, got %d", service.MaxWatchedLeases, len(c.watched))}
	}
	switch *authMode {
	case "on":
	case "off":
		if !loopback(c.addr) {
			return c, &exitError{code: 2, err: fmt.Errorf("-auth=off is for experiments on this machine only: listen on a loopback address (127.0.0.1:PORT), not %q", c.addr)}
		}
		c.auth.Off = true
	default:
		return c, &exitError{code: 2, err: fmt.Errorf("-auth must be on or off, not %q", *authMode)}
	}
	if *keyRate < 0 || c.adminWatches < 0 || *signInRate < 0 || c.auth.SignInBurst < 0 || c.auth.MaxDashboardSessionsPerKey < 0 || c.auth.Burst < 0 || c.auth.MaxHeldPerKey < 0 || c.auth.MaxWaitsPerKey < 0 || c.auth.MaxWatchesPerKey < 0 || c.auth.MaxSessionsPerKey < 0 ||
		c.auth.ResourceQuota.Resources < 0 || c.auth.ResourceQuota.Bytes < 0 {
		return c, &exitError{code: 2, err: errors.New("per-key limits must not be negative")}
	}
	if c.debugAddr != "" && !loopback(c.debugAddr) {
		return c, &exitError{code: 2, err: fmt.Errorf("-debug-addr must be a loopback address (127.0.0.1:PORT), not %q", c.debugAddr)}
	}
	if isPostgres(c.db) {
		// Replicas share the database, not a folder: the files cannot default to one beside it.
		if c.secretFile == "" {
			return c, &exitError{code: 2, err: errors.New("with a PostgreSQL -db, give -secret-file (env LEASEKEEPER_SECRET_FILE): the same secret on every replica")}
		}
		if c.adminKeyFile == "" && getenv("LEASEKEEPER_ADMIN_KEY") == "" && !c.auth.Off {
			return c, &exitError{code: 2, err: errors.New("with a PostgreSQL -db, give -admin-key-file (env LEASEKEEPER_ADMIN_KEY_FILE) or LEASEKEEPER_ADMIN_KEY for the first admin key")}
		}
	}
	if c.adminKeyFile == "" {
		c.adminKeyFile = c.db + ".admin-key"
	}
	if c.secretFile == "" {
		c.secretFile = c.db + ".secret"
	}
	if fs.NArg() > 0 {
		return c, &exitError{code: 2, err: fmt.Errorf("serve takes no arguments, got %q", fs.Args())}
	}
	if err := c.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return c, &exitError{code: 2, err: fmt.Errorf("-log-level: %w", err)}
	}
	l := c.limits
	if l.MinTTL <= 0 || l.MaxTTL < l.MinTTL || l.MaxWait < 0 || l.MaxLockDelay < 0 {
		return c, &exitError{code: 2, err: fmt.Errorf("ttl bounds must satisfy 0 < min-ttl ≤ max-ttl, got %v and %v", l.MinTTL, l.MaxTTL)}
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return c, &exitError{code: 2, err: errors.New("-tls-cert and -tls-key go together: give both or neither")}
	}
	if c.bodyTimeout <= 0 {
		return c, &exitError{code: 2, err: fmt.Errorf("-body-timeout must be positive, got %v", c.bodyTimeout)}
	}
	if c.writeTimeout <= 0 {
		return c, &exitError{code: 2, err: fmt.Errorf("-write-timeout must be positive, got %v", c.writeTimeout)}
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return c, &exitError{code: 2, err: fmt.Errorf("-log-format must be text or json, not %q", c.logFormat)}
	}
	return c, nil
}

// maxDBConns bounds -db-max-conns: above PostgreSQL's own limit on connections of 8,388,607
// long before that, a number this large is a typo.
const maxDBConns = 10000

// gcFloor is the least the heap may grow past its live data before the garbage collector
// runs (see package gcfloor).
const gcFloor = 64 << 20

// minSQLiteProcs is the GOMAXPROCS a server on SQLite runs with at least, however few CPUs it
// may use. Its commit is a cgo call, which keeps its P through the fsync: with one P, the
// handlers whose operations would join the next batch cannot run meanwhile, and the writer
// commits one or two operations at a time (64 clients renewing, on one CPU, five runs each:
// 2,400 - 7,500 a second with one P, 1.5 - 9 operations a commit, most runs at the low end;
// 5,900 - 7,500 with two, 22 - 24 a commit).
const minSQLiteProcs = 2

// sqliteProcs returns the GOMAXPROCS to set for a server on db that runs with procs:
// minSQLiteProcs on SQLite when procs is fewer, unless GOMAXPROCS is set (then it is the
// operator's); 0 to leave it as it is.
func sqliteProcs(getenv func(string) string, db string, procs int) int {
	if getenv("GOMAXPROCS") != "" || isPostgres(db) || procs >= minSQLiteProcs {
		return 0
	}
	return minSQLiteProcs
}

func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseServe(args, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	if getenv("GOGC") == "" {
		// Less CPU per request for at most gcFloor of memory; GOGC set is the operator's.
		defer gcfloor.Start(gcFloor)()
	}
	if getenv("GOMEMLIMIT") == "" {
		// In a container with a memory cap, the collector works harder near it rather than
		// let the kernel kill the process; GOMEMLIMIT set is the operator's.
		if limit := gcfloor.MachineLimit(os.ReadFile); limit > 0 {
			defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit))
		}
	}
	if procs := sqliteProcs(getenv, cfg.db, runtime.GOMAXPROCS(0)); procs > 0 {
		runtime.GOMAXPROCS(procs)
		defer runtime.SetDefaultGOMAXPROCS()
	}
	opts := &slog.HandlerOptions{Level: cfg.logLevel}
	var log *slog.Logger
	if cfg.logFormat == "json" {
		log = slog.New(slog.NewJSONHandler(stderr, opts))
	} else {
		log = slog.New(slog.NewTextHandler(stderr, opts))
	}

	// Listen first: a taken port fails before anything else is built.
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.addr, err)
	}
	defer ln.Close()
	scheme := "http"
	var certs *certReloader
	if cfg.tlsCert != "" {
		if certs, err = newCertReloader(cfg.tlsCert, cfg.tlsKey, log); err != nil {
			return err
		}
		scheme = "https"
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "leasekeeper_build_info",
		Help:        "Build information; the value is always 1.",
		ConstLabels: prometheus.Labels{"version": buildVersion(), "goversion": runtime.Version()},
	}, func() float64 { return 1 }))

	backend := "sqlite"
	if isPostgres(cfg.db) {
		backend = "postgres"
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "leasekeeper_store_info",
		Help:        "The store's backend (sqlite or postgres); the value is always 1.",
		ConstLabels: prometheus.Labels{"backend": backend},
	}, func() float64 { return 1 }))

	// The store's commit hook fans events out to the parts the service builds after it, before
	// the server accepts its first request.
	var hooks service.Hooks
	var tracer trace.TracerProvider
	if cfg.tracing {
		tp, stop, err := startTracing(ctx, cfg.otlp)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := stop(sctx); err != nil {
				log.Warn("flush traces", "err", err)
			}
		}()
		tracer = tp
	}
	st, err := openStore(ctx, cfg.db, cfg.dbMaxConns, &hooks, cfg.tracing, log)
	if err != nil {
		return err
	}
	defer st.Close()
	if cfg.auth.Secret, err = serverSecret(cfg.secretFile); err != nil {
		return err
	}
	if cfg.auth.Off {
		log.Warn("authentication is OFF: anyone who can reach this address can take, revoke and overwrite anything", "addr", cfg.addr)
	} else if err := bootstrapAdmin(ctx, st, getenv("LEASEKEEPER_ADMIN_KEY"), cfg.adminKeyFile, log); err != nil {
		return err
	}
	epoch := lease.NewEpoch()
	svc, err := service.New(st, &hooks, service.Config{Limits: cfg.limits, Queue: cfg.queue,
		Watch: watch.Options{MaxWatchers: cfg.maxWatchers, AdminReserve: cfg.adminWatches}, Retention: cfg.retention, Logger: log, Registry: reg,
		Version: buildVersion(), BodyTimeout: cfg.bodyTimeout, WriteTimeout: cfg.writeTimeout, TrustedProxies: cfg.proxies, Auth: cfg.auth,
		CORSOrigins: cfg.corsOrigins, Epoch: epoch, WatchedLeases: cfg.watched, Tracer: tracer})
	if err != nil {
		return err
	}

	bg, stopBG := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { svc.Run(bg) })
	if cfg.debugAddr != "" {
		stopDebug, err := serveDebug(cfg.debugAddr, log)
		if err != nil {
			stopBG()
			wg.Wait()
			return err
		}
		defer stopDebug()
	}

	// Headers must arrive within 10 s, then a body within --body-timeout (set by the handler,
	// which answers a late body 408 problem+json; a ReadTimeout would also count the headers
	// and end in a bare i/o error). Neither bounds what follows the body: waits and watch
	// streams are long. No WriteTimeout for the same reason: the handler gives each answer
	// --write-timeout from its start instead, and the stream bounds each write.
	srv := &http.Server{
		Handler:           svc.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// Go answers a request past its own limit in text/plain; the handler answers one past
		// handlers.DefaultMaxHeaderBytes in problem+json, so Go's is set far above it.
		MaxHeaderBytes: 1 << 20,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("leasekeeper serving", "addr", scheme+"://"+ln.Addr().String(), "db", redactDB(cfg.db), "version", buildVersion(),
		"min_ttl", cfg.limits.MinTTL, "max_ttl", cfg.limits.MaxTTL, "auth", !cfg.auth.Off, "server_epoch", epoch)
	fmt.Fprintf(stdout, "leasekeeper listening on %s://%s\n", scheme, ln.Addr())

	errc := make(chan error, 1)
	if certs != nil {
		srv.TLSConfig = serverTLS(certs)
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- srv.Serve(ln) }()
	}
	select {
	case err := <-errc:
		stopBG()
		wg.Wait()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", cfg.shutdownWait)
	// Reverse order of construction: HTTP server (finishing in-flight requests), background
	// loops, then the store (deferred).
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownWait)
	defer cancel()
	svc.Drain() // watch streams and waits in line end now; ordinary requests finish
	serr := srv.Shutdown(sctx)
	stopBG()
	wg.Wait()
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("shutdown: %w", serr)
	}
	log.Info("stopped")
	return nil
}

// serveDebug serves the profiler on a loopback address of its own, never on the API's.
func serveDebug(addr string, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (debug): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	log.Warn("the profiler is served", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	return func() { srv.Close() }, nil
}

// originList is --cors-origin: repeatable, each a comma-separated list of origins, checked
// as they are parsed so a typo fails the start.
// proxyList is the value of --trusted-proxy: addresses and CIDR prefixes.
type proxyList struct{ prefixes []netip.Prefix }

func (l *proxyList) String() string {
	s := make([]string, len(l.prefixes))
	for i, p := range l.prefixes {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func (l *proxyList) Set(v string) error {
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		p, err := netip.ParsePrefix(a)
		if err != nil {
			addr, aerr := netip.ParseAddr(a)
			if aerr != nil {
				return fmt.Errorf("trusted proxy %q: not an address or a CIDR prefix", a)
			}
			p = netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen())
		}
		l.prefixes = append(l.prefixes, p.Masked())
	}
	return nil
}

type originList struct{ origins []string }

func (l *originList) String() string { return strings.Join(l.origins, ",") }

func (l *originList) Set(v string) error {
	for _, o := range strings.Split(v, ",") {
		if strings.TrimSpace(o) == "" {
			continue
		}
		n, err := handlers.NormalizeOrigin(o)
		if err != nil {
			return err
		}
		l.origins = append(l.origins, n)
	}
	return nil
}

// nameList is --metrics-lease: repeatable, each a comma-separated list of lease names, checked
// as they are parsed so a typo fails the start.
type nameList struct{ names []string }

func (l *nameList) String() string { return strings.Join(l.names, ",") }

func (l *nameList) Set(v string) error {
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if err := lease.ValidateName(n); err != nil {
			return err
		}
		l.names = append(l.names, n)
	}
	return nil
}
