// Package browsertest starts the headless Chromium that the browser tests drive with chromedp.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium is Debian's Chromium; LEASEKEEPER_CHROMIUM overrides it.
const chromium = "/usr/bin/chromium"

// Start starts one headless Chromium for the whole test and returns a context that has
// started it; each subtest opens its own tab (chromedp.NewContext of it). Without Chromium the test
// skips loudly, unless LEASEKEEPER_BROWSER_TESTS=required (CI), where it fails.
func Start(t *testing.T) context.Context {
	t.Helper()
	path := chromium
	if p := os.Getenv("LEASEKEEPER_CHROMIUM"); p != "" {
		path = p
	}
	if _, err := exec.LookPath(path); err != nil {
		msg := fmt.Sprintf("!!! BROWSER TESTS NOT RUN: no Chromium at %s (%v); install it with `apt-get install -y chromium` !!!", path, err)
		if os.Getenv("LEASEKEEPER_BROWSER_TESTS") == "required" {
			t.Fatal(msg + " (LEASEKEEPER_BROWSER_TESTS=required)")
		}
		t.Skip(msg)
	}
	// The browser lives as long as the context of its first Run, so that context bounds it.
	life, cancelLife := context.WithTimeout(context.Background(), 5*time.Minute)
	alloc, cancelAlloc := chromedp.NewExecAllocator(life,
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		// Tabs opened next to each other must not have their timers throttled.
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancelLife()
	})
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start Chromium %s: %v", path, err)
	}
	return browser
}
