package web

import (
	"strings"
	"testing"

	"github.com/a-h/templ"
	"golang.org/x/net/html"
)

// Hostile text in every field a client controls: lease names and holders come from requests.
const (
	evilName   = `<script>alert(1)</script>`
	evilHolder = `"><img src=x onerror=alert(1)> 'it''s' "quoted"`
	evilMeta   = `{"x":"</code><script>alert(2)</script>"}`
	evilCursor = `"><script>alert(3)</script>`
)

func evilPages() []page {
	l := heldLease()
	l.Name, l.Holder, l.Metadata = evilName, evilHolder, []byte(evilMeta)
	var evs []Event
	for _, e := range history() {
		e.Holder = evilHolder
		if e.Resource != "" {
			e.Resource = evilName
		}
		evs = append(evs, e)
	}
	rej := Rejection{Resource: evilName, Lease: evilName, Holder: evilHolder, ClientAddr: evilHolder,
		UserAgent: evilHolder, Reason: evilName, External: true, At: at("-5s")}
	freed := l
	freed.Held, freed.Ended, freed.EndedAt = false, evilHolder, at("-1m")

	o := Overview{Now: now, Host: evilName, Prefix: evilName, Contains: evilHolder, Holder: evilName, Sort: evilHolder, Cursor: evilCursor, HeldCount: 1,
		Held: []Lease{l}, NextCursor: evilCursor, Freed: []Lease{freed}, Rejections: []Rejection{rej}}
	tl := timeline()
	tl.Name = evilName
	for i := range tl.Grants {
		tl.Grants[i].Holder = evilHolder
	}
	tl.Rejections = append(tl.Rejections, rej)
	d := LeaseDetail{Now: now, Lease: l, Timeline: tl, Events: evs, Waiters: []Waiter{{Holder: evilHolder, Since: at("-3s")}},
		NextCursor: evilCursor, CSRFToken: evilHolder, Notice: evilName, CanRevoke: true, Range: evilCursor}
	for i := range evs {
		evs[i].Kind = evilHolder
	}
	rl := RejectionList{Now: now, Resource: evilName, Lease: evilHolder, Holder: evilName, Source: evilHolder, Range: evilName,
		Cursor: evilCursor, Rejections: []Rejection{rej}, NextCursor: evilCursor}
	res := ResourceList{Now: now, Resources: []Resource{{Name: evilName, ContentType: evilHolder, Lease: evilName,
		Holder: evilHolder, UpdatedAt: at("-1s")}}, NextCursor: evilCursor}
	evilSite := Site{AssetVersion: evilCursor, Version: evilName}
	return []page{
		{"Overview", OverviewPage(evilSite, o), nil},
		{"OverviewEmpty", OverviewPage(evilSite, Overview{Now: now, Host: evilName}), nil},
		{"Lease", LeasePage(evilSite, d), nil},
		{"Timeline", TimelineSVG(d.Timeline), nil},
		{"Rejections", RejectionsPage(evilSite, rl), nil},
		{"Resources", ResourcesPage(evilSite, res), nil},
		{"Resource", ResourcePage(evilSite, ResourceDetail{Now: now, Resource: res.Resources[0], Rejections: []Rejection{rej},
			Writers: []Write{{Version: 2, Token: 7, Lease: evilName, Holder: evilHolder, At: at("-1s"), ContentType: evilHolder}}}), nil},
		{"Error", ErrorPage(evilSite, ErrorInfo{Status: 404, Title: evilName, Detail: evilHolder, RequestID: evilName}), nil},
	}
}

// TestNoInjection renders every page with hostile names, holders, metadata and cursors, and
// checks that they stay text: no script, element or event handler appears, and every link
// and form target stays a local path.
func TestNoInjection(t *testing.T) {
	for _, p := range evilPages() {
		t.Run(p.name, func(t *testing.T) {
			out := render(t, p.full)
			for _, bad := range []string{"<script>alert", "<img", "</code><script>"} {
				if strings.Contains(out, bad) {
					t.Errorf("output contains %q", bad)
				}
			}
			doc, err := html.Parse(strings.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range byTag(doc, "script") {
				if !strings.HasPrefix(attr(s, "src"), "/static/app.js") || s.FirstChild != nil {
					t.Errorf("unexpected script element src=%q", attr(s, "src"))
				}
			}
			if n := len(byTag(doc, "img")); n != 0 {
				t.Errorf("img elements = %d, want 0", n)
			}
			for _, e := range findAll(doc, func(*html.Node) bool { return true }) {
				for _, a := range e.Attr {
					if strings.HasPrefix(strings.ToLower(a.Key), "on") {
						t.Errorf("<%s> has event handler attribute %s=%q", e.Data, a.Key, a.Val)
					}
					if a.Key == "href" || a.Key == "action" || a.Key == "src" {
						if !strings.HasPrefix(a.Val, "/") && !strings.HasPrefix(a.Val, "#") {
							t.Errorf("<%s %s=%q> is not a local path", e.Data, a.Key, a.Val)
						}
						if strings.ContainsAny(a.Val, "<>\" '") {
							t.Errorf("<%s %s=%q> is not escaped", e.Data, a.Key, a.Val)
						}
					}
				}
			}
		})
	}
}

// TestInjectionShownAsText checks that hostile values are shown as the text they are, in
// HTML, in attributes, in links and inside the timeline SVG.
func TestInjectionShownAsText(t *testing.T) {
	var d, o templ.Component
	for _, p := range evilPages() {
		switch p.name {
		case "Lease":
			d = p.full
		case "Overview":
			o = p.full
		}
	}
	doc := parse(t, d)
	if got := text(one(t, doc, "lease-name")); got != evilName {
		t.Errorf("lease-name = %q, want %q", got, evilName)
	}
	if got := text(one(t, one(t, doc, "lease-state"), "holder")); got != evilHolder {
		t.Errorf("holder = %q, want %q", got, evilHolder)
	}
	if got := text(one(t, one(t, doc, "lease-state"), "metadata")); got != evilMeta {
		t.Errorf("metadata = %q, want %q", got, evilMeta)
	}
	if got, want := attr(one(t, doc, "revoke-form"), "action"), "/leases/%3Cscript%3Ealert%281%29%3C%2Fscript%3E/revoke"; got != want {
		t.Errorf("revoke action = %q, want %q", got, want)
	}
	if got := attr(one(t, doc, "csrf"), "value"); got != evilHolder {
		t.Errorf("csrf value = %q, want %q", got, evilHolder)
	}
	if got := attr(one(t, doc, "live"), "data-watch-prefix"); got != evilName {
		t.Errorf("data-watch-prefix = %q, want %q", got, evilName)
	}

	svg := one(t, doc, "timeline")
	if n := len(byTag(svg, "script")); n != 0 {
		t.Errorf("script elements in the SVG = %d", n)
	}
	var found bool
	for _, title := range byTag(svg, "title") {
		if strings.Contains(text(title), evilHolder) {
			found = true
		}
	}
	if !found {
		t.Errorf("no <title> in the SVG shows the holder %q", evilHolder)
	}
	labels := findAll(svg, func(n *html.Node) bool { return attr(n, "class") == "tl-label" })
	if len(labels) == 0 || !strings.HasPrefix(evilHolder, strings.TrimSuffix(text(labels[0]), "…")[:10]) {
		t.Errorf("first SVG label = %q, want the holder's text", texts(labels))
	}
	if title := text(byTag(svg, "title")[0]); !strings.Contains(title, "Timeline of "+evilName+" from") {
		t.Errorf("SVG title = %q, want the name as text", title)
	}

	doc = parse(t, o)
	link := byTestID(one(t, doc, "held-table"), "lease-link")[0]
	if got, want := attr(link, "href"), "/leases/%3Cscript%3Ealert%281%29%3C%2Fscript%3E"; got != want {
		t.Errorf("lease link href = %q, want %q", got, want)
	}
	if got := text(link); got != evilName {
		t.Errorf("lease link text = %q, want %q", got, evilName)
	}
	if got, want := attr(one(t, doc, "next-page"), "href"), "/?prefix=%3Cscript%3Ealert%281%29%3C%2Fscript%3E&q=%22%3E%3Cimg+src%3Dx+onerror%3Dalert%281%29%3E+%27it%27%27s%27+%22quoted%22"+
		"&holder=%3Cscript%3Ealert%281%29%3C%2Fscript%3E&sort=%22%3E%3Cimg+src%3Dx+onerror%3Dalert%281%29%3E+%27it%27%27s%27+%22quoted%22"+
		"&cursor=%22%3E%3Cscript%3Ealert%283%29%3C%2Fscript%3E"; got != want {
		t.Errorf("next-page href = %q, want %q", got, want)
	}
	if got := attr(byTag(one(t, doc, "search-form"), "input")[0], "value"); got != evilName {
		t.Errorf("search value = %q, want %q", got, evilName)
	}
}
