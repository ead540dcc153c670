package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/handlers"

	"github.com/leasekeeper/leasekeeper/internal/browsertest"
)

// fetchResult is what the page's fetch saw: the status and the headers CORS let it read, or
// the error the browser raised.
type fetchResult struct {
	Status   int    `json:"status"`
	Token    string `json:"token"`
	ETag     string `json:"etag"`
	Location string `json:"location"`
	Retry    string `json:"retry"`
	Error    string `json:"error"`
}

// TestBrowserCORS runs fetch in Chromium from two pages on other origins than the API's: the
// listed one takes a lease, reads its Fencing-Token and makes a conditional fenced write; the
// other's requests never leave the browser (their preflight gets no CORS answer) and change
// nothing.
func TestBrowserCORS(t *testing.T) {
	browser := browsertest.Start(t)
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>an app elsewhere</title><p>app</p>`)
	})
	app, evil := httptest.NewServer(page), httptest.NewServer(page)
	t.Cleanup(app.Close)
	t.Cleanup(evil.Close)
	e := newEnvWith(t, func(cfg *handlers.Config) { cfg.CORSOrigins = []string{app.URL} })

	// call runs fetch(path, init) against the API in the tab, init being a JS object literal
	// whose headers get the API key.
	call := func(ctx context.Context, method, path, headers, body string) fetchResult {
		t.Helper()
		js := fmt.Sprintf(`fetch(%q, {method: %q, headers: Object.assign({"Authorization": "Bearer " + %q}, %s), body: %s})
  .then(async (r) => JSON.stringify({status: r.status, token: r.headers.get("Fencing-Token") || "",
    etag: r.headers.get("ETag") || "", location: r.headers.get("Location") || "", retry: r.headers.get("Retry-After") || ""}))
  .catch((e) => JSON.stringify({error: String(e)}))`, e.url+path, method, e.key, headers, body)
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("fetch %s %s in the page: %v", method, path, err)
		}
		var r fetchResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("fetch %s %s: %q: %v", method, path, out, err)
		}
		return r
	}
	acquire := `JSON.stringify({holder: "page", ttl_ms: 60000})`
	jsonCT := `{"Content-Type": "application/json", "Idempotency-Key": "browser-cors-0001"}`

	t.Run("ListedOrigin", func(t *testing.T) {
		ctx := tab(t, browser)
		if err := chromedp.Do(ctx, chromedp.Navigate(app.URL+"/")); err != nil {
			t.Fatal(err)
		}
		g := call(ctx, "POST", "/v1/leases/browser-job/acquire", jsonCT, acquire)
		if g.Error != "" || g.Status != http.StatusOK || g.Token == "" {
			t.Fatalf("acquire from %s = %+v, want 200 with a readable Fencing-Token", app.URL, g)
		}
		w := call(ctx, "PUT", "/v1/resources/browser-doc",
			fmt.Sprintf(`{"Content-Type": "text/plain", "Fencing-Token": %q, "Lease-Name": "browser-job", "If-None-Match": "*"}`, g.Token), `"v1"`)
		if w.Error != "" || w.Status != http.StatusCreated || w.ETag != `"1"` || w.Location != "/v1/resources/browser-doc" {
			t.Errorf("conditional fenced PUT from %s = %+v, want 201 with ETag \"1\" and Location readable", app.URL, w)
		}
		h := call(ctx, "POST", "/v1/leases/browser-job/acquire", `{"Content-Type": "application/json"}`, `JSON.stringify({holder: "other", ttl_ms: 60000})`)
		if h.Status != http.StatusConflict || h.Retry == "" {
			t.Errorf("acquire of a held lease from %s = %+v, want 409 with a readable Retry-After", app.URL, h)
		}
	})

	t.Run("ErrOtherOrigin", func(t *testing.T) {
		ctx := tab(t, browser)
		if err := chromedp.Do(ctx, chromedp.Navigate(evil.URL+"/")); err != nil {
			t.Fatal(err)
		}
		before := e.snapshot()
		if r := call(ctx, "POST", "/v1/leases/evil-job/acquire", jsonCT, acquire); r.Error == "" {
			t.Errorf("acquire from %s (not listed) = %+v, want the browser to refuse it", evil.URL, r)
		}
		if r := call(ctx, "GET", "/v1/leases", `{}`, `undefined`); r.Error == "" {
			t.Errorf("list from %s (not listed) = %+v, want the browser to keep the answer from the page", evil.URL, r)
		}
		if diff := cmp.Diff(before, e.snapshot()); diff != "" {
			t.Errorf("a page on an unlisted origin changed the data (-before +after):\n%s", diff)
		}
	})
}

// tab opens a tab in the browser for one subtest, bounded to 20 s.
func tab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	tab, cancelTab := chromedp.NewContext(browser)
	t.Cleanup(cancelTab)
	ctx, cancel := context.WithTimeout(tab, 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
