// Package service assembles a leasekeeper server around an open store: the waiting line, the
// watch hub, the expiry sweeper, the metrics and the HTTP handler, all fed by the store's
// commit hook. cmd/leasekeeper runs it; tests build the same server with it.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/expiry"
	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/metrics"
	"github.com/leasekeeper/leasekeeper/queue"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/watch"
)

// Hooks fans a store's committed events out to the parts built after the store opened. Give
// Publish to the store as its commit hook (and Batch as its batch hook, if it has one); New sets
// the listeners.
type Hooks struct {
	mu     sync.RWMutex
	funcs  []func([]lease.Event)
	batch  func(ops int, took time.Duration)
	failed func()
	trace  func(store.Batch)
	line   func(name string)
}

// LineChanged tells the waiting line that name's line, shared through the store, changed on
// some server in a way no event tells (give it to a store with a shared line as its line
// hook). It never blocks.
func (h *Hooks) LineChanged(name string) {
	h.mu.RLock()
	f := h.line
	h.mu.RUnlock()
	if f != nil {
		f(name)
	}
}

// Batch records a group commit of the store's writer: how many operations it held and how
// long it took. It never blocks.
func (h *Hooks) Batch(ops int, took time.Duration, committed bool) {
	h.mu.RLock()
	f := h.batch
	h.mu.RUnlock()
	if f != nil && committed {
		f(ops, took)
	}
	if g := h.failed; g != nil && !committed {
		g()
	}
}

// Publish hands committed events to every listener. It never blocks.
func (h *Hooks) Publish(evs []lease.Event) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, f := range h.funcs {
		f(evs)
	}
}

func (h *Hooks) set(fns ...func([]lease.Event)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.funcs = fns
}

// Config is the service's configuration. The zero value of each field takes its default.
type Config struct {
	Limits    lease.Limits // default lease.DefaultLimits()
	Queue     queue.Limits // default queue.DefaultLimits()
	Watch     watch.Options
	Retention store.Retention // zero keeps history forever
	Logger    *slog.Logger    // default discards
	Registry  *prometheus.Registry
	Version   string
	// Auth configures API keys; its zero value requires one on every non-public request.
	Auth handlers.AuthConfig
	// BodyTimeout bounds the time a request body takes to arrive (handlers.Config).
	BodyTimeout time.Duration
	// TrustedProxies are TLS-terminating proxies whose X-Forwarded-Proto counts (handlers.Config).
	TrustedProxies []netip.Prefix
	// WriteTimeout bounds the time an answer takes to be read (handlers.Config).
	WriteTimeout time.Duration
	// CORSOrigins are the browser origins whose pages may call the API (handlers.Config).
	CORSOrigins []string
	// Epoch names this start of the server (handlers.Config); empty means a fresh one.
	Epoch string
	// Tracer, when set, traces requests, waits in line and (through Hooks.Trace) the store's
	// batches; nil does not trace.
	Tracer trace.TracerProvider
	// WatchedLeases are the names whose holding leasekeeper_watched_lease_held reports, one
	// series each (at most MaxWatchedLeases): leader names, for an alert when nobody holds one.
	WatchedLeases []string
}

// MaxWatchedLeases bounds Config.WatchedLeases, and with it the series of
// leasekeeper_watched_lease_held.
const MaxWatchedLeases = 100

// Service is an assembled server.
type Service struct {
	Handler http.Handler
	Line    *queue.Line
	Hub     *watch.Hub
	sweeper *expiry.Sweeper
}

// Store is a store with the clock it decides by.
type Store interface {
	store.Store
	Clock() lease.Clock
}

// New builds the service on st, whose commit hook must be hooks.Publish.
func New(st Store, hooks *Hooks, cfg Config) (*Service, error) {
	if cfg.Limits == (lease.Limits{}) {
		cfg.Limits = lease.DefaultLimits()
	}
	if cfg.Queue == (queue.Limits{}) {
		cfg.Queue = queue.DefaultLimits()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if len(cfg.WatchedLeases) > MaxWatchedLeases {
		return nil, fmt.Errorf("at most %d watched leases, got %d", MaxWatchedLeases, len(cfg.WatchedLeases))
	}
	for _, name := range cfg.WatchedLeases {
		if err := lease.ValidateName(name); err != nil {
			return nil, fmt.Errorf("watched lease %q: %w", name, err)
		}
	}
	clock := st.Clock()
	meters := metrics.New(cfg.Registry, st)
	if cfg.Watch.OnDeliver == nil {
		cfg.Watch.OnDeliver, cfg.Watch.Clock = meters.ObserveDelivery, clock
	}
	s := &Service{
		Line:    queue.New(st, clock, cfg.Queue),
		Hub:     watch.NewHub(st, cfg.Watch),
		sweeper: expiry.New(st, clock, cfg.Retention, cfg.Logger),
	}
	hooks.set(meters.ObserveEvents, s.sweeper.ObserveEvents, s.Line.ObserveEvents, s.Hub.ObserveEvents)
	hooks.mu.Lock()
	hooks.line = s.Line.LineChanged
	if cfg.Tracer != nil {
		hooks.trace = batchSpans(cfg.Tracer.Tracer("github.com/leasekeeper/leasekeeper/store"))
	}
	hooks.mu.Unlock()
	registerStoreMetrics(cfg.Registry, st, hooks)
	cfg.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasekeeper_waiters", Help: "Acquire requests waiting in line."},
			func() float64 { return float64(s.Line.Total()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasekeeper_waiters_limit", Help: "Most acquire requests that may wait in line at once (--max-waiters)."},
			func() float64 { return float64(cfg.Queue.Total) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasekeeper_watchers", Help: "Open watch streams."},
			func() float64 { return float64(s.Hub.Watchers()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasekeeper_watchers_limit", Help: "Most watch streams that may be open at once (--max-watchers)."},
			func() float64 { return float64(s.Hub.Limit()) }),
		&readyCollector{st: st, desc: prometheus.NewDesc("leasekeeper_ready",
			"1 when the store answers a ping within a second and its writes do not fail (what /readyz answers 200 for), else 0.", nil, nil)},
		&watchedCollector{st: st, names: cfg.WatchedLeases, desc: prometheus.NewDesc("leasekeeper_watched_lease_held",
			"1 while a lease named by --metrics-lease is held, else 0, by name (only those names: a bounded set).", []string{"name"}, nil)},
	)
	h, err := handlers.New(handlers.Config{Store: st, Clock: clock, Limits: cfg.Limits, Registry: cfg.Registry,
		Metrics: meters, Logger: cfg.Logger, Acquirer: s.Line, Hub: s.Hub, Spec: leasekeeper.OpenAPI(), Version: cfg.Version,
		BodyTimeout: cfg.BodyTimeout, WriteTimeout: cfg.WriteTimeout, TrustedProxies: cfg.TrustedProxies, Auth: cfg.Auth, CORSOrigins: cfg.CORSOrigins, Epoch: cfg.Epoch, Tracer: cfg.Tracer})
	if err != nil {
		return nil, err
	}
	s.Handler = h
	return s, nil
}

// Drain ends the long requests, watch streams and waits in line, so that an HTTP server
// shutting down only waits for ordinary requests. Call it before http.Server.Shutdown.
func (s *Service) Drain() {
	s.Hub.Close()
	s.Line.Close()
}

// Run runs the background loops (the expiry sweeper) until ctx ends.
func (s *Service) Run(ctx context.Context) { s.sweeper.Run(ctx) }

// registerStoreMetrics registers the metrics of the store's group commits, fed by hooks.Batch,
// and the depth of the writer's queue when the store tells it.
func registerStoreMetrics(reg prometheus.Registerer, st Store, hooks *Hooks) {
	commit := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "leasekeeper_store_commit_seconds",
		Help:    "Time of each group commit of the store's writer, from its start to the end of its fsync.",
		Buckets: []float64{.0005, .001, .002, .004, .008, .016, .032, .064, .128, .256, .512, 1},
	})
	ops := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "leasekeeper_store_batch_operations",
		Help:    "Operations committed together in each group commit of the store's writer.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
	})
	failures := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "leasekeeper_store_write_failures_total",
		Help: "Group commits of the store's writer that failed (a full disk, an fsync error, a database that does not answer): their operations were answered with an error.",
	})
	reg.MustRegister(commit, ops, failures)
	hooks.mu.Lock()
	hooks.batch = func(n int, took time.Duration) {
		commit.Observe(took.Seconds())
		ops.Observe(float64(n))
	}
	hooks.failed = failures.Inc
	hooks.mu.Unlock()
	if d, ok := st.(interface{ DiskFree() (uint64, error) }); ok {
		reg.MustRegister(&diskCollector{free: d.DiskFree, desc: prometheus.NewDesc("leasekeeper_store_disk_free_bytes",
			"Bytes free for the store on the file system of its database file (SQLite).", nil, nil)})
	}
	if r, ok := st.(interface{ StretchedAtStart() int }); ok {
		n := r.StretchedAtStart()
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasekeeper_leases_stretched_at_start",
			Help: "Leases this start of the server found open and held until at least now + their ttl (conservative restart), so their holders may have been paused past them."},
			func() float64 { return float64(n) }))
	}
	if q, ok := st.(interface{ QueueDepth() int }); ok {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasekeeper_store_queue_depth",
			Help: "Write operations waiting for the store's next group commit."},
			func() float64 { return float64(q.QueueDepth()) }))
	}
}

// readyCollector reports at each scrape whether the store answers, as /readyz does.
type readyCollector struct {
	st   interface{ Ping(context.Context) error }
	desc *prometheus.Desc
}

func (c *readyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *readyCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	v := 1.0
	if c.st.Ping(ctx) != nil {
		v = 0
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v)
}

// watchedCollector reports at each scrape whether each watched name is held. A name never
// used is not held.
type watchedCollector struct {
	st    store.Reads
	names []string
	desc  *prometheus.Desc
}

func (c *watchedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *watchedCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, name := range c.names {
		st, err := c.st.Get(ctx, name)
		switch {
		case lease.IsCode(err, lease.CodeNotFound):
			st.Held = false
		case err != nil:
			ch <- prometheus.NewInvalidMetric(c.desc, fmt.Errorf("get %s: %w", name, err))
			continue
		}
		v := 0.0
		if st.Held {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, name)
	}
}

// diskCollector reports the free space the store has left.
type diskCollector struct {
	free func() (uint64, error)
	desc *prometheus.Desc
}

func (c *diskCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *diskCollector) Collect(ch chan<- prometheus.Metric) {
	n, err := c.free()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
}
