package dashboard_test

import (
	"net/http"
	"testing"
	"time"
)

// TestDashboardShared: a name held shared is one row of the overview, saying how many readers
// hold it; its page says so too and lists each shared holder with its token.
func TestDashboardShared(t *testing.T) {
	s := newDashServer(t)
	a := s.acquireWith("cfg", map[string]any{"holder": "r1", "ttl_ms": 60000, "mode": "shared"})
	b := s.acquireWith("cfg", map[string]any{"holder": "r2", "ttl_ms": 60000, "mode": "shared"})
	s.acquire("plain", "w", time.Minute, "")

	_, doc := s.page("/", http.StatusOK, nil)
	var names []string
	for _, row := range dashByTestID(doc, "lease-row") {
		names = append(names, dashText(dashOne(t, row, "lease-link")))
	}
	if len(names) != 2 || names[0] != "cfg" || names[1] != "plain" {
		t.Errorf("overview rows = %q, want cfg (its shared grants folded into one row) and plain", names)
	}
	if got := dashTexts(dashByTestID(doc, "readers")); len(got) != 1 || got[0] != "2 readers" {
		t.Errorf("cfg's row says %q, want 2 readers", got)
	}

	_, doc = s.page("/leases/cfg", http.StatusOK, nil)
	if got := dashText(dashOne(t, doc, "readers")); got != "2 readers" {
		t.Errorf("cfg's page says %q, want 2 readers", got)
	}
	wantSlotRows(t, doc, a, b)
}
