// Package metrics is leasekeeper's Prometheus metrics of leases and requests, registered on
// one registry made by the caller: fed by the store's commit hook (ObserveEvents), the watch
// hub (ObserveDelivery) and the HTTP edge (operations, requests, waits, rejections, rate
// limits).
package metrics

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasekeeper/leasekeeper/lease"
)

// Metrics are leasekeeper's Prometheus metrics, registered on one registry made by the caller.
type Metrics struct {
	ops          *prometheus.CounterVec
	expirations  prometheus.Counter
	rejections   *prometheus.CounterVec
	requests     *prometheus.HistogramVec
	longRequests *prometheus.HistogramVec
	acquireWait  *prometheus.HistogramVec
	delivery     prometheus.Histogram
	rateLimited  *prometheus.CounterVec
}

// Sources of a stale-write rejection, the source label of leasekeeper_stale_writes_rejected_total.
const (
	SourceResource = "resource" // a fenced write to a resource this server keeps
	SourceReported = "reported" // reported by a resource elsewhere (POST /v1/rejections)
)

// Canceled is the outcome of an operation whose client went away.
const Canceled = "canceled"

// heldCounter counts the leases held now.
type heldCounter interface {
	HeldCount(ctx context.Context, prefix string) (int, error)
}

// New registers the metrics on reg. leasekeeper_leases_held is read from held at every
// scrape, so it is always true, whatever restarts or expiries happened.
func New(reg prometheus.Registerer, held heldCounter) *Metrics {
	m := &Metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasekeeper_lease_operations_total",
			Help: "Lease operations by op (acquire, renew, release, revoke, handover) and outcome (ok or an error code).",
		}, []string{"op", "outcome"}),
		expirations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasekeeper_lease_expirations_total",
			Help: "Leases that ended by expiring.",
		}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasekeeper_stale_writes_rejected_total",
			Help: "Writes refused because their fencing token was stale or never issued, by source: resource (a fenced write here) or reported (by a resource elsewhere).",
		}, []string{"source"}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leasekeeper_http_request_duration_seconds",
			Help:    "HTTP request durations by method, route pattern and status code; watch streams and acquires that wait are in leasekeeper_http_long_request_duration_seconds.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"method", "route", "code"}),
		longRequests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leasekeeper_http_long_request_duration_seconds",
			Help:    "Durations of the requests that last as long as the client or the line makes them (watch streams, acquires with wait_ms), by method, route pattern and status code.",
			Buckets: []float64{.01, .1, 1, 10, 30, 60, 300, 900, 3600, 14400},
		}, []string{"method", "route", "code"}),
		acquireWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leasekeeper_acquire_wait_seconds",
			Help:    "Time an acquire with wait_ms spent before its answer, in line or granted at once, by outcome (ok or an error code; lease_held is a wait that ran out).",
			Buckets: []float64{.001, .01, .1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"outcome"}),
		delivery: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "leasekeeper_watch_delivery_delay_seconds",
			Help:    "Age of the oldest event in each write to a watch stream (from its commit to the write), among the events committed after the stream opened: how far watchers lag.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasekeeper_rate_limited_total",
			Help: "Requests refused 429 rate_limited by the per-key rate (--key-rate), by key id: as many series as API keys, which admins create.",
		}, []string{"key"}),
	}
	for _, src := range []string{SourceResource, SourceReported} {
		m.rejections.WithLabelValues(src) // both series exist from the start, at 0
	}
	reg.MustRegister(m.ops, m.expirations, m.rejections, m.requests, m.longRequests, m.acquireWait, m.delivery, m.rateLimited,
		&heldCollector{held: held, desc: prometheus.NewDesc("leasekeeper_leases_held", "Leases held now.", nil, nil)})
	return m
}

// ObserveDelivery records how old the oldest event of a write to a watch stream was; give it
// to the hub as watch.Options.OnDeliver.
func (m *Metrics) ObserveDelivery(age time.Duration) { m.delivery.Observe(max(age, 0).Seconds()) }

// ObserveAcquireWait records the time an acquire with wait_ms took before its answer.
func (m *Metrics) ObserveAcquireWait(err error, d time.Duration) {
	m.acquireWait.WithLabelValues(Outcome(err)).Observe(max(d, 0).Seconds())
}

// ObserveEvents counts committed events; wire it to the store's commit hook.
func (m *Metrics) ObserveEvents(evs []lease.Event) {
	for _, e := range evs {
		if e.Type == lease.EventExpired {
			m.expirations.Inc()
		}
	}
}

// RateLimited counts a request refused for its key's rate.
func (m *Metrics) RateLimited(keyID string) { m.rateLimited.WithLabelValues(keyID).Inc() }

// Op counts a lease operation (acquire, renew, release, revoke, handover, session_*) by how it
// ended.
func (m *Metrics) Op(op string, err error) { m.ops.WithLabelValues(op, Outcome(err)).Inc() }

// Rejected counts a stale write refused here (SourceResource) or reported (SourceReported).
func (m *Metrics) Rejected(source string) { m.rejections.WithLabelValues(source).Inc() }

// Outcome labels how an operation ended: ok, canceled or an error code.
func Outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.Canceled):
		return Canceled // the client left (a handler's context ends no other way)
	}
	return string(lease.ErrorCode(err))
}

// ObserveRequest records a request's duration by method, route pattern and status: a
// long-lived one (a watch stream, an acquire that waits) in its own histogram, so its minutes
// do not drown the milliseconds of the others.
func (m *Metrics) ObserveRequest(method, route string, status int, d time.Duration, long bool) {
	h := m.requests
	if long {
		h = m.longRequests
	}
	h.WithLabelValues(MethodLabel(method), route, strconv.Itoa(status)).Observe(d.Seconds())
}

// MethodLabel bounds a label (or a span attribute) that names a request's method: a client may
// send any token as a method, and each one would otherwise be a new series.
func MethodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return "other"
}

type heldCollector struct {
	held heldCounter
	desc *prometheus.Desc
}

func (c *heldCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *heldCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := c.held.HeldCount(ctx, "")
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
}
