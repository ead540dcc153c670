package handlers_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leasekeeper/leasekeeper/api"
)

// gathered is what reg holds now, by name.
func gathered(t *testing.T, reg prometheus.Gatherer) scraped {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	m := scraped{}
	for _, mf := range mfs {
		m[mf.GetName()] = mf
	}
	return m
}

// metric returns the value of the series of name whose labels include labels, 0 if absent.
func metric(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	s := gathered(t, reg).find(name, labels)
	if g := s.GetGauge(); g != nil {
		return g.GetValue()
	}
	return s.GetCounter().GetValue()
}

func TestMetricsLint(t *testing.T) {
	e := newEnv(t)
	e.acquire("job", "w1", time.Second) // so every vector has a series
	problems, err := testutil.GatherAndLint(e.reg)
	if err != nil {
		t.Fatalf("GatherAndLint() = %v", err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
}

func TestMetricsMove(t *testing.T) {
	e := newEnv(t)
	ops := func(op, outcome string) float64 {
		return metric(t, e.reg, "leasekeeper_lease_operations_total", map[string]string{"op": op, "outcome": outcome})
	}
	held := func() float64 { return metric(t, e.reg, "leasekeeper_leases_held", nil) }
	expirations := func() float64 { return metric(t, e.reg, "leasekeeper_lease_expirations_total", nil) }

	if held() != 0 || expirations() != 0 {
		t.Fatalf("at start: held %v, expirations %v; want 0 and 0", held(), expirations())
	}
	a := e.acquire("a", "w1", 10*time.Second)
	e.acquire("b", "w1", 2*time.Second)
	e.c.AcquireLeaseWithResponse(e.ctx, "a", nil, api.AcquireRequest{Holder: "w2", TtlMs: 1000})
	e.c.AcquireLeaseWithResponse(e.ctx, "a", nil, api.AcquireRequest{Holder: "w2", TtlMs: 1})
	if held() != 2 {
		t.Errorf("held after two grants = %v, want 2", held())
	}
	e.c.RenewLeaseWithResponse(e.ctx, "a", api.RenewRequest{LeaseId: *a.LeaseId})
	e.c.RenewLeaseWithResponse(e.ctx, "a", api.RenewRequest{LeaseId: "lk_wrong"})
	e.c.ReleaseLeaseWithResponse(e.ctx, "a", api.ReleaseRequest{LeaseId: *a.LeaseId})
	if held() != 1 {
		t.Errorf("held after a release = %v, want 1", held())
	}
	e.clock.Advance(3 * time.Second) // b expires; the gauge follows the clock at once
	if held() != 0 {
		t.Errorf("held after b's expiry = %v, want 0", held())
	}
	if expirations() != 0 {
		t.Errorf("expirations before the expiry is recorded = %v, want 0", expirations())
	}
	if _, _, err := e.store.ExpireDue(e.ctx); err != nil { // what the sweeper does
		t.Fatal(err)
	}
	if expirations() != 1 {
		t.Errorf("expirations after the sweep = %v, want 1", expirations())
	}
	e.c.RevokeLeaseWithResponse(e.ctx, "never", nil)

	for _, tt := range []struct {
		op, outcome string
		want        float64
	}{
		{"acquire", "ok", 2}, {"acquire", "lease_held", 1}, {"acquire", "invalid_request", 1},
		{"renew", "ok", 1}, {"renew", "lease_lost", 1},
		{"release", "ok", 1},
		{"revoke", "not_found", 1},
	} {
		if got := ops(tt.op, tt.outcome); got != tt.want {
			t.Errorf("leasekeeper_lease_operations_total{op=%q,outcome=%q} = %v, want %v", tt.op, tt.outcome, got, tt.want)
		}
	}
	if got := metric(t, e.reg, "leasekeeper_stale_writes_rejected_total", map[string]string{"source": "resource"}); got != 0 {
		t.Errorf("stale writes rejected = %v, want 0", got)
	}
}

// TestMetricsMethodLabelBounded sends made-up methods: each must not become a series of its own.
func TestMetricsMethodLabelBounded(t *testing.T) {
	e := newEnv(t)
	const name = "leasekeeper_http_request_duration_seconds"
	series := func() map[string]uint64 {
		t.Helper()
		mfs, err := e.reg.Gather()
		if err != nil {
			t.Fatalf("Gather() = %v", err)
		}
		out := map[string]uint64{}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				key := ""
				for _, l := range m.GetLabel() {
					key += l.GetName() + "=" + l.GetValue() + ","
				}
				out[key] = m.GetHistogram().GetSampleCount()
			}
		}
		return out
	}
	e.do(http.MethodGet, "/healthz", nil, nil)
	before := len(series())
	for i := range 20 {
		e.do(fmt.Sprintf("MADEUP%d", i), "/v1/leases/job", nil, nil)
	}
	after := series()
	if len(after) > before+1 {
		t.Errorf("%s has %d series after 20 made-up methods, want at most %d: %v", name, len(after), before+1, after)
	}
	var other uint64
	for k, n := range after {
		if strings.HasPrefix(k, "code=") && strings.Contains(k, "method=other,") {
			other += n
		}
	}
	if other != 20 {
		t.Errorf("requests labelled method=other = %d, want 20 (series %v)", other, after)
	}
}
