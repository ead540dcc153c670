package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/metrics"
)

// held is a store that holds n leases.
type held int

func (n held) HeldCount(context.Context, string) (int, error) { return int(n), nil }

func TestLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, held(3))
	m.Op("acquire", nil)
	m.ObserveRequest(http.MethodGet, "/v1/leases", http.StatusOK, time.Millisecond, false)
	m.ObserveRequest(http.MethodGet, "/v1/watch", http.StatusOK, time.Minute, true)
	m.ObserveAcquireWait(nil, time.Second)
	m.ObserveDelivery(time.Millisecond)
	m.RateLimited("k1")
	m.Rejected(metrics.SourceReported)
	m.ObserveEvents([]lease.Event{{Type: lease.EventExpired}, {Type: lease.EventAcquired}})
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatalf("GatherAndLint() = %v", err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
	for name, want := range map[string]float64{"leasekeeper_leases_held": 3, "leasekeeper_lease_expirations_total": 1} {
		if got := value(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// value is the value of the series of reg named name (a gauge or a counter without labels).
func value(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			return m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestOutcome(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{lease.Errorf(lease.CodeHeld, "held"), "lease_held"},
		{fmt.Errorf("wait: %w", context.Canceled), metrics.Canceled},
		{errors.New("disk on fire"), "internal"},
	} {
		if got := metrics.Outcome(c.err); got != c.want {
			t.Errorf("Outcome(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestMethodLabel(t *testing.T) {
	for method, want := range map[string]string{"GET": "GET", "HEAD": "HEAD", "DELETE": "DELETE", "MADEUP": "other", "get": "other", "": "other"} {
		if got := metrics.MethodLabel(method); got != want {
			t.Errorf("MethodLabel(%q) = %q, want %q", method, got, want)
		}
	}
}
