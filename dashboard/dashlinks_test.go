package dashboard_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
)

// keyID is the id of the key whose secret is given.
func keyID(t *testing.T, s *dashServer, secret string) string {
	t.Helper()
	k, err := s.store.KeyByHash(context.Background(), auth.Hash(secret))
	if err != nil {
		t.Fatalf("KeyByHash() = %v", err)
	}
	return k.ID
}

// TestDashboardRejectionKey: a refused write shows the key that sent it, by label and id, and
// its stale token as how many grants behind it was, the token itself in the title and the
// copy button.
func TestDashboardRejectionKey(t *testing.T) {
	s := newDashServer(t)
	a := s.acquire("billing-nightly", "cron@host-a", time.Hour, "")
	s.release("billing-nightly", a)
	b := s.acquire("billing-nightly", "cron@host-b", time.Hour, "")
	if got := s.put("orders-db", b.Token, "new", nil); got != http.StatusCreated {
		t.Fatalf("PUT with b's token = %d, want 201", got)
	}
	writer := servicetest.Key(t, s.store, auth.Writer)
	if got := s.put("orders-db", a.Token, "stale", dashBearer(writer)); got != http.StatusConflict {
		t.Fatalf("PUT with a's token = %d, want 409", got)
	}
	for _, path := range []string{"/rejections", "/", "/resources/orders-db"} {
		_, doc := s.page(path, http.StatusOK, nil)
		rows := dashByTestID(dashOne(t, doc, "rejections-table"), "rejection-row")
		if len(rows) != 1 {
			t.Fatalf("%s: rejection rows = %d, want 1", path, len(rows))
		}
		if got, want := dashText(dashOne(t, rows[0], "rejection-key")), "test writer "+keyID(t, s, writer); got != want {
			t.Errorf("%s: the rejection's key = %q, want %q", path, got, want)
		}
		tok := dashOne(t, rows[0], "presented-token")
		full := strconv.FormatInt(a.Token, 10)
		if got := dashText(tok); got != "1 grant behind" {
			t.Errorf("%s: the stale token reads %q, want 1 grant behind", path, got)
		}
		if dashAttr(tok, "title") != "Presented token "+full || dashAttr(dashOne(t, rows[0], "copy"), "data-copy") != full {
			t.Errorf("%s: the stale token's title %q and copy %q, want the token %s", path, dashAttr(tok, "title"),
				dashAttr(dashOne(t, rows[0], "copy"), "data-copy"), full)
		}
	}

	// A rejection reported by a resource outside leasekeeper names the key that reported it.
	reporter := servicetest.Key(t, s.store, auth.Writer)
	body := `{"resource":"ledger","presented_token":` + strconv.FormatInt(a.Token, 10) + `,"current_fence":` + strconv.FormatInt(b.Token, 10) + `}`
	if resp, out := s.do(http.MethodPost, "/v1/rejections", strings.NewReader(body), map[string]string{"Content-Type": "application/json",
		"Authorization": "Bearer " + reporter}); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/rejections = %d %s", resp.StatusCode, out)
	}
	_, doc := s.page("/rejections?resource=ledger", http.StatusOK, nil)
	if got, want := dashText(dashOne(t, doc, "rejection-key")), "test writer "+keyID(t, s, reporter); got != want {
		t.Errorf("the reported rejection's key = %q, want %q", got, want)
	}
}

// TestDashboardLeaseResources: a lease's page lists the resources last written under its
// tokens (with Lease-Name or without, by any writer) that the viewer may read; a resource's writers link the lease of their token even
// without Lease-Name, unless the viewer's scope does not reach it.
func TestDashboardLeaseResources(t *testing.T) {
	s := newDashServer(t)
	l := s.acquire("job", "cron@host-a", time.Hour, "")
	if got := s.put("res-named", l.Token, "v", map[string]string{"Lease-Name": "job"}); got != http.StatusCreated {
		t.Fatalf("PUT res-named = %d", got)
	}
	// A writer whose scope does not reach the lease: the write is put down to no lease.
	if got := s.put("res-plain", l.Token, "v", dashBearer(servicetest.Key(t, s.store, auth.Writer, "res-"))); got != http.StatusCreated {
		t.Fatalf("PUT res-plain = %d", got)
	}

	listed := func(header map[string]string) []string {
		t.Helper()
		_, doc := s.page("/leases/job", http.StatusOK, header)
		var out []string
		for _, row := range dashByTestID(doc, "lease-resource-row") {
			out = append(out, dashText(dashOne(t, row, "resource-link")))
		}
		return out
	}
	// Both were written with job's token, with Lease-Name or without.
	if diff := cmp.Diff([]string{"res-named", "res-plain"}, listed(nil)); diff != "" {
		t.Errorf("resources on the lease page (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"res-plain"}, listed(dashBearer(servicetest.Key(t, s.store, auth.Reader, "job", "res-p")))); diff != "" {
		t.Errorf("resources on the lease page for a reader of job and res-p (-want +got):\n%s", diff)
	}
	// A reader of the lease alone does not learn the names of resources outside its scope.
	_, doc := s.page("/leases/job", http.StatusOK, dashBearer(servicetest.Key(t, s.store, auth.Reader, "job")))
	dashOne(t, doc, "no-lease-resources")
	if strings.Contains(dashHTML(doc), "res-named") {
		t.Errorf("a reader scoped to job sees the resource res-named")
	}

	writerLease := func(header map[string]string) string {
		t.Helper()
		_, doc := s.page("/resources/res-plain", http.StatusOK, header)
		rows := dashByTestID(dashOne(t, doc, "writers-table"), "writer-row")
		if len(rows) != 1 {
			t.Fatalf("writer rows = %d, want 1", len(rows))
		}
		if links := dashByTestID(rows[0], "lease-link"); len(links) == 1 {
			return dashText(links[0]) + " " + dashAttr(links[0], "href")
		}
		return ""
	}
	if got := writerLease(nil); got != "job /leases/job" {
		t.Errorf("the admin's writer row links %q, want the token's lease job", got)
	}
	reader := dashBearer(servicetest.Key(t, s.store, auth.Reader, "res-"))
	if got := writerLease(reader); got != "" {
		t.Errorf("a reader scoped to res- sees the writer's lease %q, want none", got)
	}
	if _, doc := s.page("/resources/res-plain", http.StatusOK, reader); strings.Contains(dashHTML(doc), "cron@host-a") || strings.Contains(dashHTML(doc), "/leases/job") {
		t.Errorf("a reader scoped to res- learns the out-of-scope lease or its holder")
	}
}

// TestDashboardKeysLastUsed: the keys page says when each key was last used, from this
// server's memory, while the store is written at most once a minute per key.
func TestDashboardKeysLastUsed(t *testing.T) {
	s := newDashServer(t)
	reader := servicetest.Key(t, s.store, auth.Reader)
	id := keyID(t, s, reader)
	lastUsed := func() string {
		t.Helper()
		_, doc := s.page("/keys", http.StatusOK, nil)
		for _, row := range dashByTestID(doc, "key-row") {
			if dashAttr(row, "data-key-id") == id {
				return dashText(dashOne(t, row, "key-last-used"))
			}
		}
		t.Fatalf("no row for key %s", id)
		return ""
	}
	stored := func() time.Time {
		t.Helper()
		keys, err := s.store.Keys(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k.ID == id {
				return k.LastUsed
			}
		}
		t.Fatalf("no key %s", id)
		return time.Time{}
	}
	if got := lastUsed(); got != "never" {
		t.Errorf("last used of a new key = %q, want never", got)
	}
	use := func() {
		t.Helper()
		if resp, body := s.do(http.MethodGet, "/v1/leases", nil, dashBearer(reader)); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/leases = %d %s", resp.StatusCode, body)
		}
	}
	use()
	s.clock.Advance(40 * time.Second)
	use()
	if got := stored(); !got.Equal(dashT0) {
		t.Errorf("stored last use after two uses 40 s apart = %v, want the first, %v", got, dashT0)
	}
	s.clock.Advance(20 * time.Second)
	if got, want := lastUsed(), "20 s ago 12:00:40 UTC"; got != want {
		t.Errorf("keys page last used = %q, want %q (the second use, from memory)", got, want)
	}
	use()
	if got, want := stored(), dashT0.Add(time.Minute); !got.Equal(want) {
		t.Errorf("stored last use a minute after the first = %v, want %v", got, want)
	}
}

// TestDashboardTimelineZoom: by default a lease's timeline zooms to its recent activity, so
// seconds-long grants after an hour-long one are drawn wide enough to see, and it says what
// is out of view; an explicit range shows everything at its own scale.
func TestDashboardTimelineZoom(t *testing.T) {
	s := newDashServer(t)
	long := s.acquire("mix", "slow@host-a", time.Hour, "")
	s.clock.Advance(59 * time.Minute)
	s.release("mix", long)
	for range 4 {
		l := s.acquire("mix", "quick@host-b", 5*time.Second, "")
		s.clock.Advance(3 * time.Second)
		s.release("mix", l)
		s.clock.Advance(7 * time.Second)
	}
	bars := func(path string) (widths []float64, zoomed bool) {
		t.Helper()
		_, doc := s.page(path, http.StatusOK, nil)
		for _, g := range dashFind(dashOne(t, doc, "timeline"), func(n *html.Node) bool { return strings.HasPrefix(dashAttr(n, "class"), "tl-grant ") }) {
			bar := dashFind(g, func(n *html.Node) bool { return dashAttr(n, "class") == "tl-bar" })[0]
			w, _ := strconv.ParseFloat(dashAttr(bar, "width"), 64)
			widths = append(widths, w)
		}
		return widths, len(dashByTestID(doc, "timeline-zoom-note")) == 1
	}
	ws, zoomed := bars("/leases/mix")
	// The long grant's last seconds may show at the left edge.
	if !zoomed || len(ws) < 4 {
		t.Fatalf("default timeline: %d grants drawn, zoom note %v; want the 4 short ones and the note", len(ws), zoomed)
	}
	for i, w := range ws[len(ws)-4:] {
		if w < 8 {
			t.Errorf("short grant %d is %.1f units wide, want at least 8", i, w)
		}
	}
	if ws, zoomed := bars("/leases/mix?range=6h"); zoomed || len(ws) != 5 {
		t.Errorf("6 h timeline: %d grants drawn, zoom note %v; want all 5 and no note", len(ws), zoomed)
	}
}
