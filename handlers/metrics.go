package handlers

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
	ops         *prometheus.CounterVec
	expirations prometheus.Counter
	rejections  prometheus.Counter
	requests    *prometheus.HistogramVec
}

// heldCounter counts the leases held now.
type heldCounter interface {
	HeldCount(ctx context.Context, prefix string) (int, error)
}

// NewMetrics registers the metrics on reg. leasekeeper_leases_held is read from held at every
// scrape, so it is always true, whatever restarts or expiries happened.
func NewMetrics(reg prometheus.Registerer, held heldCounter) *Metrics {
	m := &Metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasekeeper_lease_operations_total",
			Help: "Lease operations by op (acquire, renew, release, revoke, handover) and outcome (ok or an error code).",
		}, []string{"op", "outcome"}),
		expirations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasekeeper_lease_expirations_total",
			Help: "Leases that ended by expiring.",
		}),
		rejections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasekeeper_stale_writes_rejected_total",
			Help: "Writes refused because their fencing token was stale, here or reported by external resources.",
		}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leasekeeper_http_request_duration_seconds",
			Help:    "HTTP request durations by method, route pattern and status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"method", "route", "code"}),
	}
	reg.MustRegister(m.ops, m.expirations, m.rejections, m.requests, &heldCollector{held: held,
		desc: prometheus.NewDesc("leasekeeper_leases_held", "Leases held now.", nil, nil)})
	return m
}

// ObserveEvents counts committed events; wire it to the store's commit hook.
func (m *Metrics) ObserveEvents(evs []lease.Event) {
	for _, e := range evs {
		if e.Type == lease.EventExpired {
			m.expirations.Inc()
		}
	}
}

func (m *Metrics) op(op string, err error) {
	outcome := "ok"
	switch {
	case errors.Is(err, context.Canceled):
		outcome = string(codeCanceled) // the client left (a handler's context ends no other way)
	case err != nil:
		outcome = string(lease.ErrorCode(err))
	}
	m.ops.WithLabelValues(op, outcome).Inc()
}

func (m *Metrics) observeRequest(method, route string, status int, d time.Duration) {
	m.requests.WithLabelValues(methodLabel(method), route, strconv.Itoa(status)).Observe(d.Seconds())
}

// methodLabel bounds the method label: a client may send any token as a method, and each one
// would otherwise be a new series.
func methodLabel(method string) string {
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
