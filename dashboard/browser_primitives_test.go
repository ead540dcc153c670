package dashboard_test

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/browsertest"
)

// TestBrowserPrimitives drives the views of semaphores, sessions and restart stretches in
// headless Chromium, against a server assembled as `leasekeeper serve` assembles it, started
// on a database where a grant waits to be stretched.
func TestBrowserPrimitives(t *testing.T) {
	browser := browsertest.Start(t)
	path := filepath.Join(t.TempDir(), "leasekeeper.db")
	stretchedDB(t, path, "stretched-job", "w-old@host-a", time.Now())
	svc, st := newServiceAt(t, nil, nil, path)
	s := dashServe(t, svc.Handler, st, nil)
	shots := dashShots(t)

	a := s.acquireWith("worker-pool", map[string]any{"holder": "pool-worker-1@host-a", "ttl_ms": 600000, "limit": 3})
	b := s.acquireWith("worker-pool", map[string]any{"holder": "pool-worker-2@host-b", "ttl_ms": 300000, "limit": 3, "lock_delay_ms": 5000})
	kept := s.openSession("deploy-agent@host-k.eu-west-1.compute.internal", 10*time.Minute)
	for _, name := range []string{"search-index-rebuild-for-the-european-catalogue", "mail-queue"} {
		s.acquireWith(name, map[string]any{"holder": "deploy-agent@host-k", "ttl_ms": 0, "session_id": kept.ID})
	}
	keptPath := "/sessions/" + kept.Ref

	t.Run("SemaphoreSlots", func(t *testing.T) {
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s, "/", true)
		row := `[...document.querySelectorAll("[data-testid=lease-row]")].filter((r) => r.querySelector("[data-testid=lease-link]").textContent === "worker-pool")`
		if n := dashEval[int](t, ctx, row+`.length`); n != 1 {
			t.Fatalf("the overview has %d rows of worker-pool, want one", n)
		}
		if got := dashEval[string](t, ctx, row+`[0].querySelector("[data-testid=slots-held]").textContent`); got != "2/3 slots held" {
			t.Errorf("worker-pool's row says %q, want 2/3 slots held", got)
		}
		if got := dashEval[string](t, ctx, row+`[0].querySelector("[data-testid=slots-held]").getAttribute("href")`); got != "/leases/worker-pool" {
			t.Errorf("the row links %q, want /leases/worker-pool", got)
		}
		// A third holder: the overview follows it live.
		s.acquireWith("worker-pool", map[string]any{"holder": "pool-worker-3@host-c", "ttl_ms": 60000, "limit": 3})
		dashWaitFor(t, ctx, "3/3 on the overview", row+`[0].querySelector("[data-testid=slots-held]").textContent === "3/3 slots held"`, 5*time.Second)

		dashOpen(t, ctx, s, "/leases/worker-pool", true)
		slots := dashEval[[]string](t, ctx, `[...document.querySelectorAll("[data-testid=slot-row]")].map((r) =>
		  r.querySelector("[data-testid=slot-holder]").textContent + " " + r.querySelector("[data-testid=slot-token]").textContent)`)
		want := []string{"pool-worker-1@host-a " + strconv.FormatInt(a.Token, 10), "pool-worker-2@host-b " + strconv.FormatInt(b.Token, 10)}
		if len(slots) != 3 || slots[0] != want[0] || slots[1] != want[1] {
			t.Errorf("slots = %q, want %q then the third holder", slots, want)
		}
		// Each slot's grant on a lane of its own: three bars at three heights, none covering another.
		if ys := dashEval[[]float64](t, ctx, `[...document.querySelectorAll("svg[data-testid=timeline] .tl-bar")].map((b) => b.getBoundingClientRect().top)`); len(ys) != 3 || ys[0] >= ys[1] || ys[1] >= ys[2] {
			t.Errorf("the slots' bars are at heights %v, want three lanes, one per slot", ys)
		}
		if overlaps := dashEval[[]string](t, ctx, dashTextOverlaps); len(overlaps) > 0 {
			t.Errorf("texts of the semaphore's timeline overlap: %q", overlaps)
		}
		if got := dashEval[string](t, ctx, `document.querySelectorAll("[data-testid=slot-row]")[1].innerText`); !strings.Contains(got, "5 s") {
			t.Errorf("slot 1 = %q, want its lock delay of 5 s", got)
		}
	})

	t.Run("SessionCloseEndsLeasesLive", func(t *testing.T) {
		ss := s.openSession("batch@host-s", time.Minute)
		for _, name := range []string{"batch-a", "batch-b"} {
			s.acquireWith(name, map[string]any{"holder": "batch@host-s", "ttl_ms": 0, "session_id": ss.ID})
		}
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s, "/leases/batch-a", false)
		if got := dashEval[string](t, ctx, `document.querySelector("[data-testid=lease-session] a").getAttribute("href")`); got != "/sessions/"+ss.Ref {
			t.Errorf("batch-a's session link = %q, want /sessions/%s", got, ss.Ref)
		}
		dashOpen(t, ctx, s, "/sessions/"+ss.Ref, true)
		states := `[...document.querySelectorAll("[data-testid=session-lease]")].map((r) =>
		  r.querySelector("[data-testid=lease-link]").textContent + " " + r.querySelector("[data-testid=lease-state]").textContent.trim()).join(", ")`
		if got := dashEval[string](t, ctx, states); got != "batch-a held, batch-b held" {
			t.Fatalf("the session's leases = %q, want both held", got)
		}
		if got := dashEval[string](t, ctx, `document.querySelector("[data-testid=session-holder]").textContent`); got != "batch@host-s" {
			t.Errorf("holder = %q", got)
		}
		s.closeSession(ss)
		dashWaitFor(t, ctx, "both leases released on the page", states+` === "batch-a released, batch-b released"`, 5*time.Second)
		if got := dashEval[string](t, ctx, `document.querySelector("[data-testid=state]").textContent`); got != "closed" {
			t.Errorf("after the close the session is %q, want closed", got)
		}
	})

	t.Run("StretchedGrantMarked", func(t *testing.T) {
		ctx := dashTab(t, browser)
		dashOpen(t, ctx, s, "/leases/stretched-job", false)
		title := dashEval[string](t, ctx, `(document.querySelector("svg[data-testid=timeline] [data-testid=stretch] title") || {}).textContent || ""`)
		// 30 s plus however long the server took to start after the grant was written: seconds
		// on a loaded machine.
		var n float64
		if m := regexp.MustCompile(`a server restart stretched this grant by ([0-9.]+) s$`).FindStringSubmatch(title); m != nil {
			n, _ = strconv.ParseFloat(m[1], 64)
		}
		if n < 30 || n >= 60 {
			t.Errorf("the timeline's stretch mark says %q, want 30 s or a little more", title)
		}
		if w := dashEval[float64](t, ctx, `document.querySelector("svg[data-testid=timeline] [data-testid=stretch]").getBoundingClientRect().width`); w < 3 {
			t.Errorf("the stretch mark is %.1f px wide: not visible", w)
		}
		if !dashEval[bool](t, ctx, `getComputedStyle(document.querySelector("[data-testid=legend-stretch]")).display !== "none"`) {
			t.Errorf("no legend entry for the stretch")
		}
		dashOpen(t, ctx, s, "/leases/mail-queue", false)
		if n := dashEval[int](t, ctx, `document.querySelectorAll("[data-testid=stretch]").length`); n != 0 {
			t.Errorf("a grant no restart stretched has %d marks", n)
		}
	})

	pages := []dashPage{
		{"overview", "/"}, {"semaphore", "/leases/worker-pool"}, {"session", keptPath}, {"stretched", "/leases/stretched-job"},
	}

	t.Run("NoOverflow", func(t *testing.T) {
		keys := `["name-cell","holder-cell","left-cell","token-cell","slot-holder","slot-token","session-link","session-name","token"]`
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

	t.Run("Screenshots", func(t *testing.T) { dashScreenshots(t, browser, s, shots, "primitives", pages) })
}
