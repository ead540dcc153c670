package service_test

import (
	"strings"
	"sync/atomic"
	"testing"

	sqlite3 "github.com/mattn/go-sqlite3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// gauge is the value of the one series of name whose labels include label="value" (all of
// name's series when label is empty); it fails the test when there is none.
func gauge(t *testing.T, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if label == "" || lp.GetName() == label && lp.GetValue() == value {
					return m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
			if label == "" {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series %s{%s=%q} in the registry", name, label, value)
	return 0
}

// TestOperatingMetrics checks the series the alerting rules in deploy/prometheus stand on:
// a watched name held and free, readiness and the write failures of a failing disk, the caps,
// the free space.
func TestOperatingMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	var broken atomic.Bool
	fault := func(step string) error {
		if broken.Load() && step == "commit" {
			return sqlite3.Error{Code: sqlite3.ErrFull} // as a full disk answers
		}
		return nil
	}
	srv, _ := servicetest.Start(t, service.Config{Registry: reg, WatchedLeases: []string{"leader", "never-used"}},
		sqlite.Options{Fault: fault})

	if got := gauge(t, reg, "leasekeeper_watched_lease_held", "name", "leader"); got != 0 {
		t.Errorf("leasekeeper_watched_lease_held{name=leader} before any acquire = %v, want 0", got)
	}
	l := mustAcquire(t, srv.URL, "leader", "a")
	if got := gauge(t, reg, "leasekeeper_watched_lease_held", "name", "leader"); got != 1 {
		t.Errorf("leasekeeper_watched_lease_held{name=leader} while held = %v, want 1", got)
	}
	if got := gauge(t, reg, "leasekeeper_watched_lease_held", "name", "never-used"); got != 0 {
		t.Errorf("leasekeeper_watched_lease_held{name=never-used} = %v, want 0", got)
	}
	if code, b := post(t, srv.URL+"/v1/leases/leader/release", `{"lease_id":"`+l["lease_id"].(string)+`"}`); code != 204 {
		t.Fatalf("release = %d %v", code, b)
	}
	if got := gauge(t, reg, "leasekeeper_watched_lease_held", "name", "leader"); got != 0 {
		t.Errorf("leasekeeper_watched_lease_held{name=leader} after release = %v, want 0", got)
	}
	if n := testutil.CollectAndCount(reg, "leasekeeper_watched_lease_held"); n != 2 {
		t.Errorf("leasekeeper_watched_lease_held has %d series, want one per watched name (2)", n)
	}

	if got := gauge(t, reg, "leasekeeper_ready", "", ""); got != 1 {
		t.Errorf("leasekeeper_ready = %v, want 1", got)
	}
	if got := gauge(t, reg, "leasekeeper_store_write_failures_total", "", ""); got != 0 {
		t.Errorf("leasekeeper_store_write_failures_total = %v before a failure, want 0", got)
	}
	broken.Store(true)
	if code, _ := post(t, srv.URL+"/v1/leases/other/acquire", `{"holder":"a","ttl_ms":60000}`); code < 500 {
		t.Errorf("acquire on a failing disk = %d, want 5xx", code)
	}
	if got := gauge(t, reg, "leasekeeper_store_write_failures_total", "", ""); got != 1 {
		t.Errorf("leasekeeper_store_write_failures_total after a failed commit = %v, want 1", got)
	}
	if got := gauge(t, reg, "leasekeeper_ready", "", ""); got != 0 {
		t.Errorf("leasekeeper_ready while writes fail = %v, want 0", got)
	}

	for name, want := range map[string]float64{"leasekeeper_waiters_limit": 10000, "leasekeeper_watchers_limit": 1000} {
		if got := gauge(t, reg, name, "", ""); got != want {
			t.Errorf("%s = %v, want the default cap %v", name, got, want)
		}
	}
	if got := gauge(t, reg, "leasekeeper_store_disk_free_bytes", "", ""); got <= 0 {
		t.Errorf("leasekeeper_store_disk_free_bytes = %v, want > 0", got)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("GatherAndLint() = %v, %v", problems, err)
	}
}

// TestWatchedLeasesBounded: more names than MaxWatchedLeases, or a name that is not one, are
// refused at start, so the series of leasekeeper_watched_lease_held stay bounded.
func TestWatchedLeasesBounded(t *testing.T) {
	var hooks service.Hooks
	_, st := servicetest.Start(t, service.Config{Registry: prometheus.NewRegistry()}, sqlite.Options{})
	many := make([]string, service.MaxWatchedLeases+1)
	for i := range many {
		many[i] = "leader-" + strings.Repeat("x", i%5) + string(rune('a'+i%26))
	}
	for _, names := range [][]string{many, {"no/slash"}} {
		if _, err := service.New(st, &hooks, service.Config{Registry: prometheus.NewRegistry(), WatchedLeases: names}); err == nil {
			t.Errorf("service.New(%d watched names, first %q) = nil, want an error", len(names), names[0])
		}
	}
}
