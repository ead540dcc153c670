package dashboard_test

import (
	"net/http"
	"testing"
	"time"
)

// TestDashboardShared: a name held shared is one row of the overview, saying how many readers
// hold it, and the exclusive holder of a name readers take says it is the writer; a shared
// name's page says so too and lists each shared holder with its token.
func TestDashboardShared(t *testing.T) {
	s := newDashServer(t)
	a := s.acquireWith("cfg", map[string]any{"holder": "r1", "ttl_ms": 60000, "mode": "shared"})
	b := s.acquireWith("cfg", map[string]any{"holder": "r2", "ttl_ms": 60000, "mode": "shared"})
	s.acquire("plain", "w", time.Minute, "")
	// A name readers took, now held by a writer: its row says so.
	s.release("doc", s.acquireWith("doc", map[string]any{"holder": "r", "ttl_ms": 60000, "mode": "shared"}))
	s.acquire("doc", "editor", time.Minute, "")

	_, doc := s.page("/", http.StatusOK, nil)
	var names, writers []string
	for _, row := range dashByTestID(doc, "lease-row") {
		name := dashText(dashOne(t, row, "lease-link"))
		names = append(names, name)
		if len(dashByTestID(row, "writer")) > 0 {
			writers = append(writers, name)
		}
	}
	if len(names) != 3 || names[0] != "cfg" || names[1] != "doc" || names[2] != "plain" {
		t.Errorf("overview rows = %q, want cfg (its shared grants folded into one row), doc and plain", names)
	}
	if len(writers) != 1 || writers[0] != "doc" {
		t.Errorf("rows saying writer = %q, want doc alone (a plain lease has no readers to write for)", writers)
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
