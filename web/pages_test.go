package web

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"
)

var site = Site{AssetVersion: "v1", Version: "0.1.0"}

// page is one full page and its live region, rendered from the same props.
type page struct {
	name       string
	full, live templ.Component
}

func pages() []page {
	return []page{
		{"Overview", OverviewPage(site, overview()), OverviewLive(overview())},
		{"OverviewEmpty", OverviewPage(site, Overview{Now: now}), OverviewLive(Overview{Now: now})},
		{"Lease", LeasePage(site, leaseDetail()), LeaseLive(leaseDetail())},
		{"Rejections", RejectionsPage(site, RejectionList{Now: now, Rejections: rejections()}), RejectionsLive(RejectionList{Now: now, Rejections: rejections()})},
		{"Resources", ResourcesPage(site, resources()), ResourcesLive(resources())},
		{"Error", ErrorPage(site, ErrorInfo{Status: 500, Detail: "database is locked"}), nil},
	}
}

func TestOverviewPage(t *testing.T) {
	doc := parse(t, OverviewPage(site, overview()))

	if got := text(one(t, doc, "held-count")); got != "3" {
		t.Errorf("held-count = %q, want %q", got, "3")
	}
	links := byTestID(one(t, doc, "held-table"), "lease-link")
	var got []string
	for _, a := range links {
		got = append(got, text(a)+" → "+attr(a, "href"))
	}
	want := []string{"billing-nightly → /leases/billing-nightly", "reports:weekly → /leases/reports:weekly"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("held lease links (-want +got):\n%s", diff)
	}
	row := byTestID(doc, "lease-row")[0]
	cells := texts(findAll(row, func(n *html.Node) bool { return n.Data == "td" || n.Data == "th" }))
	// Expires comes right after the holder: it is what operators look for, and it stays in view
	// on a phone, where the table scrolls sideways.
	wantCells := []string{"billing-nightly", "worker-1@host-a", "in 30 s 12:00:30 UTC", strconv.FormatInt(tok4, 10), "40 s delay 15 s",
		"10 s ago 11:59:50 UTC", "2", `{"addr":"10.0.0.7:9000","pid":4242}`}
	if diff := cmp.Diff(wantCells, cells); diff != "" {
		t.Errorf("first held row (-want +got):\n%s", diff)
	}
	cd := byTestID(row, "countdown")[0]
	if got, want := attr(cd, "data-expires-at"), "2026-03-01T12:00:30.000Z"; got != want {
		t.Errorf("countdown data-expires-at = %q, want %q", got, want)
	}
	if got, want := attr(cd, "datetime"), "2026-03-01T12:00:30.000Z"; got != want {
		t.Errorf("countdown datetime = %q, want %q", got, want)
	}
	if got, want := attr(cd, "title"), "2026-03-01 12:00:30.000 UTC"; got != want {
		t.Errorf("countdown title = %q, want %q", got, want)
	}

	if got, want := attr(one(t, doc, "next-page"), "href"), "/?cursor=b%3Areports%2Fweekly%3D"; got != want {
		t.Errorf("next-page href = %q, want %q", got, want)
	}
	if n := len(byTestID(doc, "first-page")); n != 0 {
		t.Errorf("first-page links on the first page: %d, want 0", n)
	}
	if diff := cmp.Diff([]string{"expired", "released"}, texts(byTestID(one(t, doc, "freed-table"), "end"))); diff != "" {
		t.Errorf("freed end badges (-want +got):\n%s", diff)
	}
	if n := len(byTestID(doc, "rejection-row")); n != 2 {
		t.Errorf("rejection rows = %d, want 2", n)
	}
	if n := len(byTestID(doc, "empty-state")); n != 0 {
		t.Errorf("empty-state elements = %d, want 0", n)
	}

	form := one(t, doc, "search-form")
	if attr(form, "method") != "get" || attr(form, "action") != "/" {
		t.Errorf("search form method=%q action=%q, want get /", attr(form, "method"), attr(form, "action"))
	}
	input := byTag(form, "input")[0]
	if attr(input, "name") != "prefix" || attr(input, "id") != "prefix" {
		t.Errorf("search input name=%q id=%q, want prefix", attr(input, "name"), attr(input, "id"))
	}

	live := one(t, doc, "live")
	if attr(live, "id") != "live" || !hasAttr(live, "data-watch-prefix") || attr(live, "data-watch-prefix") != "" {
		t.Errorf("live region id=%q data-watch-prefix=%q, want live and empty", attr(live, "id"), attr(live, "data-watch-prefix"))
	}
	current := findAll(doc, func(n *html.Node) bool { return attr(n, "aria-current") == "page" })
	if got := texts(current); !cmp.Equal(got, []string{"Leases"}) {
		t.Errorf("aria-current links = %q, want [Leases]", got)
	}
	scripts := byTag(doc, "script")
	if len(scripts) != 1 || attr(scripts[0], "src") != "/static/app.js?v=v1" || !hasAttr(scripts[0], "defer") {
		t.Errorf("scripts = %v, want one deferred /static/app.js?v=v1", scripts)
	}
}

func TestOverviewPageSearch(t *testing.T) {
	o := overview()
	o.Prefix, o.Cursor = "bill ing", "c1"
	doc := parse(t, OverviewPage(site, o))
	for id, want := range map[string]string{
		"next-page":    "/?prefix=bill+ing&cursor=b%3Areports%2Fweekly%3D",
		"first-page":   "/?prefix=bill+ing",
		"clear-search": "/",
	} {
		if got := attr(one(t, doc, id), "href"); got != want {
			t.Errorf("%s href = %q, want %q", id, got, want)
		}
	}
	if got := attr(one(t, doc, "live"), "data-watch-prefix"); got != "bill ing" {
		t.Errorf("data-watch-prefix = %q, want %q", got, "bill ing")
	}
	if got := attr(byTag(one(t, doc, "search-form"), "input")[0], "value"); got != "bill ing" {
		t.Errorf("search input value = %q, want %q", got, "bill ing")
	}

	o.Held, o.HeldCount, o.NextCursor = nil, 0, ""
	doc = parse(t, OverviewLive(o))
	if got, want := text(one(t, doc, "no-held")), "No held lease has a name starting with “bill ing”."; got != want {
		t.Errorf("no-held = %q, want %q", got, want)
	}
	if n := len(byTestID(doc, "empty-state")); n != 0 {
		t.Errorf("a search without results shows the empty state")
	}
}

func TestOverviewEmpty(t *testing.T) {
	for _, tt := range []struct{ host, want string }{
		{"lk.example:9000", `curl -s -X POST lk.example:9000/v1/leases/demo/acquire -d '{"holder":"me","ttl_ms":30000}'`},
		{"", `curl -s -X POST localhost:8080/v1/leases/demo/acquire -d '{"holder":"me","ttl_ms":30000}'`},
	} {
		doc := parse(t, OverviewLive(Overview{Now: now, Host: tt.host}))
		empty := one(t, doc, "empty-state")
		if got := text(one(t, empty, "curl-example")); got != tt.want {
			t.Errorf("curl example for host %q = %q, want %q", tt.host, got, tt.want)
		}
		for _, id := range []string{"held-table", "held-count", "rejections-table"} {
			if n := len(byTestID(doc, id)); n != 0 {
				t.Errorf("empty overview has %d %s", n, id)
			}
		}
	}
}

func TestLeasePage(t *testing.T) {
	doc := parse(t, LeasePage(site, leaseDetail()))
	if got := text(one(t, doc, "lease-name")); got != "billing-nightly" {
		t.Errorf("lease-name = %q", got)
	}
	state := one(t, doc, "lease-state")
	for id, want := range map[string]string{
		"state":     "held",
		"holder":    "worker-1@host-a",
		"token":     strconv.FormatInt(tok4, 10),
		"waiters":   "2",
		"metadata":  `{"addr":"10.0.0.7:9000","pid":4242}`,
		"available": "when it ends",
	} {
		if got := text(one(t, state, id)); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}

	status := findAll(state, func(n *html.Node) bool { return attr(n, "class") == "status-line" })[0]
	if got, want := text(status), "held by worker-1@host-a · expires in 30 s 12:00:30 UTC"; got != want {
		t.Errorf("status line = %q, want %q", got, want)
	}

	revoke := one(t, doc, "revoke")
	if revoke.Data != "details" || hasAttr(revoke, "open") {
		t.Errorf("revoke is <%s open=%v>, want a closed <details>", revoke.Data, hasAttr(revoke, "open"))
	}
	form := one(t, revoke, "revoke-form")
	if attr(form, "method") != "post" || attr(form, "action") != "/leases/billing-nightly/revoke" {
		t.Errorf("revoke form method=%q action=%q", attr(form, "method"), attr(form, "action"))
	}
	csrf := one(t, form, "csrf")
	if attr(csrf, "type") != "hidden" || attr(csrf, "name") != CSRFField || attr(csrf, "value") != "csrf-secret-123" {
		t.Errorf("csrf input type=%q name=%q value=%q", attr(csrf, "type"), attr(csrf, "name"), attr(csrf, "value"))
	}
	if got, want := attr(form, "data-confirm"), "Revoke the lease on billing-nightly held by worker-1@host-a?"; got != want {
		t.Errorf("data-confirm = %q, want %q", got, want)
	}

	live := one(t, doc, "live")
	if got := attr(live, "data-watch-prefix"); got != "billing-nightly" {
		t.Errorf("data-watch-prefix = %q", got)
	}
	if n := len(byTestID(live, "timeline")); n != 1 {
		t.Errorf("timelines in the live region = %d, want 1", n)
	}
	one(t, live, "timeline-legend")
	rows := byTestID(one(t, doc, "event-table"), "event-row")
	if len(rows) != len(history()) {
		t.Fatalf("event rows = %d, want %d", len(rows), len(history()))
	}
	cells := texts(findAll(rows[6], func(n *html.Node) bool { return n.Data == "td" || n.Data == "th" }))
	want := []string{"7", "rejected", "worker-2@host-b", strconv.FormatInt(tok2, 10), "orders-db", "2 min ago 11:57:55 UTC"}
	if diff := cmp.Diff(want, cells); diff != "" {
		t.Errorf("event row 7 (-want +got):\n%s", diff)
	}
	if got, want := attr(one(t, doc, "next-page"), "href"), "/leases/billing-nightly?cursor=seq%3A11"; got != want {
		t.Errorf("next-page href = %q, want %q", got, want)
	}
	one(t, doc, "no-lease-resources")
}

func TestLeasePageResources(t *testing.T) {
	d := leaseDetail()
	d.Resources = resources().Resources[:1]
	doc := parse(t, LeasePage(site, d))
	rows := byTestID(one(t, doc, "lease-resources"), "lease-resource-row")
	if len(rows) != 1 {
		t.Fatalf("lease resource rows = %d, want 1", len(rows))
	}
	cells := texts(findAll(rows[0], func(n *html.Node) bool { return n.Data == "td" || n.Data == "th" }))
	want := []string{"orders-db", strconv.FormatInt(tok4, 10), "worker-1@host-a", "5 s ago 11:59:55 UTC", "17"}
	if diff := cmp.Diff(want, cells); diff != "" {
		t.Errorf("lease resource row (-want +got):\n%s", diff)
	}
	if got := attr(one(t, rows[0], "resource-link"), "href"); got != "/resources/orders-db" {
		t.Errorf("resource link = %q, want /resources/orders-db", got)
	}
	if n := len(byTestID(doc, "no-lease-resources")); n != 0 {
		t.Errorf("the empty note shows beside %d resources", len(rows))
	}
}

func TestKeysPageLastUsed(t *testing.T) {
	l := KeyList{Now: now, Keys: []KeyInfo{
		{ID: "key_a", Label: "ops", Role: "admin", CreatedAt: at("-1h"), LastUsed: at("-90s")},
		{ID: "key_b", Label: "idle", Role: "reader", CreatedAt: at("-1h")},
	}}
	doc := parse(t, KeysPage(site, l))
	heads := texts(byTag(byTag(one(t, doc, "keys-table"), "thead")[0], "th"))
	if diff := cmp.Diff([]string{"Label", "Role", "Prefixes", "Created", "Last used", "State"}, heads); diff != "" {
		t.Errorf("key columns (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"1 min ago 11:58:30 UTC", "never"}, texts(byTestID(doc, "key-last-used"))); diff != "" {
		t.Errorf("last used (-want +got):\n%s", diff)
	}
}

func TestLeasePageFree(t *testing.T) {
	d := leaseDetail()
	d.Lease = Lease{Name: "import", Holder: "worker-9", Token: tok2, AcquiredAt: at("-4m"), ExpiresAt: at("-2m30s"),
		EndedAt: at("-2m30s"), Ended: "expired", LockDelay: 3 * time.Minute, AvailableAt: at("30s")}
	d.Notice = "Lease revoked."
	doc := parse(t, LeaseLive(d))
	if n := len(byTestID(doc, "revoke")); n != 0 {
		t.Errorf("revoke forms on a free lease = %d, want 0", n)
	}
	status := findAll(doc, func(n *html.Node) bool { return attr(n, "class") == "status-line" })[0]
	if got, want := text(status), "free last held by worker-9 expired 2 min ago 11:57:30 UTC"; got != want {
		t.Errorf("status line = %q, want %q", got, want)
	}
	for id, want := range map[string]string{
		"state":     "free",
		"end":       "expired",
		"holder":    "worker-9",
		"available": "in 30 s 12:00:30 UTC",
		"notice":    "Lease revoked.",
	} {
		if got := text(one(t, doc, id)); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
}

func TestRejectionsPage(t *testing.T) {
	l := RejectionList{Now: now, Rejections: rejections(), Resource: "orders-db", NextCursor: "n2"}
	doc := parse(t, RejectionsPage(site, l))
	form := one(t, doc, "filter-form")
	var names []string
	for _, in := range byTag(form, "input") {
		names = append(names, attr(in, "name")+"="+attr(in, "value"))
	}
	if diff := cmp.Diff([]string{"resource=orders-db", "lease=", "holder="}, names); diff != "" {
		t.Errorf("filter inputs (-want +got):\n%s", diff)
	}
	heads := texts(byTag(byTag(one(t, doc, "rejections-table"), "thead")[0], "th"))
	wantHeads := []string{"Resource", "Lease", "Holder", "Stale token, fence", "Key", "Client", "Time"}
	if diff := cmp.Diff(wantHeads, heads); diff != "" {
		t.Errorf("rejection columns (-want +got):\n%s", diff)
	}
	rows := byTestID(doc, "rejection-row")
	if len(rows) != 2 {
		t.Fatalf("rejection rows = %d, want 2", len(rows))
	}
	cells := texts(findAll(rows[0], func(n *html.Node) bool { return n.Data == "td" || n.Data == "th" }))
	want := []string{"orders-db", "billing-nightly", "worker-3@host-c", "1 grant behind 8.3 s late fence " + strconv.FormatInt(tok4, 10),
		"billing-workers key_7f3a9c", "10.0.0.9:51234 leasekeeper-go/0.1 (linux; worker-3)", "50 s ago 11:59:10 UTC"}
	if diff := cmp.Diff(want, cells); diff != "" {
		t.Errorf("first rejection row (-want +got):\n%s", diff)
	}
	cells = texts(findAll(rows[1], func(n *html.Node) bool { return n.Data == "td" || n.Data == "th" }))
	want = []string{"ledger external fence check in UPDATE", "—", "—", strconv.FormatInt(tok2, 10) + " fence " + strconv.FormatInt(tok3, 10),
		"—", "—", "2 min ago 11:57:55 UTC"}
	if diff := cmp.Diff(want, cells); diff != "" {
		t.Errorf("second rejection row (-want +got):\n%s", diff)
	}
	// The stale token in full is on hover (title) and copied by its button, whatever the cell says.
	for i, tok := range []int64{tok3, tok2} {
		shown := one(t, rows[i], "presented-token")
		full := strconv.FormatInt(tok, 10)
		if attr(shown, "title") != "Presented token "+full || attr(shown, "data-token") != full || attr(one(t, rows[i], "copy"), "data-copy") != full {
			t.Errorf("row %d: presented token title %q, data-token %q, copy %q; want the full token %s in each", i,
				attr(shown, "title"), attr(shown, "data-token"), attr(one(t, rows[i], "copy"), "data-copy"), full)
		}
	}
	if got, want := attr(one(t, doc, "next-page"), "href"), "/rejections?resource=orders-db&cursor=n2"; got != want {
		t.Errorf("next-page href = %q, want %q", got, want)
	}
	live := one(t, doc, "live")
	if attr(live, "data-watch-events") != "rejected" || !hasAttr(live, "data-watch-prefix") {
		t.Errorf("live region watches %q events with prefix %v", attr(live, "data-watch-events"), hasAttr(live, "data-watch-prefix"))
	}

	doc = parse(t, RejectionsLive(RejectionList{Now: now, Lease: "x"}))
	if got := text(one(t, doc, "no-rejections")); got != "No rejected write matches this filter." {
		t.Errorf("no-rejections = %q", got)
	}
}

func TestResourcesPage(t *testing.T) {
	doc := parse(t, ResourcesPage(site, resources()))
	rows := byTestID(doc, "resource-row")
	if len(rows) != 2 {
		t.Fatalf("resource rows = %d, want 2", len(rows))
	}
	var got [][]string
	for _, r := range rows {
		got = append(got, texts(findAll(r, func(n *html.Node) bool { return n.Data == "td" || n.Data == "th" })))
	}
	want := [][]string{
		{"orders-db", strconv.FormatInt(tok4, 10), "17", "billing-nightly · worker-1@host-a", "5 s ago 11:59:55 UTC", "1.5 KiB", "application/json"},
		{"ledger", strconv.FormatInt(tok3, 10), "3", "—", "3 h ago 09:00:00 UTC", "12 B", "text/plain"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resource rows (-want +got):\n%s", diff)
	}
	if got := attr(one(t, rows[0], "lease-link"), "href"); got != "/leases/billing-nightly" {
		t.Errorf("last writer link = %q", got)
	}
	if got := attr(one(t, doc, "live"), "data-poll-ms"); got != "5000" {
		t.Errorf("data-poll-ms = %q, want 5000", got)
	}
	if got, want := attr(one(t, doc, "next-page"), "href"), "/resources?cursor=r%3Aledger"; got != want {
		t.Errorf("next-page href = %q, want %q", got, want)
	}
	doc = parse(t, ResourcesLive(ResourceList{Now: now}))
	one(t, doc, "no-resources")
}

func TestErrorPage(t *testing.T) {
	doc := parse(t, ErrorPage(site, ErrorInfo{Status: 404, Detail: "No lease named x was ever taken.", RequestID: "req-7"}))
	for id, want := range map[string]string{
		"status":     "404",
		"detail":     "No lease named x was ever taken.",
		"request-id": "req-7",
	} {
		if got := text(one(t, doc, id)); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
	if got := text(byTag(one(t, doc, "error"), "h1")[0]); got != "Not Found" {
		t.Errorf("h1 = %q, want %q", got, "Not Found")
	}
	if got := text(byTag(doc, "title")[0]); got != "Not Found · leasekeeper" {
		t.Errorf("title = %q", got)
	}
	doc = parse(t, ErrorPage(site, ErrorInfo{Status: 500, Title: "Database unavailable"}))
	if got := text(byTag(one(t, doc, "error"), "h1")[0]); got != "Database unavailable" {
		t.Errorf("h1 = %q", got)
	}
}

// TestLiveRegions checks the fragment contract: each page's live region holds exactly what
// its Live component renders, rooted in an element with the render time in data-now.
func TestLiveRegions(t *testing.T) {
	for _, p := range pages() {
		if p.live == nil {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			full, live := render(t, p.full), render(t, p.live)
			if !strings.Contains(full, `<div id="live"`) || !strings.Contains(full, live+"</div>") {
				t.Errorf("the page does not contain its live region's fragment")
			}
			doc, err := html.Parse(strings.NewReader(full))
			if err != nil {
				t.Fatal(err)
			}
			regions := findAll(doc, func(n *html.Node) bool { return attr(n, "id") == "live" })
			if len(regions) != 1 {
				t.Fatalf("elements with id=live: %d, want 1", len(regions))
			}
			root := regions[0].FirstChild
			if root == nil || root.Type != html.ElementNode || attr(root, "data-now") != "2026-03-01T12:00:00.000Z" || root.NextSibling != nil {
				t.Errorf("the live region must hold one element with data-now, got %v", root)
			}
		})
	}
}

// TestAccessibility checks the structure that assistive technology relies on.
func TestAccessibility(t *testing.T) {
	for _, p := range pages() {
		t.Run(p.name, func(t *testing.T) {
			doc := parse(t, p.full)
			for _, th := range byTag(doc, "th") {
				if s := attr(th, "scope"); s != "col" && s != "row" {
					t.Errorf("<th> %q has scope %q, want col or row", text(th), s)
				}
			}
			for _, in := range byTag(doc, "input") {
				if attr(in, "type") == "hidden" {
					continue
				}
				id := attr(in, "id")
				labels := findAll(doc, func(n *html.Node) bool { return n.Data == "label" && attr(n, "for") == id })
				if id == "" || len(labels) != 1 {
					t.Errorf("input %q has %d labels", attr(in, "name"), len(labels))
				}
			}
			if n := len(byTag(doc, "h1")); n != 1 {
				t.Errorf("h1 elements = %d, want 1", n)
			}
			if n := len(byTag(doc, "main")); n != 1 {
				t.Errorf("main elements = %d, want 1", n)
			}
			ids := map[string]bool{}
			for _, e := range findAll(doc, func(n *html.Node) bool { return attr(n, "id") != "" }) {
				if ids[attr(e, "id")] {
					t.Errorf("id %q is used twice", attr(e, "id"))
				}
				ids[attr(e, "id")] = true
			}
			html := findAll(doc, func(n *html.Node) bool { return n.Data == "html" })[0]
			if attr(html, "lang") != "en" {
				t.Errorf("<html lang=%q>, want en", attr(html, "lang"))
			}
		})
	}
}

func TestLeasePageTimelineNotes(t *testing.T) {
	d := leaseDetail()
	doc := parse(t, LeasePage(site, d))
	if n := len(byTestID(doc, "timeline-zoom-note")); n != 0 {
		t.Errorf("zoom notes with nothing hidden = %d, want 0", n)
	}
	one(t, doc, "timeline-scroll-hint")
	d.Timeline.Zoomed, d.Timeline.Hidden = true, 2
	doc = parse(t, LeasePage(site, d))
	if got := text(one(t, doc, "timeline-zoom-note")); !strings.Contains(got, "(2 earlier grants out of view)") {
		t.Errorf("zoom note = %q, want it to count 2 earlier grants", got)
	}
}
