package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"

	"github.com/leasekeeper/leasekeeper/store"
)

// TestDashboardPagesAreHTML checks what every page answers besides its content: 200, an HTML
// document, and the headers of the fragment contract.
func TestDashboardPagesAreHTML(t *testing.T) {
	s := newDashServer(t)
	s.acquire("orders-db", "worker-1@host-a", 30*time.Second, "")
	for _, path := range []string{"/", "/leases/orders-db", "/rejections", "/resources"} {
		t.Run(path, func(t *testing.T) {
			resp, doc := s.page(path, http.StatusOK, nil)
			if got := resp.Header.Get("Vary"); !strings.Contains(got, "LK-Fragment") {
				t.Errorf("GET %s Vary = %q, want LK-Fragment", path, got)
			}
			if got := resp.Header.Get("Cache-Control"); got != "no-store" {
				t.Errorf("GET %s Cache-Control = %q, want no-store", path, got)
			}
			csp := resp.Header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("GET %s Content-Security-Policy = %q, want %s", path, csp, want)
				}
			}
			if strings.Contains(csp, "unsafe") {
				t.Errorf("GET %s Content-Security-Policy = %q, want no unsafe-* source", path, csp)
			}
			for k, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"} {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("GET %s %s = %q, want %q", path, k, got, want)
				}
			}
			live := dashOne(t, doc, "live")
			if dashAttr(live, "id") != "live" {
				t.Errorf("GET %s: the live region's id = %q, want live", path, dashAttr(live, "id"))
			}
			if len(dashFind(doc, func(n *html.Node) bool { return n.Data == "main" })) != 1 {
				t.Errorf("GET %s: no <main>", path)
			}
		})
	}
}

func TestDashboardOverviewEmpty(t *testing.T) {
	s := newDashServer(t)
	_, doc := s.page("/", http.StatusOK, nil)
	dashOne(t, doc, "empty-state")
	curl := dashText(dashOne(t, doc, "curl-example"))
	host := strings.TrimPrefix(s.url, "http://")
	if !strings.Contains(curl, host+"/v1/leases/") {
		t.Errorf("curl example = %q, want the server's host %s", curl, host)
	}
	if got := dashByTestID(doc, "held-table"); len(got) != 0 {
		t.Errorf("an empty server shows a held table")
	}
}

func TestDashboardOverview(t *testing.T) {
	s := newDashServer(t)
	ctx := context.Background()
	orders := s.acquire("orders-db", "worker-1@host-a", 30*time.Second, `{"addr": "10.0.0.7:9000"}`)
	s.acquire("billing-1", "worker-2@host-b", time.Minute, "")
	s.clock.Advance(time.Second)
	old := s.acquire("billing-2", "worker-3@host-c", time.Minute, "")
	s.release("billing-2", old)
	s.acquireWith("cron-nightly", map[string]any{"holder": "cron@host-d", "ttl_ms": 5000, "lock_delay_ms": 10000})
	s.clock.Advance(6 * time.Second)
	if _, _, err := s.store.ExpireDue(ctx); err != nil {
		t.Fatalf("ExpireDue() = %v", err)
	}
	// A stale write: the fence of invoices is at billing-2's newer token, then orders-db's
	// older token is presented.
	if got := s.put("invoices", orders.Token+10, "v1", nil); got != http.StatusCreated {
		t.Fatalf("PUT invoices = %d, want 201", got)
	}
	if got := s.put("invoices", orders.Token, "v0", nil); got != http.StatusConflict {
		t.Fatalf("stale PUT invoices = %d, want 409", got)
	}

	_, doc := s.page("/", http.StatusOK, nil)
	if got := dashText(dashOne(t, doc, "held-count")); got != "2" {
		t.Errorf("held-count = %q, want 2", got)
	}
	if live := dashOne(t, doc, "live"); !dashHasAttr(live, "data-watch-prefix") {
		t.Errorf("the overview's live region has no data-watch-prefix")
	}
	rows := dashByTestID(dashOne(t, doc, "held-table"), "lease-row")
	var names []string
	for _, r := range rows {
		names = append(names, dashText(dashOne(t, r, "lease-link")))
	}
	if diff := cmp.Diff([]string{"billing-1", "orders-db"}, names); diff != "" {
		t.Errorf("held rows (-want +got):\n%s", diff)
	}
	row := rows[slices.Index(names, "orders-db")]
	if got := dashText(dashOne(t, row, "holder")); got != "worker-1@host-a" {
		t.Errorf("orders-db holder = %q, want worker-1@host-a", got)
	}
	if got := dashText(dashOne(t, row, "token")); got != strconv.FormatInt(orders.Token, 10) {
		t.Errorf("orders-db token = %q, want %d", got, orders.Token)
	}
	if got := dashAttr(dashOne(t, row, "lease-link"), "href"); got != "/leases/orders-db" {
		t.Errorf("orders-db link = %q, want /leases/orders-db", got)
	}
	cd := dashOne(t, row, "countdown")
	// orders-db was taken at t0 for 30 s; the page is rendered 7 s later.
	if got, want := dashAttr(cd, "data-expires-at"), "2026-11-29T12:00:30.000Z"; got != want {
		t.Errorf("orders-db countdown data-expires-at = %q, want %q", got, want)
	}
	if got := dashText(cd); got != "in 23 s" {
		t.Errorf("orders-db countdown text = %q, want in 23 s", got)
	}
	if got := dashText(dashOne(t, row, "metadata")); got != `{"addr":"10.0.0.7:9000"}` {
		t.Errorf("orders-db metadata = %q", got)
	}
	if nows := dashFind(dashOne(t, doc, "live"), func(n *html.Node) bool { return dashHasAttr(n, "data-now") }); len(nows) != 1 ||
		dashAttr(nows[0], "data-now") != "2026-11-29T12:00:07.000Z" {
		t.Errorf("the live region's data-now elements = %d, want one with the render time 12:00:07", len(nows))
	}

	freed := map[string]string{}
	for _, r := range dashByTestID(dashOne(t, doc, "freed-table"), "freed-row") {
		freed[dashText(dashOne(t, r, "lease-link"))] = dashText(dashOne(t, r, "end"))
	}
	if diff := cmp.Diff(map[string]string{"billing-2": "released", "cron-nightly": "expired"}, freed); diff != "" {
		t.Errorf("recently freed (-want +got):\n%s", diff)
	}

	rejs := dashByTestID(dashOne(t, doc, "rejections-table"), "rejection-row")
	if len(rejs) != 1 {
		t.Fatalf("rejection rows = %d, want 1", len(rejs))
	}
	if got := dashText(dashOne(t, rejs[0], "presented-token")); got != strconv.FormatInt(orders.Token, 10) {
		t.Errorf("rejection presented token = %q, want %d", got, orders.Token)
	}
	if got := dashText(dashOne(t, rejs[0], "current-fence")); got != strconv.FormatInt(orders.Token+10, 10) {
		t.Errorf("rejection current fence = %q, want %d", got, orders.Token+10)
	}
	if !strings.Contains(dashText(rejs[0]), "invoices") || !strings.Contains(dashText(rejs[0]), "worker-1@host-a") {
		t.Errorf("rejection row = %q, want the resource invoices and the stale token's holder", dashText(rejs[0]))
	}
	dashOne(t, doc, "all-rejections")
}

func TestDashboardOverviewSearch(t *testing.T) {
	s := newDashServer(t)
	s.acquire("orders-db", "a", 30*time.Second, "")
	s.acquire("billing-1", "b", 30*time.Second, "")
	s.acquire("billing-2", "c", 30*time.Second, "")

	t.Run("OK", func(t *testing.T) {
		_, doc := s.page("/?prefix=billing-", http.StatusOK, nil)
		got := dashTexts(dashByTestID(dashOne(t, doc, "held-table"), "lease-link"))
		if diff := cmp.Diff([]string{"billing-1", "billing-2"}, got); diff != "" {
			t.Errorf("held with prefix billing- (-want +got):\n%s", diff)
		}
		if got := dashText(dashOne(t, doc, "held-count")); got != "2" {
			t.Errorf("held-count = %q, want 2", got)
		}
		input := dashFind(dashOne(t, doc, "search-form"), func(n *html.Node) bool { return dashAttr(n, "name") == "prefix" })
		if len(input) != 1 || dashAttr(input[0], "value") != "billing-" {
			t.Errorf("the search field does not keep the prefix")
		}
		dashOne(t, doc, "clear-search")
		if got := dashAttr(dashOne(t, doc, "live"), "data-watch-prefix"); got != "billing-" {
			t.Errorf("data-watch-prefix = %q, want billing-", got)
		}
	})
	t.Run("NoMatch", func(t *testing.T) {
		_, doc := s.page("/?prefix=nothing-", http.StatusOK, nil)
		if got := dashText(dashOne(t, doc, "no-held")); !strings.Contains(got, "nothing-") {
			t.Errorf("no-held = %q, want it to name the prefix", got)
		}
		if got := dashText(dashOne(t, doc, "held-count")); got != "0" {
			t.Errorf("held-count = %q, want 0", got)
		}
	})
}

// TestDashboardOverviewPages walks the held leases page by page with the next-page links.
func TestDashboardOverviewPages(t *testing.T) {
	s := newDashServer(t)
	ctx := context.Background()
	var want []string
	for i := range 57 {
		name := "job-" + strconv.Itoa(1000+i)
		if _, err := s.store.Acquire(ctx, store.AcquireParams{Name: name, Holder: "w", TTL: time.Minute}); err != nil {
			t.Fatalf("Acquire(%s) = %v", name, err)
		}
		want = append(want, name)
	}
	s.acquire("other", "w", time.Minute, "")

	var got []string
	path := "/?prefix=job-"
	for page := 0; path != ""; page++ {
		if page > 5 {
			t.Fatalf("the next-page links never end")
		}
		_, doc := s.page(path, http.StatusOK, nil)
		rows := dashByTestID(dashOne(t, doc, "held-table"), "lease-link")
		if len(rows) == 0 {
			t.Fatalf("GET %s: an empty page", path)
		}
		got = append(got, dashTexts(rows)...)
		if c := dashText(dashOne(t, doc, "held-count")); c != "57" {
			t.Errorf("GET %s: held-count = %q, want 57 over all pages", path, c)
		}
		if first := dashByTestID(doc, "first-page"); (page > 0) != (len(first) == 1) {
			t.Errorf("GET %s: first-page links = %d on page %d", path, len(first), page)
		}
		path = ""
		if next := dashByTestID(doc, "next-page"); len(next) == 1 {
			path = dashAttr(next[0], "href")
			u, err := url.Parse(path)
			if err != nil || u.Path != "/" || u.Query().Get("prefix") != "job-" || u.Query().Get("cursor") == "" {
				t.Fatalf("next-page href = %q, want / with the prefix and a cursor", path)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("held leases over all pages (-want +got):\n%s", diff)
	}
}

func TestDashboardLeasePage(t *testing.T) {
	s := newDashServer(t)
	first := s.acquire("orders-db", "worker-1@host-a", 10*time.Second, "")
	s.clock.Advance(2 * time.Second)
	s.release("orders-db", first)
	s.clock.Advance(time.Second)
	second := s.acquire("orders-db", "worker-2@host-b", 30*time.Second, `{"addr":"10.0.0.8:9000"}`)
	s.put("orders", second.Token, "v2", map[string]string{"Lease-Name": "orders-db"})
	s.put("orders", first.Token, "v1", nil) // stale
	s.clock.Advance(4 * time.Second)

	t.Run("Held", func(t *testing.T) {
		_, doc := s.page("/leases/orders-db", http.StatusOK, nil)
		if got := dashText(dashOne(t, doc, "lease-name")); got != "orders-db" {
			t.Errorf("lease-name = %q", got)
		}
		state := dashOne(t, doc, "lease-state")
		if got := dashText(dashOne(t, state, "state")); got != "held" {
			t.Errorf("state = %q, want held", got)
		}
		if got := dashText(dashOne(t, state, "holder")); got != "worker-2@host-b" {
			t.Errorf("holder = %q, want worker-2@host-b", got)
		}
		if got := dashText(dashOne(t, state, "token")); got != strconv.FormatInt(second.Token, 10) {
			t.Errorf("token = %q, want %d", got, second.Token)
		}
		if got := dashText(dashOne(t, state, "countdown")); got != "in 26 s" {
			t.Errorf("countdown = %q, want in 26 s", got)
		}
		if got := dashText(dashOne(t, state, "metadata")); got != `{"addr":"10.0.0.8:9000"}` {
			t.Errorf("metadata = %q", got)
		}
		if got := dashAttr(dashOne(t, doc, "live"), "data-watch-prefix"); got != "orders-db" {
			t.Errorf("data-watch-prefix = %q, want orders-db", got)
		}

		svg := dashOne(t, doc, "timeline")
		if svg.Data != "svg" {
			t.Fatalf("timeline is <%s>, want <svg>", svg.Data)
		}
		labels := dashTexts(dashFind(svg, func(n *html.Node) bool { return dashAttr(n, "class") == "tl-label" }))
		for _, want := range []string{"worker-1@host-a #" + strconv.FormatInt(first.Token, 10), "worker-2@host-b #" + strconv.FormatInt(second.Token, 10)} {
			if !slices.Contains(labels, want) {
				t.Errorf("timeline labels = %q, want %q", labels, want)
			}
		}
		if marks := dashFind(svg, func(n *html.Node) bool { return dashAttr(n, "class") == "tl-reject" }); len(marks) != 1 {
			t.Errorf("timeline rejection marks = %d, want 1", len(marks))
		}
		dashOne(t, doc, "timeline-legend")

		// The cells of a row are: seq, event, token, holder, resource, time.
		var types []string
		for _, r := range dashByTestID(dashOne(t, doc, "event-table"), "event-row") {
			cells := dashFind(r, func(n *html.Node) bool { return n.Data == "td" || n.Data == "th" })
			types = append(types, dashText(cells[1]))
		}
		if diff := cmp.Diff([]string{"acquired", "released", "acquired", "rejected"}, types); diff != "" {
			t.Errorf("event table (-want +got):\n%s", diff)
		}

		form := dashOne(t, doc, "revoke-form")
		if got := dashAttr(form, "action"); got != "/leases/orders-db/revoke" {
			t.Errorf("revoke form action = %q", got)
		}
		if dashAttr(form, "method") != "post" || dashAttr(dashOne(t, form, "csrf"), "value") == "" {
			t.Errorf("revoke form = %s, want a POST with a CSRF token", dashHTML(form))
		}
		if got := dashAttr(form, "data-confirm"); !strings.Contains(got, "orders-db") || !strings.Contains(got, "worker-2@host-b") {
			t.Errorf("revoke form data-confirm = %q, want the name and holder", got)
		}
	})

	t.Run("Free", func(t *testing.T) {
		s.acquire("scratch", "tmp@host", 5*time.Second, "")
		s.clock.Advance(6 * time.Second)
		_, doc := s.page("/leases/scratch", http.StatusOK, nil)
		state := dashOne(t, doc, "lease-state")
		if got := dashText(dashOne(t, state, "state")); got != "free" {
			t.Errorf("state = %q, want free", got)
		}
		if got := dashText(dashOne(t, state, "holder")); got != "tmp@host" {
			t.Errorf("last holder = %q, want tmp@host", got)
		}
		if got := dashByTestID(doc, "revoke-form"); len(got) != 0 {
			t.Errorf("a free lease shows a revoke form")
		}
	})
}

func TestDashboardNotFound(t *testing.T) {
	s := newDashServer(t)
	for _, path := range []string{"/leases/never-used", "/leases/bad%20name", "/no-such-page"} {
		t.Run(path, func(t *testing.T) {
			_, doc := s.page(path, http.StatusNotFound, nil)
			if got := dashText(dashOne(t, doc, "status")); got != "404" {
				t.Errorf("status = %q, want 404", got)
			}
			dashOne(t, doc, "detail")
		})
	}
	t.Run("Fragment", func(t *testing.T) {
		resp, body := s.do(http.MethodGet, "/leases/never-used", nil, map[string]string{"LK-Fragment": "1", "Accept": "*/*"})
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("fragment of an unknown lease = %d, want 404 (the script ignores it)", resp.StatusCode)
		}
		if strings.Contains(body, `data-now=`) {
			t.Errorf("the 404 answer to a fragment request looks like a live region")
		}
	})
}

// TestDashboardFragment checks the fragment contract: with "LK-Fragment: 1" each page answers
// only the inner HTML of its live region, the same HTML the full page holds there.
func TestDashboardFragment(t *testing.T) {
	s := newDashServer(t)
	l := s.acquire("orders-db", "worker-1@host-a", 30*time.Second, "")
	s.put("r", l.Token, "x", nil)
	s.put("r", l.Token-1, "y", nil)
	for _, path := range []string{"/", "/?prefix=orders", "/leases/orders-db", "/rejections", "/rejections?resource=r", "/resources"} {
		t.Run(path, func(t *testing.T) {
			full, fullBody := s.do(http.MethodGet, path, nil, nil)
			frag, fragBody := s.do(http.MethodGet, path, nil, map[string]string{"LK-Fragment": "1"})
			if full.StatusCode != http.StatusOK || frag.StatusCode != http.StatusOK {
				t.Fatalf("GET %s = %d, fragment %d; want 200", path, full.StatusCode, frag.StatusCode)
			}
			if ct := frag.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Errorf("fragment Content-Type = %q, want text/html", ct)
			}
			if got := frag.Header.Get("Vary"); !strings.Contains(got, "LK-Fragment") {
				t.Errorf("fragment Vary = %q, want LK-Fragment", got)
			}
			for _, whole := range []string{"<!doctype", "<html", "<head", "<body", `id="live"`, "<nav", "<form class=\"search\"", "<footer"} {
				if strings.Contains(strings.ToLower(fragBody), strings.ToLower(whole)) {
					t.Errorf("the fragment holds %s; want the live region's content only", whole)
				}
			}
			if !strings.HasPrefix(strings.TrimSpace(fragBody), `<div class="live-body" data-now=`) {
				t.Errorf("the fragment starts with %.60q, want the live body", fragBody)
			}
			// The clock stands still, so the full page holds exactly the fragment.
			if !strings.Contains(fullBody, fragBody) {
				t.Errorf("the full page does not contain the fragment")
			}
		})
	}
}

func TestDashboardRejections(t *testing.T) {
	s := newDashServer(t)
	a := s.acquire("lock-a", "worker-a", time.Minute, "")
	b := s.acquire("lock-b", "worker-b", time.Minute, "")
	s.put("res-1", b.Token, "new", nil)
	s.put("res-1", a.Token, "stale", map[string]string{"User-Agent": "stale-client/1.0"})
	s.put("res-2", b.Token, "new", nil)
	s.put("res-2", a.Token, "stale", nil)
	s.put("res-2", b.Token, "wrong lease", map[string]string{"Lease-Name": "lock-a"})

	rowsOf := func(t *testing.T, path string) [][]string {
		t.Helper()
		_, doc := s.page(path, http.StatusOK, nil)
		var out [][]string
		for _, r := range dashByTestID(doc, "rejection-row") {
			cells := dashFind(r, func(n *html.Node) bool { return (n.Data == "td" || n.Data == "th") && n.Parent == r })
			out = append(out, dashTexts(cells))
		}
		return out
	}
	res := func(rows [][]string) []string {
		var out []string
		for _, r := range rows {
			out = append(out, strings.Fields(r[0])[0])
		}
		return out
	}

	t.Run("All", func(t *testing.T) {
		rows := rowsOf(t, "/rejections")
		if diff := cmp.Diff([]string{"res-2", "res-2", "res-1"}, res(rows)); diff != "" {
			t.Errorf("rejections, newest first (-want +got):\n%s", diff)
		}
		last := rows[2] // resource, lease, holder, presented and fence, how stale, client and user agent, time
		if len(last) != 7 {
			t.Fatalf("a rejection row has %d cells, want 7: %q", len(last), last)
		}
		want := []string{"lock-a", "worker-a", strconv.FormatInt(a.Token, 10) + " fence " + strconv.FormatInt(b.Token, 10)}
		if diff := cmp.Diff(want, last[1:4]); diff != "" {
			t.Errorf("the res-1 rejection (-want +got):\n%s", diff)
		}
		if !strings.HasSuffix(last[5], "stale-client/1.0") || !strings.HasPrefix(last[5], "127.0.0.1") || strings.Contains(last[0], "external") {
			t.Errorf("the res-1 rejection's resource, client = %q, %q", last[0], last[5])
		}
	})
	t.Run("ByResource", func(t *testing.T) {
		if diff := cmp.Diff([]string{"res-1"}, res(rowsOf(t, "/rejections?resource=res-1"))); diff != "" {
			t.Errorf("resource=res-1 (-want +got):\n%s", diff)
		}
	})
	t.Run("ByLease", func(t *testing.T) {
		rows := rowsOf(t, "/rejections?lease=lock-a")
		if len(rows) != 3 {
			t.Errorf("lease=lock-a: %d rows, want 3", len(rows))
		}
		rows = rowsOf(t, "/rejections?resource=res-2&lease=lock-a")
		if diff := cmp.Diff([]string{"res-2", "res-2"}, res(rows)); diff != "" {
			t.Errorf("resource=res-2&lease=lock-a (-want +got):\n%s", diff)
		}
	})
	t.Run("NoMatch", func(t *testing.T) {
		_, doc := s.page("/rejections?resource=nothing", http.StatusOK, nil)
		if got := dashText(dashOne(t, doc, "no-rejections")); !strings.Contains(got, "filter") {
			t.Errorf("no-rejections = %q, want it to mention the filter", got)
		}
		dashOne(t, doc, "clear-filter")
		form := dashOne(t, doc, "filter-form")
		in := dashFind(form, func(n *html.Node) bool { return dashAttr(n, "name") == "resource" })
		if len(in) != 1 || dashAttr(in[0], "value") != "nothing" {
			t.Errorf("the resource filter does not keep its value")
		}
		if got := dashAttr(dashOne(t, doc, "live"), "data-watch-events"); got != "rejected" {
			t.Errorf("data-watch-events = %q, want rejected", got)
		}
	})
}

func TestDashboardResources(t *testing.T) {
	s := newDashServer(t)
	_, doc := s.page("/resources", http.StatusOK, nil)
	dashOne(t, doc, "no-resources")

	l := s.acquire("lock-a", "worker-a@host", time.Minute, "")
	s.put("alpha", l.Token, "hello", map[string]string{"Lease-Name": "lock-a"})
	s.put("alpha", l.Token, "hello again", map[string]string{"Lease-Name": "lock-a"})
	s.put("beta", 7, strings.Repeat("x", 2048), nil)
	_, doc = s.page("/resources", http.StatusOK, nil)
	rows := dashByTestID(dashOne(t, doc, "resources-table"), "resource-row")
	if len(rows) != 2 {
		t.Fatalf("resource rows = %d, want 2", len(rows))
	}
	cells := dashTexts(dashFind(rows[0], func(n *html.Node) bool { return n.Data == "td" || n.Data == "th" }))
	want := []string{"alpha", strconv.FormatInt(l.Token, 10), "2", "lock-a · worker-a@host", "now 12:00:00 UTC", "11 B", "text/plain"}
	if diff := cmp.Diff(want, cells); diff != "" {
		t.Errorf("alpha row (-want +got):\n%s", diff)
	}
	if got := dashText(dashOne(t, rows[1], "fence")); got != "7" {
		t.Errorf("beta fence = %q, want 7", got)
	}
	if got := dashAttr(dashOne(t, doc, "live"), "data-poll-ms"); got == "" {
		t.Errorf("the resources page's live region does not poll")
	}
}

// TestDashboardEscaping puts hostile text in every field a client controls (names are
// restricted by a pattern; holders, metadata, user agents, query parameters and paths are
// not) and checks that every page shows it as text.
func TestDashboardEscaping(t *testing.T) {
	const (
		evilHolder = `<script>alert(1)</script>`
		evilMeta   = `{"note":"</code><img src=x onerror=alert(2)>"}`
		evilUA     = `<script>alert(3)</script>`
		evilQuery  = `"><script>alert(4)</script>`
	)
	s := newDashServer(t)
	l := s.acquire("evil", evilHolder, time.Minute, evilMeta)
	s.acquire("other", "x", time.Minute, "")
	s.put("r", l.Token+1, "new", nil)
	s.put("r", l.Token, "stale", map[string]string{"User-Agent": evilUA})
	s.put("r2", l.Token, "ok", map[string]string{"Lease-Name": "evil"})
	q := url.QueryEscape(evilQuery)
	paths := []string{"/", "/leases/evil", "/rejections", "/resources", "/?prefix=" + q, "/?cursor=" + q,
		"/rejections?resource=" + q + "&lease=" + q, "/leases/evil?cursor=" + q, "/" + url.PathEscape(evilQuery),
		"/leases/" + url.PathEscape(evilQuery)}
	for _, path := range paths {
		for _, frag := range []bool{false, true} {
			h := map[string]string{"Accept": "text/html"}
			if frag {
				h["LK-Fragment"] = "1"
			}
			resp, body := s.do(http.MethodGet, path, nil, h)
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				// Bad cursors may be refused, but always as a page.
				t.Errorf("GET %s (fragment %v) Content-Type = %q, want text/html", path, frag, ct)
			}
			for _, bad := range []string{"<script>alert", "<img src=x", `"><script>`} {
				if strings.Contains(body, bad) {
					t.Errorf("GET %s (fragment %v) holds %q unescaped", path, frag, bad)
				}
			}
			doc := dashParse(t, body)
			for _, n := range dashFind(doc, func(*html.Node) bool { return true }) {
				if n.Data == "script" && dashAttr(n, "src") == "" || n.Data == "img" {
					t.Errorf("GET %s (fragment %v) has an injected <%s>", path, frag, n.Data)
				}
				for _, a := range n.Attr {
					if strings.HasPrefix(a.Key, "on") {
						t.Errorf("GET %s (fragment %v) has an event handler attribute %s", path, frag, a.Key)
					}
				}
			}
		}
	}

	// And the hostile text is shown, as text.
	_, doc := s.page("/leases/evil", http.StatusOK, nil)
	if got := dashText(dashOne(t, dashOne(t, doc, "lease-state"), "holder")); got != evilHolder {
		t.Errorf("holder shown as %q, want %q", got, evilHolder)
	}
	if got := dashText(dashOne(t, dashOne(t, doc, "lease-state"), "metadata")); !strings.Contains(got, "img src=x onerror=alert(2)") {
		t.Errorf("metadata shown as %q, want the hostile text as text", got)
	}
	_, doc = s.page("/rejections", http.StatusOK, nil)
	if !strings.Contains(dashText(dashOne(t, doc, "rejections-table")), evilUA) {
		t.Errorf("the user agent is not shown as text")
	}
	_, doc = s.page("/?prefix="+q, http.StatusOK, nil)
	if got := dashText(dashOne(t, doc, "no-held")); !strings.Contains(got, evilQuery) {
		t.Errorf("no-held = %q, want the hostile prefix as text", got)
	}
}

// dashRevokeForm reads the revoke form of a lease page: where it posts and its fields.
func dashRevokeForm(t *testing.T, s *dashServer, name string) (action string, form url.Values) {
	t.Helper()
	_, doc := s.page("/leases/"+name, http.StatusOK, nil)
	f := dashOne(t, doc, "revoke-form")
	form = url.Values{}
	for _, in := range dashFind(f, func(n *html.Node) bool { return n.Data == "input" }) {
		form.Set(dashAttr(in, "name"), dashAttr(in, "value"))
	}
	if form.Get("csrf_token") == "" {
		t.Fatalf("revoke form = %s, want a csrf_token field", dashHTML(f))
	}
	return dashAttr(f, "action"), form
}

// dashWith is form with key set to value (deleted when value is empty).
func dashWith(form url.Values, key, value string) url.Values {
	out := url.Values{}
	for k, v := range form {
		out[k] = v
	}
	if value == "" {
		out.Del(key)
	} else {
		out.Set(key, value)
	}
	return out
}

func (s *dashServer) revoke(action string, form url.Values, header map[string]string) (*http.Response, string) {
	s.t.Helper()
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Accept": "text/html"}
	for k, v := range header {
		h[k] = v
	}
	return s.do(http.MethodPost, action, strings.NewReader(form.Encode()), h)
}

func TestDashboardRevoke(t *testing.T) {
	s := newDashServer(t)
	sameOrigin := map[string]string{"Sec-Fetch-Site": "same-origin"}

	t.Run("OK", func(t *testing.T) {
		l := s.acquire("ok-lease", "worker-1", time.Minute, "")
		action, form := dashRevokeForm(t, s, "ok-lease")
		h := map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": s.url}
		resp, body := s.revoke(action, form, h)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST %s = %d %s, want 303", action, resp.StatusCode, body)
		}
		loc := resp.Header.Get("Location")
		if loc != "/leases/ok-lease?notice=revoked" {
			t.Errorf("Location = %q, want /leases/ok-lease?notice=revoked", loc)
		}
		if st := s.state("ok-lease"); st.Held || st.Token != l.Token {
			t.Errorf("after revoke: held %v token %d, want free with token %d", st.Held, st.Token, l.Token)
		}
		if types := s.eventTypes("ok-lease"); types[len(types)-1] != "revoked" {
			t.Errorf("events = %q, want the last one revoked", types)
		}
		_, doc := s.page(loc, http.StatusOK, nil)
		if got := dashText(dashOne(t, doc, "notice")); got != "Lease revoked." {
			t.Errorf("notice = %q, want Lease revoked.", got)
		}
		if got := dashText(dashOne(t, doc, "end")); got != "revoked" {
			t.Errorf("end = %q, want revoked", got)
		}
	})

	t.Run("NonBrowserWithToken", func(t *testing.T) {
		// A client that sends neither Sec-Fetch-Site nor Origin is not a browser, so no
		// other site can have made it send the request: the form's token alone is enough.
		s.acquire("curl-lease", "worker-1", time.Minute, "")
		action, form := dashRevokeForm(t, s, "curl-lease")
		if resp, body := s.revoke(action, form, nil); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("POST %s without browser headers = %d %s, want 303", action, resp.StatusCode, body)
		}
	})

	victim := s.acquire("victim", "worker-1", time.Minute, "")
	s.acquire("neighbour", "worker-2", time.Minute, "")
	action, form := dashRevokeForm(t, s, "victim")
	_, other := dashRevokeForm(t, s, "neighbour")
	refused := []struct {
		name   string
		form   url.Values
		header map[string]string
		title  string
	}{
		{"ErrNoToken", dashWith(form, "csrf_token", ""), sameOrigin, "Form expired"},
		{"ErrWrongToken", dashWith(form, "csrf_token", "x"+form.Get("csrf_token")), sameOrigin, "Form expired"},
		{"ErrOtherLeasesToken", dashWith(form, "csrf_token", other.Get("csrf_token")), sameOrigin, "Form expired"},
		{"ErrOtherGrant", dashWith(form, "token", strconv.FormatInt(victim.Token+1, 10)), sameOrigin, "Form expired"},
		{"ErrCrossSite", form, map[string]string{"Sec-Fetch-Site": "cross-site"}, "Cross-site request refused"},
		{"ErrSameSite", form, map[string]string{"Sec-Fetch-Site": "same-site"}, "Cross-site request refused"},
		{"ErrEvilOrigin", form, map[string]string{"Origin": "https://evil.example"}, "Cross-site request refused"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := s.revoke(action, tc.form, tc.header)
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("POST %s = %d, want 403; body:\n%s", action, resp.StatusCode, body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Errorf("Content-Type = %q, want text/html", ct)
			}
			doc := dashParse(t, body)
			if got := dashText(dashFind(doc, func(n *html.Node) bool { return n.Data == "h1" })[0]); got != tc.title {
				t.Errorf("title = %q, want %q", got, tc.title)
			}
			if st := s.state("victim"); !st.Held {
				t.Errorf("victim is not held any more after a refused revoke")
			}
			if types := s.eventTypes("victim"); slices.Contains(types, "revoked") {
				t.Errorf("events = %q after a refused revoke", types)
			}
		})
	}

	t.Run("ErrAlreadyEnded", func(t *testing.T) {
		// Two tabs: the second submit finds the lease already ended; nothing changes.
		l := s.acquire("twice", "worker-1", time.Minute, "")
		action, form := dashRevokeForm(t, s, "twice")
		s.release("twice", l)
		resp, body := s.revoke(action, form, sameOrigin)
		if resp.StatusCode != http.StatusConflict {
			t.Errorf("revoking an ended lease = %d, want 409; body:\n%s", resp.StatusCode, body)
		}
		if types := s.eventTypes("twice"); slices.Contains(types, "revoked") {
			t.Errorf("events = %q, want no revoked event for a lease that was already released", types)
		}
	})

	t.Run("ErrStaleForm", func(t *testing.T) {
		// The form was loaded while worker-1 held the lease; since then worker-1 released it
		// and worker-2 took it. The operator confirmed revoking worker-1's lease, so
		// worker-2's must stay.
		l := s.acquire("handover", "worker-1", time.Minute, "")
		action, form := dashRevokeForm(t, s, "handover")
		s.release("handover", l)
		next := s.acquire("handover", "worker-2", time.Minute, "")
		resp, body := s.revoke(action, form, sameOrigin)
		if resp.StatusCode != http.StatusConflict {
			t.Errorf("POST a stale revoke form = %d, want 409; body:\n%s", resp.StatusCode, body)
		}
		if !strings.Contains(body, "worker-2") {
			t.Errorf("the refusal does not name the new holder:\n%s", body)
		}
		if st := s.state("handover"); !st.Held || st.Token != next.Token {
			t.Errorf("after a stale revoke form: held %v token %d, want worker-2's token %d still held", st.Held, st.Token, next.Token)
		}
	})
}

func TestDashboardResourcePage(t *testing.T) {
	s := newDashServer(t)
	l := s.acquire("lock-a", "worker-a@host", time.Minute, "")
	s.put("alpha", l.Token, "hello", map[string]string{"Lease-Name": "lock-a"})
	l2 := s.acquire("lock-b", "worker-b@host", time.Minute, "")
	s.put("alpha", l2.Token, "hello again", nil)
	s.put("alpha", l.Token-1, "stale", nil)
	_, doc := s.page("/resources/alpha", http.StatusOK, nil)
	state := dashOne(t, doc, "resource-state")
	if got := dashText(dashOne(t, state, "fence")); got != strconv.FormatInt(l2.Token, 10) {
		t.Errorf("fence = %q, want %d", got, l2.Token)
	}
	// The recent writers, newest first; the refused write is not one of them.
	var writers []string
	for _, row := range dashByTestID(dashOne(t, doc, "writers-table"), "writer-row") {
		writers = append(writers, dashText(dashOne(t, row, "writer-version"))+" "+dashText(dashOne(t, row, "writer-holder"))+
			" "+dashText(dashOne(t, row, "writer-token")))
	}
	want := []string{fmt.Sprintf("2 worker-b@host %d", l2.Token), fmt.Sprintf("1 worker-a@host %d", l.Token)}
	if diff := cmp.Diff(want, writers); diff != "" {
		t.Errorf("writers (-want +got):\n%s", diff)
	}
	link := dashOne(t, state, "resource-rejections")
	if got, want := dashAttr(link, "href"), "/rejections?resource=alpha"; got != want || dashText(link) != "1 rejection" {
		t.Errorf("rejections link = %q %q, want %q and 1 rejection", dashText(link), got, want)
	}
	if rows := dashByTestID(doc, "rejection-row"); len(rows) != 1 {
		t.Errorf("rejection rows = %d, want 1", len(rows))
	}
	_, doc = s.page("/resources", http.StatusOK, nil)
	if got := dashAttr(dashOne(t, doc, "resource-link"), "href"); got != "/resources/alpha" {
		t.Errorf("resource link = %q", got)
	}
	s.page("/resources/never-written", http.StatusNotFound, nil)
}

func TestDashboardOverviewSortAndFilter(t *testing.T) {
	s := newDashServer(t)
	s.acquire("b-job", "zed", 3*time.Minute, "")
	s.acquire("a-job", "amy", 2*time.Minute, "")
	s.acquire("c-task", "bob", time.Minute, "")
	names := func(path string) []string {
		t.Helper()
		_, doc := s.page(path, http.StatusOK, nil)
		return dashTexts(dashByTestID(dashOne(t, doc, "held-table"), "lease-link"))
	}
	for path, want := range map[string][]string{
		"/":                    {"a-job", "b-job", "c-task"},
		"/?sort=expiry":        {"c-task", "a-job", "b-job"},
		"/?sort=newest":        {"c-task", "a-job", "b-job"},
		"/?sort=late":          {"c-task", "a-job", "b-job"},
		"/?q=job":              {"a-job", "b-job"},
		"/?holder=b&sort=name": {"c-task"},
		"/?state=expiring":     {"c-task"},
		"/?sort=bogus":         {"a-job", "b-job", "c-task"},
	} {
		if diff := cmp.Diff(want, names(path)); diff != "" {
			t.Errorf("GET %s held leases (-want +got):\n%s", path, diff)
		}
	}
	for _, path := range []string{"/?holder=nobody", "/?state=late"} {
		_, doc := s.page(path, http.StatusOK, nil)
		if got := dashText(dashOne(t, doc, "no-held")); got != "No held lease matches this filter." {
			t.Errorf("GET %s: no-held = %q", path, got)
		}
	}
}

// TestDashboardOverviewOrdersAndFiltersAll: every order and filter answers over all the held
// leases, page by page through the pager's links (which keep the search), with exact counts;
// a semaphore is one row and counts once.
func TestDashboardOverviewOrdersAndFiltersAll(t *testing.T) {
	s := newDashServer(t)
	for i := range 205 {
		s.acquire(fmt.Sprintf("job-%03d", i), "w", time.Duration(300-i)*time.Second, "")
	}
	s.acquire("zz-needle", "needle-holder", time.Hour, "")
	s.acquireWith("pool", map[string]any{"holder": "p1", "ttl_ms": 60000, "limit": 3})
	s.acquireWith("pool", map[string]any{"holder": "p2", "ttl_ms": 60000, "limit": 3})
	walk := func(path string) (names []string, count, match string) {
		t.Helper()
		for range 10 {
			_, doc := s.page(path, http.StatusOK, nil)
			if table := dashByTestID(doc, "held-table"); len(table) == 1 {
				names = append(names, dashTexts(dashByTestID(table[0], "lease-link"))...)
			}
			count = dashText(dashOne(t, doc, "held-count"))
			if m := dashByTestID(doc, "match-count"); len(m) == 1 {
				match = dashText(m[0])
			}
			next := dashByTestID(doc, "next-page")
			if len(next) == 0 {
				return names, count, match
			}
			path = dashAttr(next[0], "href")
		}
		t.Fatalf("GET %s: more than 10 pages", path)
		return
	}
	names, count, _ := walk("/?sort=expiry")
	if len(names) != 207 || names[0] != "pool" || names[1] != "job-204" || names[205] != "job-000" || count != "207" {
		t.Errorf("sorted by expiry over every page: %d rows from %q, held count %s; want 207 from pool (60 s left, once), job-204 to job-000, count 207",
			len(names), names[:min(len(names), 2)], count)
	}
	for _, tc := range []struct{ path, first, match string }{
		{"/?q=needle", "zz-needle", "1 of 207 held leases match this filter."},
		{"/?holder=needle&sort=expiry", "zz-needle", "1 of 207 held leases match this filter."},
		{"/?holder=p2", "pool", "1 of 207 held leases match this filter."},
		{"/?q=job-2&sort=newest", "job-204", "5 of 207 held leases match this filter."},
	} {
		names, _, match := walk(tc.path)
		if len(names) == 0 || names[0] != tc.first || match != tc.match {
			t.Errorf("GET %s = %v, %q; want %s first, %q", tc.path, names, match, tc.first, tc.match)
		}
	}
	if names, _, _ := walk("/"); len(names) != 207 || names[206] != "zz-needle" {
		t.Errorf("by name over every page: %d rows ending %v, want 207 ending zz-needle", len(names), names[len(names)-1:])
	}
}
