package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a-h/templ"
)

// RelativeTime says when t is as seen from now, rounded down to a whole unit: "now" (within a
// second), "in 12 s", "3 min ago", "in 5 h", "2 d ago". Hours are used below 48 hours, days
// beyond. A zero t gives "". static/app.js implements the same rules.
func RelativeTime(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := t.Sub(now)
	future := d > 0
	if d < 0 {
		d = -d
	}
	var s string
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		s = strconv.FormatInt(int64(d/time.Second), 10) + " s"
	case d < time.Hour:
		s = strconv.FormatInt(int64(d/time.Minute), 10) + " min"
	case d < 48*time.Hour:
		s = strconv.FormatInt(int64(d/time.Hour), 10) + " h"
	default:
		s = strconv.FormatInt(int64(d/(24*time.Hour)), 10) + " d"
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

// Countdown is the text of an "expires in" cell: [RelativeTime] while expires is after now,
// "expired" from then on. A zero expires gives "".
func Countdown(expires, now time.Time) string {
	if expires.IsZero() {
		return ""
	}
	if !expires.After(now) {
		return "expired"
	}
	return RelativeTime(expires, now)
}

// FormatDuration writes d for people: "250 ms", "1.5 s", "30 s", "2 min 30 s", "1 h 5 min".
// Units below the second largest one are dropped.
func FormatDuration(d time.Duration) string {
	neg := ""
	if d < 0 {
		neg, d = "-", -d
	}
	switch {
	case d < time.Second:
		return neg + strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		ms := d.Milliseconds()
		return neg + strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64) + " s"
	case d < time.Hour:
		return neg + twoUnits(int64(d/time.Minute), "min", int64(d%time.Minute/time.Second), "s")
	case d < 48*time.Hour:
		return neg + twoUnits(int64(d/time.Hour), "h", int64(d%time.Hour/time.Minute), "min")
	default:
		return neg + twoUnits(int64(d/(24*time.Hour)), "d", int64(d%(24*time.Hour)/time.Hour), "h")
	}
}

func twoUnits(a int64, aUnit string, b int64, bUnit string) string {
	s := fmt.Sprintf("%d %s", a, aUnit)
	if b != 0 {
		s += fmt.Sprintf(" %d %s", b, bUnit)
	}
	return s
}

// LeaseURL is the dashboard path of a lease's page, with the name escaped as one path segment.
func LeaseURL(name string) templ.SafeURL {
	return templ.URL("/leases/" + url.PathEscape(name))
}

// ResourceURL is the dashboard path of a resource's page, with the name escaped as one path
// segment.
func ResourceURL(name string) templ.SafeURL {
	return templ.URL("/resources/" + url.PathEscape(name))
}

// revokeURL is where the revoke form posts.
func revokeURL(name string) templ.SafeURL {
	return templ.URL("/leases/" + url.PathEscape(name) + "/revoke")
}

// pageURL is path with the non-empty query parameters of kv (pairs of key and value), in
// order. Values are query-escaped, so the result is a plain path and query.
func pageURL(path string, kv ...string) templ.SafeURL {
	var q []string
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q = append(q, url.QueryEscape(kv[i])+"="+url.QueryEscape(kv[i+1]))
		}
	}
	if len(q) == 0 {
		return templ.URL(path)
	}
	return templ.URL(path + "?" + strings.Join(q, "&"))
}

// staticURL is the URL of a file in static/, with the cache-busting version.
func staticURL(site Site, name string) templ.SafeURL {
	if site.AssetVersion == "" {
		return templ.URL("/static/" + name)
	}
	return templ.URL("/static/" + name + "?v=" + url.QueryEscape(site.AssetVersion))
}

// isoTime is t as RFC 3339 UTC with milliseconds, for datetime and data attributes.
func isoTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// absTime is t for people, in UTC with milliseconds.
func absTime(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// absShort is t for a table cell, in UTC: the time to the second, with the date when it is
// not now's day, e.g. "12:00:30 UTC" or "Nov 28 23:59:01 UTC". static/app.js writes the same
// in the browser's time zone when the reader asks for local times.
func absShort(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	switch {
	case t.Year() != now.Year():
		return t.Format("Jan 2, 2006 15:04:05 UTC")
	case t.YearDay() != now.YearDay():
		return t.Format("Jan 2 15:04:05 UTC")
	default:
		return t.Format("15:04:05 UTC")
	}
}

// staleToken is a refused write's token as the dashboard shows it: how many grants behind
// the fence it was ("3 grants behind"), or the token itself when that is not known.
func staleToken(r Rejection) string {
	switch {
	case r.GrantsBehind == 1:
		return "1 grant behind"
	case r.GrantsBehind > 1:
		return strconv.Itoa(r.GrantsBehind) + " grants behind"
	}
	return itoa(r.PresentedToken)
}

// name is a name or holder that may wrap after its separators (- . _ : / # @) rather than
// inside a word: a break opportunity (wbr) follows each separator, with no space around it
// (templ would put one between an element and text on separate lines).
func name(s string) templ.Component {
	return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		var b strings.Builder
		for s != "" {
			i := strings.IndexAny(s, "-._:/#@")
			if i < 0 || i == len(s)-1 {
				break
			}
			b.WriteString(html.EscapeString(s[:i+1]) + "<wbr>")
			s = s[i+1:]
		}
		b.WriteString(html.EscapeString(s))
		_, err := io.WriteString(w, b.String())
		return err
	})
}

// lateText is a lateness: milliseconds below a second ("40 ms"), seconds with one decimal
// below a minute ("8.3 s"), else as FormatDuration.
func lateText(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	}
	return FormatDuration(d.Truncate(time.Second))
}

// countText is a capped count: "1000+" at [CountCap].
func countText(n int) string {
	if n >= CountCap {
		return itoa(CountCap) + "+"
	}
	return itoa(n)
}

// plural is n and the noun, with an s unless n is 1: "1 rejection", "3 rejections".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return countText(n) + " " + noun + "s"
}

// soon reports whether less than a fifth of l's ttl is left at now: the overview highlights it.
func soon(l Lease, now time.Time) bool {
	left := l.ExpiresAt.Sub(now)
	return l.Held && l.TTL > 0 && left > 0 && left < l.TTL/5
}

// renewalLate reports whether l's holder has not renewed for more than half its ttl: clients
// renew well before that, so it is likely paused, partitioned or gone.
func renewalLate(l Lease, now time.Time) bool {
	return l.Held && l.Limit == 0 && l.TTL > 0 && now.Sub(l.RenewedAt) > l.TTL/2
}

// compactJSON is raw without insignificant space; "" for no metadata. Invalid JSON is shown
// as it is (it is escaped like any text).
func compactJSON(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" || string(t) == "{}" {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, t); err != nil {
		return string(t)
	}
	return b.String()
}

// truncate shortens s to at most n runes, ending in "…" when it was cut.
func truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// itoa is the decimal form of n.
func itoa[T ~int | ~int64](n T) string {
	return strconv.FormatInt(int64(n), 10)
}

// orDash is s, or an em dash when s is empty.
func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// lockDelayText is the lock delay for a table cell.
func lockDelayText(d time.Duration) string {
	if d <= 0 {
		return "none"
	}
	return FormatDuration(d)
}

// statusTitle is the title of an error page.
func statusTitle(e ErrorInfo) string {
	if e.Title != "" {
		return e.Title
	}
	if s := http.StatusText(e.Status); s != "" {
		return s
	}
	return "Error"
}

// isEmpty reports whether nothing was ever leased, so the overview shows how to start.
func (o Overview) isEmpty() bool {
	return o.HeldCount == 0 && len(o.Held) == 0 && len(o.Freed) == 0 && len(o.Rejections) == 0 &&
		o.Prefix == "" && o.Cursor == ""
}

// filtered reports whether the overview's held leases are filtered beyond their prefix.
func (o Overview) filtered() bool {
	return o.Contains != "" || o.Holder != "" || o.State != ""
}

// pageURL is the overview with o's search and order, at the page of cursor ("" for the first).
func (o Overview) pageURL(cursor string) templ.SafeURL {
	sort := o.Sort
	if sort == SortName {
		sort = ""
	}
	return pageURL("/", "prefix", o.Prefix, "q", o.Contains, "holder", o.Holder, "state", o.State, "sort", sort, "cursor", cursor)
}

// curlExample is the command of the overview's empty state.
func curlExample(host string) string {
	if host == "" {
		host = "localhost:8080"
	}
	return `curl -s -X POST ` + host + `/v1/leases/demo/acquire -d '{"holder":"me","ttl_ms":30000}'`
}

// formatBytes is a size for people: "512 B", "1.5 KiB", "3.0 MiB".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + "KMGTP"[exp:exp+1] + "iB"
}

// fenceText is a rejection's current fence, or a dash when it is not known (0).
func fenceText(f int64) string {
	if f == 0 {
		return "—"
	}
	return itoa(f)
}

// boolText is "true" or "false", for data attributes.
func boolText(b bool) string { return strconv.FormatBool(b) }

// filtered reports whether any filter of the rejections page is set.
func (l RejectionList) filtered() bool {
	return l.Resource != "" || l.Lease != "" || l.Holder != "" || l.Source != "" || l.Range != ""
}

// url is the rejections page with l's filters and the cursor.
func (l RejectionList) url(cursor string) templ.SafeURL {
	return pageURL("/rejections", "resource", l.Resource, "lease", l.Lease, "holder", l.Holder, "source", l.Source,
		"range", l.Range, "cursor", cursor)
}

// leaseSummary is what the lease page announces politely when it changes.
func leaseSummary(l Lease) string {
	if l.Held {
		return l.Name + " is held by " + l.Holder + " with token " + itoa(l.Token)
	}
	if l.Ended != "" {
		return l.Name + " is free: " + l.Ended
	}
	return l.Name + " is free"
}

// SessionURL is the dashboard path of a holder's session, by its public name.
func SessionURL(ref string) templ.SafeURL {
	return templ.URL("/sessions/" + url.PathEscape(ref))
}

// sessionOpen reports whether s is neither closed nor expired at now.
func sessionOpen(s SessionInfo, now time.Time) bool {
	return s.ClosedAt.IsZero() && s.ExpiresAt.After(now)
}

// sessionSummary is what the live region announces when it changes.
func sessionSummary(d SessionDetail) string {
	s := d.Session
	switch {
	case sessionOpen(s, d.Now):
		return "session " + s.Ref + " of " + s.Holder + " is open with " + plural(s.Held, "lease")
	case !s.ClosedAt.IsZero():
		return "session " + s.Ref + " is closed"
	}
	return "session " + s.Ref + " expired"
}

// readersText says how many shared holders a name has: "1 reader", "2 readers".
func readersText(l Lease) string { return plural(l.Readers, "reader") }

// slotsText says how full a semaphore is: "2/3 slots held".
func slotsText(l Lease) string {
	return itoa(l.SlotsHeld) + "/" + itoa(l.Limit) + " slots held"
}
