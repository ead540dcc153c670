package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/service/servicetest"

	"github.com/leasekeeper/leasekeeper/internal/browsertest"
)

// dashRestartable serves the live handler on one address that can be stopped and served
// again, as a server that goes away and comes back: the browser keeps its page and session.
type dashRestartable struct {
	*dashServer
	t    *testing.T
	h    http.Handler
	addr string

	mu     sync.Mutex
	srv    *http.Server
	cancel context.CancelFunc
}

func newDashRestartable(t *testing.T) *dashRestartable {
	t.Helper()
	h, st := newDashLiveHandler(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dashRestartable{t: t, h: h, addr: ln.Addr().String()}
	s.serve(ln)
	t.Cleanup(s.stop)
	key := servicetest.AdminKey(t, st)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: servicetest.BearerTransport{Key: key},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	s.dashServer = &dashServer{t: t, url: "http://" + s.addr, store: st, hc: hc, key: key}
	return s
}

func (s *dashRestartable) serve(ln net.Listener) {
	base, cancel := context.WithCancel(context.Background())
	srv := &http.Server{Handler: s.h, BaseContext: func(net.Listener) context.Context { return base }}
	s.mu.Lock()
	s.srv, s.cancel = srv, cancel
	s.mu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.t.Errorf("serve: %v", err)
		}
	}()
}

// stop closes the listener and every connection, watch streams included.
func (s *dashRestartable) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.cancel()
		s.srv.Close()
		s.srv = nil
	}
}

// start serves again on the same address.
func (s *dashRestartable) start() {
	s.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port was just released
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("listen again on %s: %v", s.addr, err)
	}
	s.serve(ln)
}

// dashViewport makes the tab w px wide (a phone when mobile), in light or dark.
func dashViewport(t *testing.T, ctx context.Context, w, h int64, mobile, dark bool) {
	t.Helper()
	opts := []chromedp.EmulateViewportOption{}
	if mobile {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateScale(2))
	}
	scheme := "light"
	if dark {
		scheme = "dark"
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, h, opts...)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}); err != nil {
		t.Fatal(err)
	}
}

// dashOverflow lists the key cells (by data-testid) that end beyond the window or beyond
// their table's visible box, and says whether the page scrolls sideways.
const dashOverflow = `(() => {
  const out = [];
  const vw = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > vw + 1) {
    // Name the outermost elements that stick out, to say what to fix.
    const wide = [...document.querySelectorAll("body *")].filter((e) => e.getBoundingClientRect().right > vw + 1 &&
      !(e.parentElement && e.parentElement.getBoundingClientRect().right > vw + 1) && !e.closest(".table-wrap, .svg-wrap"));
    out.push("page " + document.documentElement.scrollWidth + " > " + vw + ": " + wide.slice(0, 5).map((e) =>
      e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && e.className.baseVal === undefined ? "." + e.className : "")).join(", "));
  }
  for (const id of KEYS) {
    for (const el of document.querySelectorAll("[data-testid=" + id + "]")) {
      const r = el.getBoundingClientRect();
      const wrap = el.closest(".table-wrap");
      const right = Math.min(vw, wrap ? wrap.getBoundingClientRect().right : vw);
      if (r.right > right + 1 || r.left < -1) out.push(id + " " + JSON.stringify(el.innerText.slice(0, 40)) + " at " + Math.round(r.left) + "–" + Math.round(r.right) + " > " + Math.round(right));
    }
  }
  for (const w of document.querySelectorAll(".table-wrap")) {
    if (WHOLE && w.scrollWidth > w.clientWidth + 1) out.push("table " + (w.querySelector("table") || {}).dataset.testid + " scrolls: " + w.scrollWidth + " > " + w.clientWidth);
  }
  return out;
})()`

// dashContrast computes, from the page's CSS, the contrast of every badge's text on its
// background and of the lock-delay pattern's lines on the timeline's surface.
const dashContrast = `(() => {
  const rgb = (s) => { const m = s.match(/[\d.]+/g).map(Number); return m.length > 3 && m[3] === 0 ? null : m.slice(0, 3); };
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const bgOf = (el) => { for (let e = el; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor); if (c) return c; } return [255, 255, 255]; };
  const host = document.createElement("div");
  host.className = "card";
  document.querySelector("main").appendChild(host);
  const out = {};
  for (const k of ["held", "free", "acquired", "renewed", "released", "expired", "revoked", "rejected", "external", "late"]) {
    const b = document.createElement("span");
    b.className = "badge badge-" + k;
    b.textContent = k;
    host.appendChild(b);
    out["badge-" + k] = ratio(rgb(getComputedStyle(b).color), bgOf(b));
  }
  const line = document.querySelector("svg.tl .tl-delay-line");
  const wrap = document.querySelector(".svg-wrap");
  if (line && wrap) out["lock-delay lines"] = ratio(rgb(getComputedStyle(line).stroke), bgOf(wrap));
  const bgRect = document.querySelector("svg.tl .tl-delay-bg");
  if (line && bgRect) out["lock-delay lines on their fill"] = ratio(rgb(getComputedStyle(line).stroke), rgb(getComputedStyle(bgRect).fill));
  host.remove();
  return out;
})()`

// dashTextOverlaps lists pairs of texts in the timeline picture whose boxes overlap.
const dashTextOverlaps = `(() => {
  const ts = [...document.querySelectorAll("svg[data-testid=timeline] text")].map((t) => ({ s: t.textContent, r: t.getBoundingClientRect() }))
    .filter((t) => t.r.width > 0);
  const out = [];
  for (let i = 0; i < ts.length; i++) for (let j = i + 1; j < ts.length; j++) {
    const a = ts[i].r, b = ts[j].r;
    if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5) out.push(ts[i].s + " / " + ts[j].s);
  }
  return out;
})()`

// dashSmallestText is the smallest rendered font size, in CSS px, of the timeline's texts.
const dashSmallestText = `Math.min(...[...document.querySelectorAll("svg[data-testid=timeline] text")].map((t) => {
  const svg = t.ownerSVGElement;
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  return parseFloat(getComputedStyle(t).fontSize) * scale;
}))`

// TestBrowserOnCall drives the dashboard as the person on call uses it, with realistic state:
// 15 held leases with long names and metadata, waiters, a handover with lock delays, stale
// writes from three holders and one reported from outside.
func TestBrowserOnCall(t *testing.T) {
	browser := browsertest.Start(t)
	s := newDashRestartable(t)
	shots := dashShots(t)

	// A handover on billing-nightly: the first grant has a lock delay and expires, the next
	// has none and is released, the third holds it now.
	a := s.acquireWith("billing-nightly", map[string]any{"holder": "cron@host-a", "ttl_ms": 1000, "lock_delay_ms": 700})
	time.Sleep(1800 * time.Millisecond) // a expires and its lock delay passes
	b := s.acquireWith("billing-nightly", map[string]any{"holder": "cron@host-b", "ttl_ms": 60000})
	s.put("invoices", b.Token, "ok", map[string]string{"Lease-Name": "billing-nightly"})
	s.release("billing-nightly", b)
	c := s.acquire("billing-nightly", "cron@host-c", 10*time.Minute, `{"run":"2026-11-29","shard":3}`)
	s.put("invoices", c.Token, "ok", map[string]string{"Lease-Name": "billing-nightly"})
	for i := range 3 { // stale writes close together: one ✕ with a count
		s.put("invoices", a.Token, "late "+strconv.Itoa(i), map[string]string{"Lease-Name": "billing-nightly", "User-Agent": "billing-job/2.1"})
	}
	s.put("invoices", b.Token, "late", map[string]string{"Lease-Name": "billing-nightly", "User-Agent": "billing-job/2.2"})
	for i := range 15 {
		name := fmt.Sprintf("%s-%02d", []string{"search-index-rebuild-for-the-european-catalogue", "mail-queue", "cluster-leader"}[i%3], i)
		md := ""
		if i%2 == 0 {
			md = fmt.Sprintf(`{"addr":"10.0.%d.7:9000","pid":%d,"build":"2026.11.29-rc%d","note":"a long note that goes on and on"}`, i, 4000+i, i)
		}
		s.acquire(name, fmt.Sprintf("worker-%d@host-%c.eu-west-1.compute.internal", i, 'a'+i), time.Duration(5+i)*time.Minute, md)
	}
	// A revoked lease whose expiry, 10 min away, was cancelled.
	rv := s.acquire("revoked-job", "stuck@host-r", 10*time.Minute, "")
	if resp, body := s.do(http.MethodDelete, "/v1/leases/revoked-job", nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke = %d %s", resp.StatusCode, body)
	}
	// A refusal reported from outside, with a long reason made of digits.
	report := fmt.Sprintf(`{"resource":"warehouse-db","lease":"billing-nightly","presented_token":%d,"current_fence":%d,"reason":"row version 17961081594390/00 is newer than 17961081594389/99; refusing UPDATE of invoice 4242 on shard 3"}`, a.Token, c.Token)
	if resp, body := s.do(http.MethodPost, "/v1/rejections", strings.NewReader(report), map[string]string{"Content-Type": "application/json"}); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("report a rejection = %d %s", resp.StatusCode, body)
	}
	// Waiters on the held billing-nightly, waiting in the background until the test ends.
	waitCtx, stopWaiting := context.WithCancel(context.Background())
	var waiting sync.WaitGroup
	t.Cleanup(func() { stopWaiting(); waiting.Wait() })
	for i, h := range []string{"cron@host-d", "cron@host-e"} {
		waiting.Go(func() {
			req, _ := http.NewRequestWithContext(waitCtx, http.MethodPost, s.url+"/v1/leases/billing-nightly/acquire",
				strings.NewReader(`{"holder":"`+h+`","ttl_ms":60000,"wait_ms":240000}`))
			req.Header.Set("Content-Type", "application/json")
			long := &http.Client{Transport: s.hc.Transport} // no timeout: it waits until the test ends
			if resp, err := long.Do(req); err == nil {
				resp.Body.Close()
			}
		})
		deadline := time.Now().Add(5 * time.Second)
		for s.waiterCount("billing-nightly") < i+1 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}

	t.Run("EndedLeaseHasNoCountdown", func(t *testing.T) {
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s.dashServer, "/leases/revoked-job", false)
		if n := dashEval[int](t, ctx, `document.querySelectorAll("[data-testid=lease-state] [data-expires-at]").length`); n != 0 {
			t.Errorf("a revoked lease's page has %d countdowns, want none", n)
		}
		state := dashEval[string](t, ctx, `document.querySelector("[data-testid=lease-state]").innerText`)
		if strings.Contains(state, "in 9 min") || strings.Contains(state, "in 10 min") || !strings.Contains(state, "revoked") {
			t.Errorf("the revoked lease's state %q, want revoked and no expiry ahead", state)
		}
		// The timeline ends at now (plus its margin), not at the cancelled expiry: now is at the
		// right of the picture.
		nowX := dashEval[float64](t, ctx, `parseFloat(document.querySelector("svg[data-testid=timeline] .tl-now line").getAttribute("x1"))`)
		if nowX < 0.85*960 {
			t.Errorf("now is drawn at x=%.0f of 960: the window stretches past the end of a revoked lease", nowX)
		}
		if tok := dashEval[string](t, ctx, `document.querySelector("[data-testid=lease-state] [data-testid=token]").innerText`); tok != strconv.FormatInt(rv.Token, 10) {
			t.Errorf("token = %s, want %d", tok, rv.Token)
		}
	})

	t.Run("EarlierGrantLockDelayDrawn", func(t *testing.T) {
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s.dashServer, "/leases/billing-nightly", false)
		titles := dashEval[[]string](t, ctx, `[...document.querySelectorAll("svg[data-testid=timeline] [data-testid=lock-delay] title")].map((t) => t.textContent)`)
		want := "after the expiry of #" + strconv.FormatInt(a.Token, 10)
		if !slices.ContainsFunc(titles, func(s string) bool { return strings.Contains(s, "lock delay 700 ms") && strings.Contains(s, want) }) {
			t.Errorf("lock delays drawn = %q, want the first grant's 700 ms (%s)", titles, want)
		}
		if w := dashEval[float64](t, ctx, `document.querySelector("svg[data-testid=timeline] [data-testid=lock-delay]").getBoundingClientRect().width`); w < 1 {
			t.Errorf("the lock delay is %.1f px wide, want it visible", w)
		}
		counts := dashEval[[]string](t, ctx, `[...document.querySelectorAll("svg[data-testid=timeline] [data-testid=reject-count]")].map((t) => t.textContent)`)
		if !slices.ContainsFunc(counts, func(c string) bool { n, _ := strconv.Atoi(strings.TrimPrefix(c, "×")); return n >= 3 }) {
			t.Errorf("stacked ✕ counts = %q, want one of at least ×3 for the writes close together", counts)
		}
		if overlaps := dashEval[[]string](t, ctx, dashTextOverlaps); len(overlaps) > 0 {
			t.Errorf("timeline texts overlap: %q", overlaps)
		}
		if zone := dashEval[string](t, ctx, `document.querySelector("[data-testid=timeline-zone]").textContent`); !strings.Contains(zone, "UTC") || !strings.Contains(zone, time.Now().UTC().Format("2006")) {
			t.Errorf("axis caption = %q, want the date and UTC", zone)
		}
		waiters := dashEval[[]string](t, ctx, `[...document.querySelectorAll("[data-testid=waiter]")].map((w) => w.innerText)`)
		// Since when: "… ago", or "now" when the page came within a second of the waiter.
		since := func(w string) bool { return strings.Contains(w, "ago") || strings.Contains(w, "since now") }
		if len(waiters) != 2 || !strings.Contains(waiters[0], "cron@host-d") || !since(waiters[0]) || !since(waiters[1]) {
			t.Errorf("waiters = %q, want cron@host-d then cron@host-e, each with since when", waiters)
		}
		link := dashEval[string](t, ctx, `document.querySelector("[data-testid=lease-state] [data-testid=lease-rejections]").getAttribute("href")`)
		if link != "/rejections?lease=billing-nightly" {
			t.Errorf("rejections link = %q", link)
		}
		// The range picker.
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("[data-testid=range-15m]")), chromedp.WaitVisible(chromedp.CSS("[data-testid=range-15m][aria-current]"))); err != nil {
			t.Fatalf("pick 15 min: %v", err)
		}
		if title := dashEval[string](t, ctx, `document.querySelector("#tl-title").textContent`); !strings.Contains(title, "grants") {
			t.Errorf("timeline title after picking a range = %q", title)
		}
	})

	t.Run("SortAndFilter", func(t *testing.T) {
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s.dashServer, "/", false)
		if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("sort"), "expiry"), chromedp.Submit(chromedp.ID("sort"))); err != nil {
			t.Fatalf("sort by expiry: %v", err)
		}
		dashWaitAcross(t, ctx, "the sorted page", `location.search.includes("sort=expiry") && document.readyState === "complete"`, 5*time.Second)
		expiries := dashEval[[]string](t, ctx, `[...document.querySelectorAll("[data-testid=lease-row] [data-testid=countdown]")].map((c) => c.getAttribute("datetime"))`)
		if len(expiries) != 16 || !slices.IsSorted(expiries) {
			t.Errorf("expiries sorted by soonest = %q (%d rows), want 16 in order", expiries, len(expiries))
		}

		dashOpen(t, ctx, s.dashServer, "/?sort=newest", false)
		tokens := dashEval[[]string](t, ctx, `[...document.querySelectorAll("[data-testid=lease-row] [data-testid=token]")].map((c) => c.innerText.padStart(20, "0"))`)
		if !slices.IsSortedFunc(tokens, func(a, b string) int { return strings.Compare(b, a) }) || len(tokens) != 16 {
			t.Errorf("tokens, newest first = %q", tokens)
		}
		dashOpen(t, ctx, s.dashServer, "/", false)
		if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("contains"), "queue"), chromedp.SendKeys(chromedp.ID("holder"), "host-"),
			chromedp.Submit(chromedp.ID("contains"))); err != nil {
			t.Fatalf("filter: %v", err)
		}
		dashWaitAcross(t, ctx, "the filtered page", `location.search.includes("q=queue") && document.readyState === "complete"`, 5*time.Second)
		names := dashEval[[]string](t, ctx, `[...document.querySelectorAll("[data-testid=lease-row] [data-testid=lease-link]")].map((c) => c.innerText)`)
		if len(names) != 5 || slices.ContainsFunc(names, func(n string) bool { return !strings.Contains(n, "queue") }) {
			t.Errorf("names containing queue = %q, want the 5 mail-queue leases", names)
		}
		dashOpen(t, ctx, s.dashServer, "/?holder=host-c.eu", false)
		if names := dashEval[[]string](t, ctx, `[...document.querySelectorAll("[data-testid=lease-row] [data-testid=holder]")].map((c) => c.innerText)`); len(names) != 1 || !strings.HasPrefix(names[0], "worker-2@") {
			t.Errorf("holder filter = %q, want worker-2", names)
		}
	})

	t.Run("RejectionFiltersAndStaleness", func(t *testing.T) {
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s.dashServer, "/rejections?lease=billing-nightly", false)
		rows := dashEval[[]string](t, ctx, `[...document.querySelectorAll("[data-testid=rejection-row]")].map((r) => r.innerText)`)
		if len(rows) != 5 {
			t.Fatalf("rejections of billing-nightly = %d, want 5: %q", len(rows), rows)
		}
		stale := dashEval[[]string](t, ctx, `[...document.querySelectorAll("[data-testid=rejection-row]")].map((r) => {
		  const tok = r.querySelector("[data-testid=presented-token]"), late = r.querySelector("[data-testid=late]");
		  return tok.innerText + " | " + (late ? late.innerText : "") + " | " + tok.title;
		})`)
		// Newest first: the report (a's token against c's fence: 2 grants behind), b's late
		// write (1 behind), a's three (2 behind, each late by more than a second). The token in
		// full is the title.
		if !strings.HasPrefix(stale[1], "1 grant behind | ") || !strings.HasPrefix(stale[2], "2 grants behind | ") ||
			!strings.HasSuffix(stale[2], " late | Presented token "+strconv.FormatInt(a.Token, 10)) {
			t.Errorf("how stale = %q, want 1 then 2 grants behind, with how late and the token in the title", stale)
		}
		if n := dashEval[int](t, ctx, `document.querySelectorAll("[data-testid=rejection-row] [data-testid=external]").length`); n != 1 {
			t.Errorf("rows marked external = %d, want 1", n)
		}
		dashOpen(t, ctx, s.dashServer, "/rejections?source=external", false)
		if rows := dashEval[int](t, ctx, `document.querySelectorAll("[data-testid=rejection-row]").length`); rows != 1 {
			t.Errorf("source=external: %d rows, want 1", rows)
		}
		dashOpen(t, ctx, s.dashServer, "/rejections?holder=host-b&range=15m", false)
		if rows := dashEval[[]string](t, ctx, `[...document.querySelectorAll("[data-testid=rejection-row]")].map((r) => r.innerText)`); len(rows) != 1 || !strings.Contains(rows[0], "billing-job/2.2") {
			t.Errorf("holder=host-b in the last 15 min = %q, want b's one write", rows)
		}
		// Resource pages, linked from each row.
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("[data-testid=rejection-row] [data-testid=resource-link]")), chromedp.WaitVisible(chromedp.CSS("[data-testid=resource-state]"))); err != nil {
			t.Fatalf("open the resource page: %v", err)
		}
		if fence := dashEval[string](t, ctx, `document.querySelector("[data-testid=resource-state] [data-testid=fence]").innerText`); fence != strconv.FormatInt(c.Token, 10) {
			t.Errorf("invoices fence = %s, want %d", fence, c.Token)
		}
		// Its recent writers, newest first, with when: c's write, then b's; no refused one.
		writers := dashEval[[]string](t, ctx, `[...document.querySelectorAll("[data-testid=writers-table] [data-testid=writer-row]")].map((r) =>
		  r.querySelector("[data-testid=writer-holder]").innerText + " " + r.querySelector("[data-testid=writer-token]").innerText +
		  " " + (r.querySelector("time[data-rel]") ? "dated" : "undated"))`)
		want := []string{fmt.Sprintf("cron@host-c %d dated", c.Token), fmt.Sprintf("cron@host-b %d dated", b.Token)}
		if diff := cmp.Diff(want, writers); diff != "" {
			t.Errorf("invoices writers (-want +got):\n%s", diff)
		}
		// The overview marks the reported one as external.
		dashOpen(t, ctx, s.dashServer, "/", false)
		if n := dashEval[int](t, ctx, `document.querySelectorAll("[data-testid=rejections-table] [data-testid=external]").length`); n != 1 {
			t.Errorf("external marks on the overview = %d, want 1", n)
		}
		if got := dashEval[string](t, ctx, `(document.querySelector("[data-testid=lease-rejections]") || {}).textContent || ""`); got == "" {
			t.Errorf("no rejections link on the overview's held rows")
		}
	})

	t.Run("NoOverflow", func(t *testing.T) {
		keys := `["name-cell","holder-cell","left-cell","token-cell","presented-token","rejection-key"]`
		for _, vp := range []struct {
			w      int64
			mobile bool
		}{{1280, false}, {390, true}} {
			ctx := dashTab(t, browser)
			dashViewport(t, ctx, vp.w, 900, vp.mobile, false)
			for _, path := range []string{"/", "/rejections", "/leases/billing-nightly", "/resources", "/resources/invoices"} {
				dashOpen(t, ctx, s.dashServer, path, false)
				// At 1280 px nothing scrolls; on a phone the tables are cards.
				js := strings.NewReplacer("KEYS", keys, "WHOLE", strconv.FormatBool(vp.w >= 1280)).Replace(dashOverflow)
				if out := dashEval[[]string](t, ctx, js); len(out) > 0 {
					t.Errorf("at %d px, %s overflows: %q", vp.w, path, out)
				}
			}
			dashOpen(t, ctx, s.dashServer, "/rejections", false)
			// The reported reason is a sentence: it wraps between words, not digit by digit.
			if w := dashEval[float64](t, ctx, `[...document.querySelectorAll(".reason")].map((r) => r.getBoundingClientRect().width).reduce((a, b) => Math.min(a, b), 1e9)`); w < 150 {
				t.Errorf("at %d px a reason is %.0f px wide: it wraps digit by digit", vp.w, w)
			}
			if vp.mobile {
				dashOpen(t, ctx, s.dashServer, "/leases/billing-nightly", false)
				if px := dashEval[float64](t, ctx, dashSmallestText); px < 11 {
					t.Errorf("on a phone the timeline's smallest text is %.1f px, want ≥ 11", px)
				}
				// It starts scrolled to now: the now line is in view.
				if off := dashEval[float64](t, ctx, `(() => { const w = document.querySelector(".svg-wrap").getBoundingClientRect();
				  const n = document.querySelector("svg[data-testid=timeline] .tl-now line").getBoundingClientRect();
				  return n.left < w.left ? n.left - w.left : n.right > w.right ? n.right - w.right : 0; })()`); off != 0 {
					t.Errorf("on a phone the now line is %.0f px outside the timeline's view", off)
				}
			}
		}
	})

	t.Run("TimesAbsoluteAndLocal", func(t *testing.T) {
		ctx := dashTab(t, browser)
		if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Kolkata"}); err != nil {
			t.Fatal(err)
		}
		dashOpen(t, ctx, s.dashServer, "/", false)
		abs := dashEval[string](t, ctx, `document.querySelector("[data-testid=lease-row] [data-abs]").textContent`)
		if !strings.HasSuffix(abs, " UTC") {
			t.Errorf("absolute time %q, want UTC first", abs)
		}
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("tz-toggle"))); err != nil {
			t.Fatal(err)
		}
		local := dashEval[string](t, ctx, `document.querySelector("[data-testid=lease-row] [data-abs]").textContent`)
		if strings.HasSuffix(local, "UTC") || local == abs {
			t.Errorf("after choosing local times: %q (was %q), want Kolkata's", local, abs)
		}
		dashOpen(t, ctx, s.dashServer, "/rejections", false) // the choice is kept
		if got := dashEval[string](t, ctx, `document.querySelector("[data-abs]").textContent`); strings.HasSuffix(got, "UTC") {
			t.Errorf("on the next page: %q, want local times kept", got)
		}
		dashEval[chromedp.Void](t, ctx, `localStorage.removeItem("lk-tz")`)
	})

	t.Run("CopyButtons", func(t *testing.T) {
		ctx := dashTab(t, browser)
		for _, name := range []string{"clipboard-read", "clipboard-write"} {
			if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
				Permission: &cdpbrowser.PermissionDescriptor{Name: name}, Setting: cdpbrowser.PermissionSettingGranted, Origin: s.url}); err != nil {
				t.Fatalf("grant %s: %v", name, err)
			}
		}
		dashOpen(t, ctx, s.dashServer, "/leases/billing-nightly", false)
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=lease-state] dd button.copy`))); err != nil {
			t.Fatal(err)
		}
		dashWaitFor(t, ctx, "the copy to be confirmed", `document.querySelector("[data-testid=lease-state] dd button.copy").dataset.copied === "yes"`, 3*time.Second)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("read the clipboard: %v", err)
		}
		if got != strconv.FormatInt(c.Token, 10) {
			t.Errorf("clipboard = %q, want the token %d", got, c.Token)
		}
	})

	t.Run("Contrast", func(t *testing.T) {
		for _, dark := range []bool{false, true} {
			ctx := dashTab(t, browser)
			dashViewport(t, ctx, 1280, 900, false, dark)
			dashOpen(t, ctx, s.dashServer, "/leases/billing-nightly", false)
			got := dashEval[map[string]float64](t, ctx, dashContrast)
			for k, r := range got {
				min := 4.5
				if strings.HasPrefix(k, "lock-delay") {
					min = 3 // a graphical object (WCAG 1.4.11)
				}
				if r < min {
					t.Errorf("dark=%v: %s contrast %.2f:1, want ≥ %.1f:1", dark, k, r, min)
				}
			}
			if len(got) < 11 {
				t.Errorf("dark=%v: measured %v, want every badge and the lock-delay pattern", dark, got)
			}
		}
	})

	t.Run("Announcements", func(t *testing.T) {
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s.dashServer, "/", true)
		if got := dashEval[string](t, ctx, `document.getElementById("announce").getAttribute("aria-live")`); got != "polite" {
			t.Errorf("announcer aria-live = %q, want polite", got)
		}
		if dashEval[bool](t, ctx, `document.getElementById("conn").hasAttribute("aria-live") && document.getElementById("conn").getAttribute("aria-live") !== "off"`) {
			t.Errorf("the connection line, which changes every second, is live for screen readers")
		}
		s.acquire("announced", "worker@host-n", time.Minute, "")
		dashWaitFor(t, ctx, "the change to be announced", `document.getElementById("announce").textContent.includes("held leases")`, 5*time.Second)
	})

	// The server stops: the page says so within seconds and stops its countdowns; it comes
	// back: the page is live again without a reload.
	t.Run("StaleWhenServerStops", func(t *testing.T) {
		s.acquire("ticking", "worker@host-t", 50*time.Second, "") // a countdown in seconds
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s.dashServer, "/?q=ticking", true)
		dashEval[bool](t, ctx, `window.__lkMarker = true`)
		dashWaitFor(t, ctx, "the live indicator", `document.getElementById("conn").dataset.state === "live" && /^live · updated/.test(document.querySelector("#conn .conn-text").textContent)`, 3*time.Second)
		// Where the header ends and the page begins, at each size: going stale moves neither.
		sizes := []struct {
			w, h   int64
			mobile bool
		}{{1280, 800, false}, {390, 844, true}}
		const edges = `[document.querySelector("header.site").getBoundingClientRect().height, document.querySelector("main").getBoundingClientRect().top]`
		live := map[int64][]float64{}
		for _, vp := range sizes {
			dashViewport(t, ctx, vp.w, vp.h, vp.mobile, false)
			live[vp.w] = dashEval[[]float64](t, ctx, edges)
		}
		s.stop()
		dashWaitFor(t, ctx, "the disconnected state", `document.getElementById("conn").dataset.state === "stale"`, 5*time.Second)
		for _, vp := range sizes {
			dashViewport(t, ctx, vp.w, vp.h, vp.mobile, false)
			if stale := dashEval[[]float64](t, ctx, edges); !slices.Equal(stale, live[vp.w]) {
				t.Errorf("at %d px the header's height and the page's top went from %v live to %v disconnected, want no shift", vp.w, live[vp.w], stale)
			}
		}
		if title := dashEval[string](t, ctx, `document.getElementById("conn").title`); !strings.HasPrefix(title, "disconnected — data may be stale (updated ") {
			t.Errorf("the connection line's title = %q, want the whole message", title)
		}
		dashViewport(t, ctx, 1280, 800, false, false)
		text := dashEval[string](t, ctx, `document.querySelector("#conn .conn-text").textContent`)
		if !strings.HasPrefix(text, "disconnected — data may be stale") {
			t.Errorf("connection line = %q", text)
		}
		countdowns := `document.querySelector("[data-testid=lease-row] [data-expires-at]").textContent`
		before := dashEval[string](t, ctx, countdowns)
		if err := chromedp.Do(ctx, chromedp.Sleep(2200*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if after := dashEval[string](t, ctx, countdowns); after != before {
			t.Errorf("countdowns went on while disconnected: %q → %q", before, after)
		}
		if got := dashEval[string](t, ctx, `document.getElementById("announce").textContent`); !strings.Contains(got, "Disconnected") {
			t.Errorf("announced %q, want the disconnection", got)
		}
		dashShot(t, ctx, shots, "overview-disconnected")
		s.start()
		dashWaitFor(t, ctx, "the page to be live again", `document.getElementById("conn").dataset.state === "live"`, 10*time.Second)
		if err := chromedp.Do(ctx, chromedp.Sleep(1500*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if after := dashEval[string](t, ctx, countdowns); after == before {
			t.Errorf("countdowns did not tick again after reconnecting: %q", after)
		}
		if !dashEval[bool](t, ctx, `window.__lkMarker === true`) {
			t.Errorf("the page was reloaded; want it recovered in place")
		}
		s.acquire("ticking-after-restart", "worker@host-q", time.Minute, "")
		dashWaitFor(t, ctx, "an event after the restart", `[...document.querySelectorAll("[data-testid=lease-link]")].some((a) => a.innerText === "ticking-after-restart")`, 8*time.Second)
	})

	t.Run("CloseToExpiryHighlighted", func(t *testing.T) {
		s.acquire("about-to-expire", "slow-worker@host-z", 5*time.Second, "")
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s.dashServer, "/?sort=expiry", false)
		if first := dashEval[string](t, ctx, `document.querySelector("[data-testid=lease-row] [data-testid=lease-link]").innerText`); first != "about-to-expire" {
			t.Errorf("first by soonest expiry = %q, want about-to-expire", first)
		}
		if soon := dashEval[string](t, ctx, `document.querySelector("[data-testid=lease-row]").dataset.soon`); soon != "false" {
			t.Errorf("with most of its ttl left, data-soon = %q, want false", soon)
		}
		// Less than a fifth of its ttl left: highlighted by the ticking script.
		dashWaitFor(t, ctx, "about-to-expire highlighted", `document.querySelector("[data-testid=lease-row]").dataset.soon === "true"`, 5*time.Second)
		if bg := dashEval[string](t, ctx, `getComputedStyle(document.querySelector("[data-testid=lease-row]")).backgroundColor`); bg == "rgba(0, 0, 0, 0)" {
			t.Errorf("the highlighted row has no background")
		}
	})

	t.Run("Screenshots", func(t *testing.T) {
		pages := []dashPage{
			{"overview", "/"}, {"lease", "/leases/billing-nightly"}, {"lease-revoked", "/leases/revoked-job"},
			{"rejections", "/rejections"}, {"resources", "/resources"}, {"resource", "/resources/invoices"},
			{"error-404", "/leases/never-used"},
		}
		dashScreenshots(t, browser, s.dashServer, shots, "oncall", pages)
	})
}

// dashPage names a page of the dashboard for screenshots.
type dashPage struct{ name, path string }

// dashScreenshots saves a screenshot of each page on a desktop and a phone, light and dark,
// as prefix-name-variant.png, and checks that the Content-Security-Policy blocked nothing.
func dashScreenshots(t *testing.T, browser context.Context, s *dashServer, shots, prefix string, pages []dashPage) {
	t.Helper()
	for _, v := range []struct {
		suffix       string
		w, h         int64
		mobile, dark bool
	}{{"desktop-light", 1280, 900, false, false}, {"desktop-dark", 1280, 900, false, true},
		{"phone-light", 390, 844, true, false}, {"phone-dark", 390, 844, true, true}} {
		for _, p := range pages {
			// A subtest each, so that its tab and watch stream close before the next: a
			// browser opens six connections to a host.
			t.Run(p.name+"-"+v.suffix, func(t *testing.T) {
				ctx := dashTab(t, browser)
				dashViewport(t, ctx, v.w, v.h, v.mobile, v.dark)
				dashOpen(t, ctx, s, p.path, false)
				dashShot(t, ctx, shots, prefix+"-"+p.name+"-"+v.suffix)
				if blocked := dashEval[[]string](t, ctx, `window.__lkBlocked`); len(blocked) > 0 {
					t.Errorf("on %s the Content-Security-Policy blocked %q", p.path, blocked)
				}
			})
		}
	}
}

// waiterCount is the waiters of name as the API says.
func (s *dashServer) waiterCount(name string) int {
	s.t.Helper()
	resp, body := s.do(http.MethodGet, "/v1/leases/"+name, nil, nil)
	if resp.StatusCode != http.StatusOK {
		return 0
	}
	i := strings.Index(body, `"waiters":`)
	if i < 0 {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimRight(strings.SplitN(body[i+len(`"waiters":`):], ",", 2)[0], "}\n"))
	return n
}
