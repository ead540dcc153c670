package dashboard_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/browsertest"
	"github.com/leasekeeper/leasekeeper/lease"
)

// dashAligned measures, for each element matching sel, how far the words right before the
// relative time in it ("waiting since", "ended") are from the time's line: 0 when they share it.
const dashAligned = `((sel) => [...document.querySelectorAll(sel)].map((el) => {
  const time = el.querySelector("time[data-rel]");
  const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  let before = null;
  while (walk.nextNode()) {
    const n = walk.currentNode;
    if (!(n.compareDocumentPosition(time) & Node.DOCUMENT_POSITION_FOLLOWING)) break;
    if (n.textContent.trim() !== "") before = n;
  }
  const r = document.createRange();
  r.selectNodeContents(before);
  const rects = r.getClientRects();
  return Math.abs(rects[rects.length - 1].top - time.getBoundingClientRect().top);
}))`

// dashMidWord lists the line breaks inside the text of the elements matching sel that do
// not follow a separator (- . _ : / # @) or a space, as "text: before|after".
const dashMidWord = `((sel) => {
  const bad = [];
  for (const el of document.querySelectorAll(sel)) {
    const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    let prev = null, prevTop = null;
    while (walk.nextNode()) {
      const n = walk.currentNode;
      for (let i = 0; i < n.length; i++) {
        const r = document.createRange();
        r.setStart(n, i); r.setEnd(n, i + 1);
        const rect = r.getClientRects()[0];
        if (!rect || n.data[i].trim() === "") { prev = n.data[i]; continue; }
        if (prevTop !== null && rect.top > prevTop + 2 && !/[-._:\/#@\s]/.test(prev)) bad.push(el.textContent.trim() + ": " + prev + "|" + n.data[i]);
        prev = n.data[i]; prevTop = rect.top;
      }
    }
  }
  return bad;
})`

// TestBrowserSmallFaults: on a desk and on a phone, a held lease late to renew keeps each copy
// button beside its value (not under the "renewal late" badge), "waiting since" and a
// session's "ended" sit on the line of their time, names wrap only after a separator, and the
// timeline says it scrolls where it does not fit.
func TestBrowserSmallFaults(t *testing.T) {
	browser := browsertest.Start(t)
	clock := lease.NewFakeClock(time.Now())
	s, _ := newServiceServer(t, clock, nil)
	s.acquire("renewal-late-nightly-billing-export", "worker-7@host-with-a-rather-long-name.eu-west-1.example", 10*time.Second, "")
	clock.Advance(6 * time.Second)
	dashWaitIn(t, s, "renewal-late-nightly-billing-export", "standby-worker@host-w")
	ss := s.openSession("agent@host-s", time.Minute)
	s.acquireWith("agent-task", map[string]any{"holder": "agent@host-s", "ttl_ms": 0, "session_id": ss.ID})
	s.closeSession(ss)
	// A refused write with long names in every column.
	const resource, name = "orders-database-primary.eu-west-1.replica-set-7", "nightly-reconciliation-of-customer-ledgers"
	old := s.acquire(name, "reconciler@worker_host_with_a_rather_long_name.internal.example", time.Minute, "")
	s.release(name, old)
	cur := s.acquire(name, "reconciler@worker_host_with_a_rather_long_name.internal.example", time.Minute, "")
	s.put(resource, cur.Token, "new", nil)
	s.put(resource, old.Token, "stale", map[string]string{"Lease-Name": name})
	shots := dashShots(t)

	for _, v := range []struct {
		name   string
		w, h   int64
		mobile bool
	}{{"desktop", 1280, 800, false}, {"phone", 390, 844, true}} {
		t.Run(v.name, func(t *testing.T) {
			ctx := dashTab(t, browser)
			dashViewport(t, ctx, v.w, v.h, v.mobile, false)
			dashOpen(t, ctx, s, "/", false)
			// A name and a holder (with the badge after it): each copy button on the last line of
			// its value, not on a line of its own.
			for _, c := range []struct{ cell, value string }{{"name-cell", "lease-link"}, {"holder-cell", "holder"}} {
				got := dashEval[[]float64](t, ctx, fmt.Sprintf(`(() => {
				  const cell = document.querySelector("[data-testid=lease-row] [data-testid=%s]");
				  const v = [...cell.querySelector("[data-testid=%s]").getClientRects()].pop();
				  const b = cell.querySelector("button.copy").getBoundingClientRect();
				  return [v.top, v.bottom, (b.top + b.bottom) / 2, b.width];
				})()`, c.cell, c.value))
				if got[3] == 0 {
					t.Fatalf("the %s's copy button is not shown", c.cell)
				}
				if got[2] < got[0] || got[2] > got[1] {
					t.Errorf("in the %s the copy button's middle is at y=%.0f, off its value's last line (%.0f–%.0f)", c.cell, got[2], got[0], got[1])
				}
			}
			dashShot(t, ctx, shots, "faults-overview-"+v.name)

			dashOpen(t, ctx, s, "/leases/renewal-late-nightly-billing-export", false)
			if off := dashEval[[]float64](t, ctx, dashAligned+`("[data-testid=waiter]")`); len(off) != 1 || off[0] > 1 {
				t.Errorf("waiting since: its words are %v px off its time, want on one line", off)
			}
			hint := dashEval[bool](t, ctx, `document.querySelector("[data-testid=timeline-scroll-hint]").offsetParent !== null`)
			fits := dashEval[bool](t, ctx, `(() => { const w = document.querySelector(".svg-wrap"); return w.scrollWidth <= w.clientWidth; })()`)
			if hint == fits {
				t.Errorf("the timeline fits %v and its scroll hint shows %v: want the hint exactly when it scrolls", fits, hint)
			}
			dashShot(t, ctx, shots, "faults-lease-"+v.name)

			dashOpen(t, ctx, s, "/sessions/"+ss.Ref, false)
			if off := dashEval[[]float64](t, ctx, dashAligned+`("[data-testid=session-lease] td[data-label='Time left']")`); len(off) != 1 || off[0] > 1 {
				t.Errorf("ended: its word is %v px off its time, want on one line", off)
			}
			dashShot(t, ctx, shots, "faults-session-"+v.name)

			dashOpen(t, ctx, s, "/rejections", false)
			if bad := dashEval[[]string](t, ctx, dashMidWord+`("[data-testid=rejection-row] :is([data-testid=resource-link], [data-testid=lease-link], td[data-label=Holder], [data-testid=rejection-key])")`); len(bad) > 0 {
				t.Errorf("names broken inside a word: %q", bad)
			}
			dashShot(t, ctx, shots, "faults-rejections-"+v.name)
		})
	}
}
