package dashboard_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
)

// dashStat is one number of the overview's summary: its text and where it links.
type dashStat struct{ n, href string }

func dashStats(t *testing.T, doc *html.Node) map[string]dashStat {
	t.Helper()
	out := map[string]dashStat{}
	for _, a := range dashFind(dashOne(t, doc, "triage"), func(n *html.Node) bool {
		return strings.HasPrefix(dashAttr(n, "data-testid"), "stat-")
	}) {
		n := dashFind(a, func(n *html.Node) bool { return dashAttr(n, "class") == "stat-n" })
		out[strings.TrimPrefix(dashAttr(a, "data-testid"), "stat-")] = dashStat{dashText(n[0]), dashAttr(a, "href")}
	}
	return out
}

// dashOrder is the ids of the elements, among ids, in the order the document has them.
func dashOrder(doc *html.Node, ids ...string) []string {
	var out []string
	for _, n := range dashFind(doc, func(n *html.Node) bool { return slices.Contains(ids, dashAttr(n, "id")) }) {
		out = append(out, dashAttr(n, "id"))
	}
	return out
}

// TestDashboardTriage: the overview opens with what needs a look (held, expiring within a
// minute, late renewals, refused writes in the last hour and day, waiters, pending handovers,
// the server's start), each number a link to its list; refused writes come before the held
// leases; a scoped reader's numbers count only its scope.
func TestDashboardTriage(t *testing.T) {
	clock := lease.NewFakeClock(dashT0)
	s, _ := newServiceServer(t, clock, nil)
	// Two hours ago, a stale write to ops-res.
	old := s.acquire("jobs-old", "w0", time.Minute, "")
	s.release("jobs-old", old)
	opsOld := s.acquire("ops-old", "w0", time.Minute, "")
	s.release("ops-old", opsOld)
	newer := s.acquire("ops-new", "w0", time.Minute, "")
	s.release("ops-new", newer)
	s.put("ops-res", newer.Token, "v1", nil)
	s.put("ops-res", opsOld.Token, "stale", nil)
	clock.Advance(2 * time.Hour)
	// Now, one to jobs-res; three held leases, and a handover asked of one.
	s.put("jobs-res", newer.Token, "v1", nil)
	s.put("jobs-res", old.Token, "stale", nil)
	s.acquire("jobs-late", "w1", 10*time.Second, "")
	s.acquire("jobs-soon", "w2", 40*time.Second, "")
	s.acquire("ops-long", "w3", time.Hour, "")
	if resp, body := s.do(http.MethodPost, "/v1/leases/ops-long/handover", strings.NewReader(`{"to":"w4@host-b","reason":"rolling deployment"}`),
		map[string]string{"Content-Type": "application/json"}); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("handover = %d %s", resp.StatusCode, body)
	}
	clock.Advance(6 * time.Second) // jobs-late: 6 s of a 10 s ttl without renewal; both jobs- expire within a minute

	_, doc := s.page("/", http.StatusOK, nil)
	want := map[string]dashStat{
		"held":          {"3", "/"},
		"soon":          {"2", "/?state=expiring&sort=expiry"},
		"late":          {"1", "/?state=late&sort=late"},
		"rejected-hour": {"1", "/rejections?range=1h"},
		"rejected-day":  {"2", "/rejections?range=24h"},
		"waiters":       {"0", "#waiting-heading"},
		"handovers":     {"1", "#handovers-heading"},
	}
	got := dashStats(t, doc)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("summary %s = %+v, want %+v", k, got[k], w)
		}
	}
	if got := dashOrder(doc, "triage-heading", "rejected-heading", "held-heading"); !slices.Equal(got, []string{"triage-heading", "rejected-heading", "held-heading"}) {
		t.Errorf("overview sections in order %v, want the summary, then refused writes, then held leases", got)
	}
	h := dashOne(t, doc, "handover")
	if txt := dashText(h); !strings.Contains(txt, "ops-long") || !strings.Contains(txt, "w4@host-b") || !strings.Contains(txt, "rolling deployment") {
		t.Errorf("pending handover = %q, want the lease, its target and reason", txt)
	}
	var rowBadge bool
	for _, row := range dashByTestID(doc, "lease-row") {
		if strings.Contains(dashText(row), "ops-long") {
			b := dashByTestID(row, "handover-badge")
			rowBadge = len(b) == 1 && strings.Contains(dashText(b[0]), "to w4@host-b") && strings.Contains(dashText(b[0]), "6 s ago")
		}
	}
	if !rowBadge {
		t.Errorf("ops-long's row has no handover badge with its target and age")
	}
	if txt := dashText(dashOne(t, doc, "server-start")); !strings.Contains(txt, "2 h ago") || len(dashByTestID(doc, "recent-restart")) != 0 {
		t.Errorf("server start = %q, want two hours ago and no recent-restart badge", txt)
	}

	// A reader of jobs- (and web-, where nothing is) sees only its own.
	_, doc = s.page("/", http.StatusOK, dashBearer(servicetest.Key(t, s.store, auth.Reader, "jobs-", "web-")))
	got = dashStats(t, doc)
	for k, w := range map[string]string{"held": "2", "soon": "2", "late": "1", "rejected-hour": "1", "rejected-day": "1", "waiters": "0", "handovers": "0"} {
		if got[k].n != w {
			t.Errorf("summary %s for a jobs- reader = %s, want %s", k, got[k].n, w)
		}
	}
	if strings.Contains(dashText(doc), "ops-long") || strings.Contains(dashText(doc), "rolling deployment") {
		t.Errorf("a jobs- reader's overview names ops-long or its handover")
	}
}

// TestDashboardTriageWaiters: the summary counts the acquires waiting in line for names the
// viewer may see, and lists those names.
func TestDashboardTriageWaiters(t *testing.T) {
	s := newDashLiveServer(t)
	s.acquire("ops-long", "w3", time.Hour, "")
	s.acquire("jobs-a", "w3", time.Hour, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/leases/ops-long/acquire",
			strings.NewReader(`{"holder":"w4@host-b","ttl_ms":60000,"wait_ms":240000}`))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := s.hc.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); s.waiterCount("ops-long") != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the acquire never joined ops-long's line")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, doc := s.page("/", http.StatusOK, nil)
	if got := dashStats(t, doc)["waiters"]; got != (dashStat{"1", "#waiting-heading"}) {
		t.Errorf("summary waiters = %+v, want 1 linking to the list", got)
	}
	if txt := dashText(dashOne(t, doc, "waiting")); !strings.Contains(txt, "ops-long") || !strings.Contains(txt, "1 waiter") {
		t.Errorf("waiting list = %q, want ops-long with 1 waiter", txt)
	}
	_, doc = s.page("/", http.StatusOK, dashBearer(servicetest.Key(t, s.store, auth.Reader, "jobs-")))
	if got := dashStats(t, doc)["waiters"].n; got != "0" || len(dashByTestID(doc, "waiting")) != 0 {
		t.Errorf("summary waiters for a jobs- reader = %s, want 0 and no list", got)
	}
}

// TestDashboardHeldSortHeaders: the held table's column headers order it, keeping the filters,
// and say which order is on.
func TestDashboardHeldSortHeaders(t *testing.T) {
	s := newDashServer(t)
	s.acquire("jobs-a", "w1", time.Minute, "")
	_, doc := s.page("/?q=jobs&sort=expiry", http.StatusOK, nil)
	for id, want := range map[string][2]string{
		"sort-name":   {"/?q=jobs", "none"},
		"sort-newest": {"/?q=jobs&sort=newest", "none"},
		"sort-expiry": {"/?q=jobs&sort=expiry", "ascending"},
		"sort-late":   {"/?q=jobs&sort=late", "none"},
	} {
		th := dashOne(t, doc, id)
		a := dashFind(th, func(n *html.Node) bool { return n.Data == "a" })
		if len(a) != 1 || dashAttr(a[0], "href") != want[0] || dashAttr(th, "aria-sort") != want[1] {
			t.Errorf("header %s = %s, want a link to %s and aria-sort %s", id, dashHTML(th), want[0], want[1])
		}
	}
}

// dashBearer is the header that sends key instead of the admin key.
func dashBearer(key string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + key}
}

// TestDashboardLeaseHandover: a lease's page shows its pending handover (target, reason, age)
// and its history names them; once the grant ends, the badge goes.
func TestDashboardLeaseHandover(t *testing.T) {
	s := newDashServer(t)
	l := s.acquire("billing-nightly", "cron@host-b", time.Hour, "")
	if resp, body := s.do(http.MethodPost, "/v1/leases/billing-nightly/handover", strings.NewReader(`{"to":"cron@host-c","reason":"rolling deployment"}`),
		map[string]string{"Content-Type": "application/json"}); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("handover = %d %s", resp.StatusCode, body)
	}
	s.clock.Advance(3 * time.Minute)
	_, doc := s.page("/leases/billing-nightly", http.StatusOK, nil)
	b := dashOne(t, dashOne(t, doc, "lease-state"), "handover-badge")
	if txt := dashText(b); !strings.Contains(txt, "to cron@host-c") || !strings.Contains(txt, "rolling deployment") || !strings.Contains(txt, "3 min ago") {
		t.Errorf("handover badge = %q, want its target, reason and age", txt)
	}
	if txt := dashText(dashOne(t, doc, "event-handover")); !strings.Contains(txt, "cron@host-c") || !strings.Contains(txt, "rolling deployment") {
		t.Errorf("history's handover row = %q, want its target and reason", txt)
	}
	s.release("billing-nightly", l)
	_, doc = s.page("/leases/billing-nightly", http.StatusOK, nil)
	if n := len(dashByTestID(doc, "handover-badge")); n != 0 {
		t.Errorf("after the release the page shows %d handover badges, want none", n)
	}
}
