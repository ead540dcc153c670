package web

import (
	"strings"
	"testing"
	"time"
)

// TestOverviewRowMarks: a held row whose expiry a restart stretched says so and by how much;
// one with a pending handover shows its target, reason and age; others show neither.
func TestOverviewRowMarks(t *testing.T) {
	o := overview()
	o.Held[0].Stretched = 8 * time.Second
	o.Held[0].Handover = &Handover{Name: o.Held[0].Name, To: "worker-2@host-b", Reason: "deploy", At: at("-2m")}
	doc := parse(t, OverviewPage(site, o))
	rows := byTestID(doc, "lease-row")
	if got := text(one(t, rows[0], "stretch-mark")); got != "restart +8 s" {
		t.Errorf("stretch mark = %q, want %q", got, "restart +8 s")
	}
	if got := text(one(t, rows[0], "handover-badge")); !strings.Contains(got, "to worker-2@host-b") || !strings.Contains(got, "deploy") || !strings.Contains(got, "2 min ago") {
		t.Errorf("handover badge = %q, want its target, reason and age", got)
	}
	if n := len(byTestID(rows[1], "stretch-mark")) + len(byTestID(rows[1], "handover-badge")); n != 0 {
		t.Errorf("the second row has %d marks, want none", n)
	}
}
