package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/service/servicetest"

	"github.com/leasekeeper/leasekeeper/internal/browsertest"
)

// dashAxe is axe-core's script, installed from the npm registry by `npm ci --prefix
// scripts/axe` (CI does it). Without it the accessibility checks skip loudly, unless
// LEASEKEEPER_BROWSER_TESTS=required, where they fail.
func dashAxe(t *testing.T) string {
	t.Helper()
	path := filepath.Join("..", "scripts", "axe", "node_modules", "axe-core", "axe.min.js")
	b, err := os.ReadFile(path)
	if err != nil {
		msg := fmt.Sprintf("!!! ACCESSIBILITY CHECKS NOT RUN: no axe-core at %s (%v); install it with `npm ci --prefix scripts/axe` !!!", path, err)
		if os.Getenv("LEASEKEEPER_BROWSER_TESTS") == "required" {
			t.Fatal(msg + " (LEASEKEEPER_BROWSER_TESTS=required)")
		}
		t.Skip(msg)
	}
	return string(b)
}

// dashAxeRun runs axe-core's WCAG 2.x A and AA rules and best practices on the page in the tab
// and returns each violation as "rule: targets".
const dashAxeRun = `axe.run(document, {resultTypes: ["violations"]}).then((r) => r.violations.map((v) =>
  v.id + " (" + v.impact + "): " + v.nodes.slice(0, 4).map((n) => n.target.join(" ")).join(" | ")))`

// dashTriageState fills a live server as an on-call engineer finds it: many healthy leases, a
// pending handover, refused writes, a session and a semaphore.
func dashTriageState(t *testing.T, s *dashServer, healthy int) (session string) {
	t.Helper()
	for i := range healthy {
		s.acquire(fmt.Sprintf("batch-%02d-reconcile-inventory", i), fmt.Sprintf("worker-%d@host-%c", i%7, 'a'+i%5), time.Hour, `{"shard":`+fmt.Sprint(i)+`}`)
	}
	old := s.acquire("invoices-writer", "app@host-a", time.Minute, "")
	s.release("invoices-writer", old)
	long := s.acquire("billing-nightly", "cron@host-b", time.Hour, "")
	if resp, body := s.do(http.MethodPost, "/v1/leases/billing-nightly/handover", strings.NewReader(`{"to":"cron@host-c","reason":"rolling deployment of billing"}`),
		map[string]string{"Content-Type": "application/json"}); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("handover = %d %s", resp.StatusCode, body)
	}
	s.put("invoices", long.Token, "v1", map[string]string{"Lease-Name": "billing-nightly"})
	for range 3 {
		s.put("invoices", old.Token, "stale", nil)
	}
	for i := range 3 {
		s.acquireWith("gpu-pool", map[string]any{"holder": fmt.Sprintf("trainer-%d", i), "ttl_ms": 600000, "limit": 4})
	}
	resp, body := s.do(http.MethodPost, "/v1/sessions", strings.NewReader(`{"holder":"agent@host-s","ttl_ms":60000}`), map[string]string{"Content-Type": "application/json"})
	var ss struct {
		ID  string `json:"session_id"`
		Ref string `json:"session"`
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &ss) != nil {
		t.Fatalf("open a session = %d %s", resp.StatusCode, body)
	}
	s.acquireWith("agent-task", map[string]any{"holder": "agent@host-s", "ttl_ms": 0, "session_id": ss.ID})
	return ss.Ref
}

// dashWaitIn starts an acquire of name that waits in line until the test ends.
func dashWaitIn(t *testing.T, s *dashServer, name, holder string) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	wg.Go(func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/leases/"+name+"/acquire",
			strings.NewReader(`{"holder":"`+holder+`","ttl_ms":60000,"wait_ms":240000}`))
		req.Header.Set("Content-Type", "application/json")
		long := &http.Client{Transport: s.hc.Transport}
		if resp, err := long.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	for deadline := time.Now().Add(10 * time.Second); s.waiterCount(name) < 1; {
		if time.Now().After(deadline) {
			t.Fatalf("the acquire of %s never joined its line", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBrowserTriage: on a desk and on a phone, the overview's summary is the first thing under
// the title, the refused writes come before the long list of held leases, and a column header
// orders the held leases.
func TestBrowserTriage(t *testing.T) {
	browser := browsertest.Start(t)
	s := newDashLiveServer(t)
	dashTriageState(t, s, 40)
	dashWaitIn(t, s, "billing-nightly", "cron@host-c")
	shots := dashShots(t)
	for _, v := range []struct {
		name   string
		w, h   int64
		mobile bool
	}{{"desktop", 1280, 800, false}, {"phone", 390, 844, true}} {
		t.Run(v.name, func(t *testing.T) {
			ctx := dashTab(t, browser)
			dashViewport(t, ctx, v.w, v.h, v.mobile, false)
			dashOpen(t, ctx, s, "/", true)
			top := func(sel string) float64 {
				return dashEval[float64](t, ctx, `document.querySelector(`+fmt.Sprintf("%q", sel)+`).getBoundingClientRect().top + scrollY`)
			}
			summary, form, rejected, held := top("[data-testid=triage]"), top("[data-testid=search-form]"), top("#rejected-heading"), top("#held-heading")
			// On a desk the one-line search form may stand above it; on a phone the form is
			// several lines tall and comes after it.
			if summary > float64(v.h)/3 || v.mobile && summary > form {
				t.Errorf("the summary starts at y=%.0f (search form at %.0f), want it in the top third of the %d px screen (and above the form on a phone)", summary, form, v.h)
			}
			if rejected > held {
				t.Errorf("refused writes at y=%.0f, held leases at %.0f: want the refused writes first", rejected, held)
			}
			if got := dashEval[string](t, ctx, `document.querySelector("[data-testid=stat-handovers] .stat-n").textContent`); got != "1" {
				t.Errorf("pending handovers in the summary = %q, want 1", got)
			}
			dashShot(t, ctx, shots, "triage-overview-"+v.name)
			screen, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(shots, "triage-overview-"+v.name+"-screen.png"), screen, 0o644); err != nil {
				t.Fatal(err)
			}
			if !v.mobile {
				if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("[data-testid=sort-expiry] a")), chromedp.WaitVisible(chromedp.CSS(`[data-testid=sort-expiry][aria-sort=ascending]`))); err != nil {
					t.Fatalf("order by the time-left header: %v", err)
				}
				if u := dashEval[string](t, ctx, `location.search`); u != "?sort=expiry" {
					t.Errorf("after a click on the time-left header the page is %q, want ?sort=expiry", u)
				}
			}
		})
	}
}

// TestBrowserTriageScreenshots saves the pages this work changed, on a desk and a phone,
// light and dark.
func TestBrowserTriageScreenshots(t *testing.T) {
	browser := browsertest.Start(t)
	s := newDashLiveServer(t)
	dashTriageState(t, s, 5)
	dashScreenshots(t, browser, s, dashShots(t), "triage", []dashPage{{"lease-handover", "/leases/billing-nightly"}, {"keys", "/keys"}})
}

// TestBrowserAxe runs axe-core on every dashboard page, light and dark, signed in as an admin
// and as a reader scoped to some names, and on the sign-in page: no violation at all.
func TestBrowserAxe(t *testing.T) {
	axe := dashAxe(t)
	s := newDashLiveServer(t)
	ref := dashTriageState(t, s, 8) // enough rows for every kind of cell; axe-core is slow on long pages
	dashWaitIn(t, s, "billing-nightly", "cron@host-c")
	pages := []string{"/", "/?sort=expiry", "/leases/billing-nightly", "/leases/gpu-pool", "/leases/invoices-writer", "/rejections",
		"/resources", "/resources/invoices", "/sessions", "/sessions/" + ref, "/keys", "/leases/never-used"}
	reader := *s
	reader.key = servicetest.Key(t, s.store, auth.Reader, "billing-", "invoices")
	for _, who := range []struct {
		name string
		s    *dashServer
	}{{"admin", s}, {"reader", &reader}} {
		t.Run(who.name, func(t *testing.T) {
			browser := browsertest.Start(t)
			for _, dark := range []bool{false, true} {
				for _, path := range append([]string{"/signin"}, pages...) {
					t.Run(fmt.Sprintf("%s dark=%v", path, dark), func(t *testing.T) {
						// axe-core reads every node: on a busy machine a page takes it many seconds.
						ctx := dashTabWithin(t, browser, 2*time.Minute)
						dashViewport(t, ctx, 1280, 800, false, dark)
						if path == "/signin" {
							if err := chromedp.Do(ctx, chromedp.Navigate(who.s.url+"/signin"), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
								t.Fatal(err)
							}
						} else {
							dashOpen(t, ctx, who.s, path, false)
						}
						dashEval[bool](t, ctx, axe+";true")
						v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](dashAxeRun, chromedp.EvalAwaitPromise))
						if err != nil {
							t.Fatalf("run axe-core: %v", err)
						}
						for _, x := range v {
							t.Errorf("axe-core on %s: %s", path, x)
						}
					})
				}
			}
		})
	}
}

// TestBrowserExpiredLeaseLeavesHeld: once a held lease's expiry passes on the page's clock, its
// row leaves the held list at once, without waiting for the server's next update.
func TestBrowserExpiredLeaseLeavesHeld(t *testing.T) {
	browser := browsertest.Start(t)
	s := newDashLiveServer(t)
	s.acquire("jobs-a", "w1", time.Hour, "")
	s.acquire("jobs-b", "w2", time.Hour, "")
	ctx := dashTab(t, browser)
	dashOpen(t, ctx, s, "/", true)
	// Move jobs-a's expiry into the past on the page, as time passing would.
	dashEval[bool](t, ctx, `(() => { const row = [...document.querySelectorAll("[data-testid=lease-row]")].find((r) => r.textContent.includes("jobs-a"));
  row.querySelector("[data-expires-at]").dataset.expiresAt = new Date(Date.now() - 60000).toISOString(); return true; })()`)
	dashWaitFor(t, ctx, "jobs-a's row to leave the held list",
		`[...document.querySelectorAll("[data-testid=lease-row]")].filter((r) => !r.hidden).map((r) => r.textContent.includes("jobs-a") ? "a" : "b").join() === "b"`, 10*time.Second)
}
