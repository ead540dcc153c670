package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/leasekeeper/leasekeeper/internal/browsertest"
)

// dashInstrument runs in every page before its scripts: it counts the watch streams that
// opened and the fragment requests, so tests can wait for them instead of sleeping, and keeps
// what the page's Content-Security-Policy blocked.
const dashInstrument = `(() => {
  window.__lkOpen = 0;
  window.__lkFragments = 0;
  window.__lkBlocked = [];
  document.addEventListener("securitypolicyviolation", (e) => {
    window.__lkBlocked.push(e.effectiveDirective + " blocked " + (e.blockedURI || "inline"));
  });
  const ES = window.EventSource;
  window.EventSource = class extends ES {
    constructor(...args) {
      super(...args);
      this.addEventListener("open", () => { window.__lkOpen++; });
    }
  };
  const fetch0 = window.fetch;
  window.fetch = (...args) => fetch0(...args).then((r) => { window.__lkFragments++; return r; });
})();`

// dashTab opens a tab in the browser, instrumented with dashInstrument; the returned context
// bounds everything the subtest does in it. JavaScript exceptions in the tab fail the test.
func dashTab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	return dashTabWithin(t, browser, 20*time.Second)
}

// dashTabWithin is dashTab for a subtest that may take up to limit in its tab.
func dashTabWithin(t *testing.T, browser context.Context, limit time.Duration) context.Context {
	t.Helper()
	tab, cancelTab := chromedp.NewContext(browser)
	t.Cleanup(cancelTab)
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	ctx, cancel := context.WithTimeout(tab, limit)
	t.Cleanup(cancel)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: dashInstrument}); err != nil {
		t.Fatalf("instrument the tab: %v", err)
	}
	var mu sync.Mutex
	var exceptions []string
	events := chromedp.Events(ctx, cdpruntime.ExceptionThrown)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			d := ev.ExceptionDetails
			msg := fmt.Sprintf("%s at %s:%d:%d", d.Text, d.URL, d.LineNumber+1, d.ColumnNumber+1)
			if d.Exception != nil {
				msg += ": " + d.Exception.Description
			}
			mu.Lock()
			exceptions = append(exceptions, msg)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range exceptions {
			t.Errorf("JavaScript exception in the page: %s", e)
		}
	})
	return ctx
}

// dashEval evaluates a JavaScript expression in the tab and fails the test on an error.
func dashEval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// dashWaitFor polls a JavaScript condition until it is true or the timeout passes.
func dashWaitFor(t *testing.T, ctx context.Context, what, cond string, timeout time.Duration) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(50*time.Millisecond),
		chromedp.WithPollingTimeout(timeout))); err != nil {
		t.Fatalf("waiting %v for %s (%s): %v", timeout, what, cond, err)
	}
}

// dashWaitAcross is dashWaitFor for a condition that a navigation makes true: it evaluates
// the condition again in whatever document the tab shows, until it is true.
func dashWaitAcross(t *testing.T, ctx context.Context, what, cond string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		try, cancel := context.WithTimeout(ctx, time.Second)
		ok, err := chromedp.Run(try, chromedp.Evaluate[bool](cond))
		cancel()
		if err == nil && ok {
			return
		}
		last = err
		if err := chromedp.Do(ctx, chromedp.Sleep(50*time.Millisecond)); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	t.Fatalf("waiting %v for %s (%s): last error %v", timeout, what, cond, last)
}

// dashOpen navigates to a page of the server and waits until its watch stream is open and
// the refresh that may follow the opening is done, so that what happens next reaches the
// page as an event.
func dashOpen(t *testing.T, ctx context.Context, s *dashServer, path string, live bool) {
	t.Helper()
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url+path), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	if dashEval[bool](t, ctx, `document.querySelector("[data-testid=signin]") !== null`) {
		// Not signed in yet: the server sent the browser to the sign-in page, which comes back
		// to path with a session cookie.
		if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("signin-key"), s.key), chromedp.Click(chromedp.ID("signin-submit")),
			chromedp.WaitVisible(chromedp.CSS("[data-testid=whoami]"))); err != nil {
			t.Fatalf("sign in on the way to %s: %v", path, err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Logf("opening %s took %v", path, d)
	}
	if live {
		dashWaitFor(t, ctx, "the watch stream to open and the page to refresh", `window.__lkOpen > 0 && window.__lkFragments > 0`, 5*time.Second)
		if err := chromedp.Do(ctx, chromedp.Sleep(100*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
}

// dashShots is where the screenshots go: $LEASEKEEPER_SCREENSHOTS, or a new temporary folder
// that outlives the test so a person can look at them.
func dashShots(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LEASEKEEPER_SCREENSHOTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "leasekeeper-screenshots-"); err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// dashShot saves a full-page PNG screenshot of the tab.
func dashShot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

var dashSeconds = regexp.MustCompile(`^in (\d+) s$`)

// TestBrowser drives the dashboard in headless Chromium against a server assembled as
// `leasekeeper serve` assembles it.
func TestBrowser(t *testing.T) {
	browser := browsertest.Start(t)
	s := newDashLiveServer(t)
	shots := dashShots(t)

	t.Run("OverviewShowsLease", func(t *testing.T) {
		l := s.acquire("orders-db", "worker-1@host-a", time.Minute, `{"addr":"10.0.0.7:9000"}`)
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s, "/", false)
		rows := dashEval[[]string](t, ctx, `[...document.querySelectorAll("[data-testid=lease-row]")].map((r) => r.innerText)`)
		if len(rows) != 1 {
			t.Fatalf("lease rows = %q, want one", rows)
		}
		for _, want := range []string{"orders-db", "worker-1@host-a", strconv.FormatInt(l.Token, 10), `{"addr":"10.0.0.7:9000"}`} {
			if !strings.Contains(rows[0], want) {
				t.Errorf("lease row %q does not show %q", rows[0], want)
			}
		}
		if got := dashEval[string](t, ctx, `document.querySelector("[data-testid=held-count]").innerText`); got != "1" {
			t.Errorf("held count = %q, want 1", got)
		}
	})

	t.Run("CountdownTicks", func(t *testing.T) {
		s.acquire("countdown", "worker-1@host-a", time.Minute, "")
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s, "/leases/countdown", false)
		read := func() int {
			t.Helper()
			txt := dashEval[string](t, ctx, `document.querySelector("[data-testid=lease-state] [data-testid=countdown]").innerText`)
			m := dashSeconds.FindStringSubmatch(strings.TrimSpace(txt))
			if m == nil {
				t.Fatalf("countdown text = %q, want \"in N s\"", txt)
			}
			n, _ := strconv.Atoi(m[1])
			return n
		}
		first := read()
		if first < 50 || first > 60 {
			t.Errorf("countdown of a 60 s lease = in %d s", first)
		}
		if err := chromedp.Do(ctx, chromedp.Sleep(1500*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if second := read(); second >= first {
			t.Errorf("countdown went from in %d s to in %d s over 1.5 s, want it to decrease", first, second)
		}
	})

	t.Run("LeaseAppearsLive", func(t *testing.T) {
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s, "/", true)
		dashEval[bool](t, ctx, `window.__lkMarker = true`)
		l := s.acquire("late-arrival", "worker-9@host-z", time.Minute, "")
		dashWaitFor(t, ctx, "late-arrival to appear in the held table",
			`[...document.querySelectorAll("[data-testid=held-table] [data-testid=lease-link]")].some((a) => a.innerText === "late-arrival")`, 5*time.Second)
		if !dashEval[bool](t, ctx, `window.__lkMarker === true`) {
			t.Errorf("the page was reloaded; want the live region updated in place")
		}
		row := dashEval[string](t, ctx, `[...document.querySelectorAll("[data-testid=lease-row]")].find((r) => r.innerText.includes("late-arrival")).innerText`)
		if !strings.Contains(row, "worker-9@host-z") || !strings.Contains(row, strconv.FormatInt(l.Token, 10)) {
			t.Errorf("the new row = %q, want its holder and token", row)
		}
	})

	t.Run("RejectionAppearsLive", func(t *testing.T) {
		old := s.acquire("stale-lock", "paused-worker@host-a", time.Minute, "")
		s.release("stale-lock", old)
		cur := s.acquire("stale-lock", "new-worker@host-b", time.Minute, "")
		if got := s.put("ledger", cur.Token, "balance=100", map[string]string{"Lease-Name": "stale-lock"}); got != http.StatusCreated {
			t.Fatalf("PUT ledger with the current token = %d, want 201", got)
		}
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s, "/rejections", true)
		dashEval[bool](t, ctx, `window.__lkMarker = true`)
		// The paused worker wakes up and writes with its old token.
		if got := s.put("ledger", old.Token, "balance=90", map[string]string{"User-Agent": "paused-worker/1.0"}); got != http.StatusConflict {
			t.Fatalf("PUT ledger with the old token = %d, want 409", got)
		}
		dashWaitFor(t, ctx, "the rejection to appear",
			`[...document.querySelectorAll("[data-testid=presented-token]")].some((c) => c.dataset.token === "`+strconv.FormatInt(old.Token, 10)+`")`, 5*time.Second)
		if !dashEval[bool](t, ctx, `window.__lkMarker === true`) {
			t.Errorf("the page was reloaded; want the live region updated in place")
		}
		row := dashEval[string](t, ctx, `document.querySelector("[data-testid=rejection-row]").innerText`)
		for _, want := range []string{"ledger", "stale-lock", "paused-worker@host-a", "paused-worker/1.0", strconv.FormatInt(cur.Token, 10)} {
			if !strings.Contains(row, want) {
				t.Errorf("rejection row %q does not show %q", row, want)
			}
		}
	})

	t.Run("RevokeFromLeasePage", func(t *testing.T) {
		l := s.acquire("to-revoke", "stuck-worker@host-c", time.Minute, "")
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s, "/leases/to-revoke", true) // the refresh at the stream's opening must not swap the form mid-click
		// confirm() blocks the click that opens it, so the dialog is accepted from here.
		dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
		var mu sync.Mutex
		var messages []string
		go func() {
			for ev, err := range dialogs {
				if err != nil {
					return
				}
				mu.Lock()
				messages = append(messages, ev.Message)
				mu.Unlock()
				chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			}
		}()
		if err := chromedp.Do(ctx,
			chromedp.Click(chromedp.ID("revoke-summary")),
			chromedp.WaitVisible(chromedp.ID("revoke-submit")),
			chromedp.Click(chromedp.ID("revoke-submit")),
			chromedp.WaitVisible(chromedp.CSS("[data-testid=notice]")),
		); err != nil {
			t.Fatalf("revoke from the page: %v", err)
		}
		mu.Lock()
		if len(messages) != 1 || !strings.Contains(messages[0], "to-revoke") || !strings.Contains(messages[0], "stuck-worker@host-c") {
			t.Errorf("confirm dialogs = %q, want one naming the lease and its holder", messages)
		}
		mu.Unlock()
		if got := dashEval[string](t, ctx, `document.querySelector("[data-testid=notice]").innerText`); got != "Lease revoked." {
			t.Errorf("notice = %q, want Lease revoked.", got)
		}
		if got := dashEval[string](t, ctx, `document.querySelector("[data-testid=lease-state] [data-testid=state]").innerText`); got != "free" {
			t.Errorf("state after revoke = %q, want free", got)
		}
		if st := s.state("to-revoke"); st.Held || st.Token != l.Token {
			t.Errorf("API after revoke: held %v token %d, want held false, token %d", st.Held, st.Token, l.Token)
		}
		if types := s.eventTypes("to-revoke"); !slices.Equal(types, []string{"acquired", "revoked"}) {
			t.Errorf("events = %q, want acquired, revoked", types)
		}
	})

	t.Run("ManyPagesInOneTab", func(t *testing.T) {
		// Pages kept in the back-forward cache must not keep their watch streams: a browser
		// opens six connections to a host, so the seventh page would never load.
		s.acquire("wanderer", "worker-1@host-a", time.Minute, "")
		ctx := dashTab(t, browser)
		paths := []string{"/", "/rejections", "/leases/wanderer"}
		for i := range 9 { // ends at /leases/wanderer, after /rejections and /
			dashOpen(t, ctx, s, paths[i%len(paths)], false)
			dashWaitFor(t, ctx, "the watch stream to open", `window.__lkOpen > 0`, 5*time.Second)
		}
		// Back twice, to pages that may come from the back-forward cache (which fires no load
		// event, so history.back() and a poll rather than chromedp.NavigateBack): the overview
		// must be live again and show what happened meanwhile.
		for _, want := range []string{"/rejections", "/"} {
			dashEval[chromedp.Void](t, ctx, `history.back()`)
			dashWaitAcross(t, ctx, "going back to "+want, `location.pathname === "`+want+`" && document.readyState === "complete"`, 5*time.Second)
		}
		s.acquire("came-back", "worker-2@host-b", time.Minute, "")
		dashWaitAcross(t, ctx, "came-back to appear on the overview restored from history",
			`[...document.querySelectorAll("[data-testid=lease-link]")].some((a) => a.innerText === "came-back")`, 5*time.Second)
	})

	t.Run("CrossSitePostRefused", func(t *testing.T) {
		s.acquire("guarded", "worker-1", time.Minute, "")
		action, form := dashRevokeForm(t, s, "guarded")
		resp, _ := s.revoke(action, form, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("cross-site POST %s = %d, want 403", action, resp.StatusCode)
		}
		if !s.state("guarded").Held {
			t.Errorf("guarded is not held after a refused cross-site revoke")
		}
	})

	t.Run("PagesWorkUnderTheirPolicy", func(t *testing.T) {
		// The pages' policy allows no inline script or style: nothing they do may be blocked.
		s.acquire("policy", "worker-1@host-a", time.Minute, `{"addr":"10.0.0.7:9000"}`)
		ctx := dashTab(t, browser)
		for _, path := range []string{"/", "/leases/policy", "/rejections", "/resources", "/leases/never-used"} {
			dashOpen(t, ctx, s, path, path != "/resources" && path != "/leases/never-used")
			if blocked := dashEval[[]string](t, ctx, `window.__lkBlocked`); len(blocked) > 0 {
				t.Errorf("on %s the Content-Security-Policy blocked %q", path, blocked)
			}
		}
	})

	t.Run("StoredHTMLCannotRevoke", func(t *testing.T) {
		// Anyone who may write a resource stores a page whose script reads the lease page's
		// revoke form (its CSRF token included) and posts it, then lures an operator's browser
		// to the value's URL. Served from this origin and rendered, the script would be a
		// same-origin page of the dashboard.
		victim := s.acquire("victim", "worker-1@host-a", time.Minute, "")
		const attack = `<!doctype html><title>loading</title><script>
(async () => {
  try {
    const page = await (await fetch("/leases/victim")).text();
    const form = new DOMParser().parseFromString(page, "text/html").querySelector("form[data-testid=revoke-form]");
    const res = await fetch(form.getAttribute("action"), { method: "POST", body: new URLSearchParams(new FormData(form)) });
    document.title = "posted " + res.status;
  } catch (e) {
    document.title = "failed " + e;
  }
})();
</script>`
		if got := s.put("attack", victim.Token, attack, map[string]string{"Content-Type": "text/html; charset=utf-8"}); got != http.StatusCreated {
			t.Fatalf("PUT the attack page = %d, want 201", got)
		}
		ctx := dashTab(t, browser)
		if _, err := chromedp.Call(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{Behavior: cdpbrowser.SetDownloadBehaviorBehaviorDeny}); err != nil {
			t.Fatalf("deny downloads: %v", err)
		}
		// An attachment aborts the navigation; that is one of the outcomes wanted here.
		if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/v1/resources/attack")); err != nil {
			t.Logf("navigate to the stored page: %v", err)
		}
		// The script, had it run, needs a few milliseconds; give it far more.
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if st := s.state("victim"); !st.Held {
				title, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.title`))
				t.Fatalf("the stored page revoked the lease (page title %q); want it still held", title)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if types := s.eventTypes("victim"); !slices.Equal(types, []string{"acquired"}) {
			t.Errorf("victim's events = %q, want only acquired", types)
		}
	})

	t.Run("Screenshots", func(t *testing.T) {
		// Some history for the timeline: a release, an expiry with a lock delay, a rejected
		// stale write, and the current holder.
		a := s.acquire("billing-nightly", "cron@host-a", time.Second, "")
		s.release("billing-nightly", a)
		b := s.acquireWith("billing-nightly", map[string]any{"holder": "cron@host-b", "ttl_ms": 1000, "lock_delay_ms": 500})
		time.Sleep(1600 * time.Millisecond) // b expires and its lock delay passes
		c := s.acquire("billing-nightly", "cron@host-c", time.Minute, `{"run":"2026-11-29","shard":3}`)
		s.put("invoices", c.Token, "ok", map[string]string{"Lease-Name": "billing-nightly"})
		s.put("invoices", b.Token, "late", map[string]string{"User-Agent": "billing-job/2.1"})
		s.put("reports", c.Token, strings.Repeat("r", 3000), nil)
		for i, h := range []string{"indexer@host-d", "mailer@host-e", "leader-election@host-f"} {
			s.acquire([]string{"search-index", "mail-queue", "cluster-leader"}[i], h, time.Duration(20+i*15)*time.Second, "")
		}

		ctx := dashTab(t, browser)
		for _, p := range []struct{ name, path string }{
			{"overview", "/"},
			{"lease", "/leases/billing-nightly"},
			{"rejections", "/rejections"},
			{"resources", "/resources"},
			{"error-404", "/leases/never-used"},
		} {
			dashOpen(t, ctx, s, p.path, false)
			dashShot(t, ctx, shots, p.name)
		}
		dashOpen(t, ctx, s, "/leases/billing-nightly", true) // settled before clicking
		if n := dashEval[int](t, ctx, `document.querySelectorAll("svg[data-testid=timeline] [data-token]").length`); n != 3 {
			t.Errorf("timeline grants = %d, want 3", n)
		}
		want := "cron@host-c #" + strconv.FormatInt(c.Token, 10)
		if labels := dashEval[[]string](t, ctx, `[...document.querySelectorAll("svg[data-testid=timeline] .tl-label")].map((l) => l.textContent)`); !slices.Contains(labels, want) {
			t.Errorf("timeline labels = %q, want %q", labels, want)
		}
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("revoke-summary"))); err != nil {
			t.Fatal(err)
		}
		dashShot(t, ctx, shots, "lease-revoke-open")

		// A phone, in a tab of its own so that the emulation does not leak.
		phone := dashTab(t, browser)
		if err := chromedp.Do(phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2))); err != nil {
			t.Fatal(err)
		}
		dashOpen(t, phone, s, "/", false)
		dashShot(t, phone, shots, "overview-phone")
		if w := dashEval[int](t, phone, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("on a 390 px phone the overview is %d px wide; want no sideways scrolling of the page", w)
		}
		dashOpen(t, phone, s, "/leases/billing-nightly", false)
		dashShot(t, phone, shots, "lease-phone")

		dark := dashTab(t, browser)
		if _, err := chromedp.Call(dark, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct{ name, path string }{{"overview-dark", "/"}, {"lease-dark", "/leases/billing-nightly"}, {"rejections-dark", "/rejections"}} {
			dashOpen(t, dark, s, p.path, false)
			dashShot(t, dark, shots, p.name)
		}
		if bg := dashEval[string](t, dark, `getComputedStyle(document.body).backgroundColor`); bg == "rgb(255, 255, 255)" {
			t.Errorf("in dark mode the body's background is white")
		}
	})
}
