package web

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"
	"golang.org/x/net/html"
)

// now is the render time of every fixture.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// at is now plus a clock offset such as "-4m30s".
func at(offset string) time.Time {
	d, err := time.ParseDuration(offset)
	if err != nil {
		panic(err)
	}
	return now.Add(d)
}

// Tokens in the form the server issues them: unix microseconds of the grant.
const (
	tok1 int64 = 1772366040000000
	tok2 int64 = 1772366160000000
	tok3 int64 = 1772366270000000
	tok4 int64 = 1772366340000000
)

func heldLease() Lease {
	return Lease{
		Name: "billing-nightly", Held: true, Holder: "worker-1@host-a", Token: tok4,
		AcquiredAt: at("-1m"), RenewedAt: at("-10s"), ExpiresAt: at("30s"),
		TTL: 40 * time.Second, LockDelay: 15 * time.Second, Waiters: 2,
		Metadata: json.RawMessage(`{ "addr": "10.0.0.7:9000",  "pid": 4242 }`),
	}
}

// history is the events of billing-nightly: a release, an expiry with a lock delay, a revoke,
// and the current grant, with two stale writes refused on the way.
func history() []Event {
	return []Event{
		{Seq: 1, Kind: "acquired", Token: tok1, Holder: "worker-1@host-a", At: at("-6m")},
		{Seq: 2, Kind: "released", Token: tok1, Holder: "worker-1@host-a", At: at("-4m20s")},
		{Seq: 3, Kind: "acquired", Token: tok2, Holder: "worker-2@host-b", At: at("-4m"), LockDelay: 15 * time.Second},
		{Seq: 4, Kind: "renewed", Token: tok2, Holder: "worker-2@host-b", At: at("-3m20s")},
		{Seq: 5, Kind: "expired", Token: tok2, Holder: "worker-2@host-b", At: at("-2m30s")},
		{Seq: 6, Kind: "acquired", Token: tok3, Holder: "worker-3@host-c", At: at("-2m10s")},
		{Seq: 7, Kind: "rejected", Token: tok2, Holder: "worker-2@host-b", At: at("-2m5s"), Resource: "orders-db"},
		{Seq: 8, Kind: "revoked", Token: tok3, Holder: "worker-3@host-c", At: at("-1m20s")},
		{Seq: 9, Kind: "acquired", Token: tok4, Holder: "worker-1@host-a", At: at("-1m")},
		{Seq: 10, Kind: "rejected", Token: tok3, Holder: "worker-3@host-c", At: at("-50s"), Resource: "orders-db"},
		{Seq: 11, Kind: "renewed", Token: tok4, Holder: "worker-1@host-a", At: at("-10s")},
	}
}

// timeline is the fixture of the golden picture: the grants of history() in a window from 5
// minutes ago to a minute ahead, so the first grant starts before it.
func timeline() Timeline {
	return Timeline{Name: "billing-nightly", Start: at("-5m"), End: at("1m"), Now: now,
		Grants: []Grant{
			{Token: tok1, Holder: "worker-1@host-a", AcquiredAt: at("-6m"), ExpiresAt: at("-5m20s"), EndedAt: at("-4m20s"), End: "released"},
			{Token: tok2, Holder: "worker-2@host-b", AcquiredAt: at("-4m"), ExpiresAt: at("-2m30s"), EndedAt: at("-2m30s"), End: "expired",
				LockDelay: 15 * time.Second},
			{Token: tok3, Holder: "worker-3@host-c", AcquiredAt: at("-2m10s"), ExpiresAt: at("-1m30s"), EndedAt: at("-1m20s"), End: "revoked"},
			{Token: tok4, Holder: "worker-1@host-a", AcquiredAt: at("-1m"), ExpiresAt: at("30s"), LockDelay: 15 * time.Second},
		},
		Rejections: []Rejection{
			{ID: 7, Resource: "orders-db", Lease: "billing-nightly", PresentedToken: tok2, CurrentFence: tok3, Holder: "worker-2@host-b", At: at("-2m5s")},
			{ID: 10, Resource: "orders-db", Lease: "billing-nightly", PresentedToken: tok3, Holder: "worker-3@host-c", At: at("-50s")},
		},
	}
}

func rejections() []Rejection {
	return []Rejection{
		{ID: 2, Resource: "orders-db", Lease: "billing-nightly", PresentedToken: tok3, CurrentFence: tok4,
			Holder: "worker-3@host-c", ClientAddr: "10.0.0.9:51234", UserAgent: "leasekeeper-go/0.1 (linux; worker-3)",
			At: at("-50s"), GrantsBehind: 1, Late: 8300 * time.Millisecond, KeyID: "key_7f3a9c", KeyLabel: "billing-workers"},
		{ID: 1, Resource: "ledger", PresentedToken: tok2, CurrentFence: tok3, Reason: "fence check in UPDATE",
			External: true, At: at("-2m5s"), GrantsBehind: -1},
	}
}

func overview() Overview {
	other := heldLease()
	other.Name, other.Holder, other.Token, other.Metadata, other.Waiters = "reports:weekly", "cron@host-d", tok3, nil, 0
	return Overview{
		Now: now, Host: "localhost:8080", HeldCount: 3, Held: []Lease{heldLease(), other}, NextCursor: "b:reports/weekly=",
		Freed: []Lease{
			{Name: "import", Holder: "worker-9", Token: tok2, EndedAt: at("-2m30s"), Ended: "expired"},
			{Name: "compact", Holder: "worker-8", Token: tok1, EndedAt: at("-4m20s"), Ended: "released"},
		},
		Rejections: rejections(),
	}
}

func leaseDetail() LeaseDetail {
	return LeaseDetail{Now: now, Lease: heldLease(), Timeline: timeline(), Events: history(),
		NextCursor: "seq:11", CSRFToken: "csrf-secret-123", CanRevoke: true}
}

func resources() ResourceList {
	return ResourceList{Now: now, Resources: []Resource{
		{Name: "orders-db", Fence: tok4, Version: 17, Size: 1536, ContentType: "application/json",
			Lease: "billing-nightly", Holder: "worker-1@host-a", UpdatedAt: at("-5s")},
		{Name: "ledger", Fence: tok3, Version: 3, Size: 12, ContentType: "text/plain", UpdatedAt: at("-3h")},
	}, NextCursor: "r:ledger"}
}

// render renders c to a string.
func render(t *testing.T, c templ.Component) string {
	t.Helper()
	var b strings.Builder
	if err := c.Render(context.Background(), &b); err != nil {
		t.Fatalf("Render() = %v", err)
	}
	return b.String()
}

// parse renders c and parses the result as an HTML document.
func parse(t *testing.T, c templ.Component) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(render(t, c)))
	if err != nil {
		t.Fatalf("html.Parse() = %v", err)
	}
	return doc
}

// findAll returns the elements under n, n included, for which match is true, in document order.
func findAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && match(d) {
			out = append(out, d)
		}
	}
	if n.Type == html.ElementNode && match(n) {
		out = append([]*html.Node{n}, out...)
	}
	return out
}

// byTestID returns the elements with data-testid id.
func byTestID(n *html.Node, id string) []*html.Node {
	return findAll(n, func(e *html.Node) bool { return attr(e, "data-testid") == id })
}

// one returns the only element with data-testid id, failing the test otherwise.
func one(t *testing.T, n *html.Node, id string) *html.Node {
	t.Helper()
	els := byTestID(n, id)
	if len(els) != 1 {
		t.Fatalf("elements with data-testid=%q: got %d, want 1", id, len(els))
	}
	return els[0]
}

// byTag returns the elements named tag.
func byTag(n *html.Node, tag string) []*html.Node {
	return findAll(n, func(e *html.Node) bool { return e.Data == tag })
}

// attr is the value of n's attribute key, or "".
func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// hasAttr reports whether n has the attribute key.
func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// text is the text under n with runs of white space collapsed.
func text(n *html.Node) string {
	var b strings.Builder
	if n.Type == html.TextNode {
		b.WriteString(n.Data)
	}
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// texts is the text of each element.
func texts(els []*html.Node) []string {
	out := make([]string, len(els))
	for i, e := range els {
		out[i] = text(e)
	}
	return out
}
