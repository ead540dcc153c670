package dashboard_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/browsertest"
)

// TestBrowserShared drives the views of shared (read) leases in headless Chromium: a name held
// by readers is one row of the overview saying how many (and follows a new reader live), the
// exclusive holder of a name readers take carries a visible writer label that a plain lease's
// holder does not, and the name's page says it is shared and lists each reader with its token.
func TestBrowserShared(t *testing.T) {
	browser := browsertest.Start(t)
	svc, st := newServiceAt(t, nil, nil, filepath.Join(t.TempDir(), "leasekeeper.db"))
	s := dashServe(t, svc.Handler, st, nil)
	shots := dashShots(t)

	r1 := s.acquireWith("app-config", map[string]any{"holder": "config-reader-1@host-a", "ttl_ms": 600000, "mode": "shared"})
	r2 := s.acquireWith("app-config", map[string]any{"holder": "config-reader-2@host-b", "ttl_ms": 600000, "mode": "shared"})
	s.release("schema", s.acquireWith("schema", map[string]any{"holder": "schema-reader@host-c", "ttl_ms": 60000, "mode": "shared"}))
	s.acquire("schema", "migrator@host-d", 10*time.Minute, "")
	s.acquire("nightly-report", "cron@host-e", 10*time.Minute, "")

	rowOf := func(name string) string {
		return `[...document.querySelectorAll("[data-testid=lease-row]")].filter((r) => r.querySelector("[data-testid=lease-link]").textContent === "` + name + `")`
	}
	visible := `((el) => !!el && getComputedStyle(el).display !== "none" && getComputedStyle(el).visibility !== "hidden" && el.getBoundingClientRect().width > 0)`

	t.Run("OverviewRows", func(t *testing.T) {
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s, "/", true)
		if n := dashEval[int](t, ctx, rowOf("app-config")+`.length`); n != 1 {
			t.Fatalf("the overview has %d rows of app-config, want one for all its readers", n)
		}
		readers := rowOf("app-config") + `[0].querySelector("[data-testid=readers]")`
		if got := dashEval[string](t, ctx, `(`+readers+` || {}).textContent || ""`); got != "2 readers" {
			t.Errorf("app-config's row says %q, want 2 readers", got)
		}
		if !dashEval[bool](t, ctx, visible+`(`+readers+`)`) {
			t.Errorf("app-config's readers label is not visible")
		}
		if got := dashEval[string](t, ctx, readers+`.getAttribute("href")`); got != "/leases/app-config" {
			t.Errorf("the readers label links %q, want /leases/app-config", got)
		}
		writer := `(` + rowOf("schema") + `[0] || document).querySelector("[data-testid=writer]")`
		if !dashEval[bool](t, ctx, visible+`(`+writer+`)`) || dashEval[string](t, ctx, `(`+writer+` || {}).textContent || ""`) != "writer" {
			t.Errorf("schema's row (held by its writer) shows no visible writer label")
		}
		if got := dashEval[string](t, ctx, `(`+rowOf("schema")+`[0].querySelector("[data-testid=holder]") || {}).textContent || ""`); got != "migrator@host-d" {
			t.Errorf("schema's row names holder %q, want migrator@host-d", got)
		}
		for _, name := range []string{"nightly-report", "app-config"} {
			if n := dashEval[int](t, ctx, rowOf(name)+`[0].querySelectorAll("[data-testid=writer]").length`); n != 0 {
				t.Errorf("%s's row has %d writer labels, want none", name, n)
			}
		}
		// A third reader: the row follows it live.
		s.acquireWith("app-config", map[string]any{"holder": "config-reader-3@host-f", "ttl_ms": 60000, "mode": "shared"})
		dashWaitFor(t, ctx, "3 readers on the overview", `(`+readers+` || {}).textContent === "3 readers"`, 10*time.Second)
		if n := dashEval[int](t, ctx, rowOf("app-config")+`.length`); n != 1 {
			t.Errorf("after a third reader the overview has %d rows of app-config, want one", n)
		}
	})

	t.Run("LeasePageListsReaders", func(t *testing.T) {
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s, "/leases/app-config", false)
		if got := dashEval[string](t, ctx, `(document.querySelector("[data-testid=readers]") || {}).textContent || ""`); got != "3 readers" {
			t.Errorf("app-config's page says %q, want 3 readers", got)
		}
		rows := dashEval[[]string](t, ctx, `[...document.querySelectorAll("[data-testid=slot-row]")].map((r) =>
		  r.querySelector("[data-testid=slot-holder]").textContent + " " + r.querySelector("[data-testid=slot-token]").textContent)`)
		want := []string{"config-reader-1@host-a " + strconv.FormatInt(r1.Token, 10), "config-reader-2@host-b " + strconv.FormatInt(r2.Token, 10)}
		if len(rows) != 3 || rows[0] != want[0] || rows[1] != want[1] || !strings.HasPrefix(rows[2], "config-reader-3@host-f ") {
			t.Errorf("reader rows = %q, want %q then the third reader", rows, want)
		}
		if !dashEval[bool](t, ctx, visible+`(document.querySelector("[data-testid=slot-row]"))`) {
			t.Errorf("the readers' rows are not visible")
		}
	})

	pages := []dashPage{{"overview", "/"}, {"shared", "/leases/app-config"}}
	t.Run("NoOverflow", func(t *testing.T) {
		keys := `["name-cell","holder-cell","left-cell","token-cell","slot-holder","slot-token"]`
		for _, vp := range []struct {
			w      int64
			mobile bool
		}{{1280, false}, {390, true}} {
			ctx := dashTab(t, browser)
			dashViewport(t, ctx, vp.w, 900, vp.mobile, false)
			for _, p := range pages {
				dashOpen(t, ctx, s, p.path, false)
				js := strings.NewReplacer("KEYS", keys, "WHOLE", strconv.FormatBool(vp.w >= 1280)).Replace(dashOverflow)
				if out := dashEval[[]string](t, ctx, js); len(out) > 0 {
					t.Errorf("at %d px, %s overflows: %q", vp.w, p.path, out)
				}
			}
		}
	})

	t.Run("Screenshots", func(t *testing.T) { dashScreenshots(t, browser, s, shots, "shared", pages) })
}
