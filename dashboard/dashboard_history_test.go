package dashboard_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLeasePageShowsTheRecentEnd: a lease renewed more often than one page of events holds
// still shows its newest events (and so its current state in the timeline), not its oldest.
func TestLeasePageShowsTheRecentEnd(t *testing.T) {
	s := newDashServer(t)
	l := s.acquire("busy", "w1", time.Minute, "")
	for range 1005 {
		s.clock.Advance(10 * time.Millisecond)
		if _, err := s.store.Renew(context.Background(), "busy", l.LeaseID, 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	s.clock.Advance(10 * time.Millisecond)
	s.release("busy", l)
	_, doc := s.page("/leases/busy", http.StatusOK, nil)
	rows := dashByTestID(doc, "event-row")
	if len(rows) == 0 {
		t.Fatal("no event rows")
	}
	if last := dashText(rows[len(rows)-1]); !strings.Contains(last, "released") {
		t.Errorf("last event row = %q, want the release (the newest event)", last)
	}
	if first := dashText(rows[0]); strings.Contains(first, "acquired") {
		t.Errorf("first event row = %q: the page starts at the oldest event, want the newest page", first)
	}
}
