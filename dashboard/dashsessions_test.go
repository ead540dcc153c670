package dashboard_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
)

// TestDashboardSessions: the sessions page lists the open sessions (all of them with ?all=1),
// each linking its page, whose breadcrumb links back; a scoped key sees only the ones it
// opened; a bad cursor is a 400 page.
func TestDashboardSessions(t *testing.T) {
	s := newDashServer(t)
	writer := dashBearer(servicetest.Key(t, s.store, auth.Writer, "jobs-"))
	a := s.openSession("agent@host-a", time.Minute).Ref
	c := s.openSession("agent@host-b", time.Minute)
	s.closeSession(c)
	closed := c.Ref
	resp, body := s.do(http.MethodPost, "/v1/sessions", strings.NewReader(`{"holder":"agent@host-c","ttl_ms":60000}`),
		map[string]string{"Content-Type": "application/json", "Authorization": writer["Authorization"]})
	var ss dashSession
	if resp.StatusCode != http.StatusCreated || json.Unmarshal([]byte(body), &ss) != nil {
		t.Fatalf("open a session as the writer = %d %s", resp.StatusCode, body)
	}
	mine := ss.Ref
	refs := func(path string, header map[string]string) []string {
		t.Helper()
		_, doc := s.page(path, http.StatusOK, header)
		var out []string
		for _, l := range dashByTestID(doc, "session-link") {
			out = append(out, strings.TrimSpace(dashText(l)))
		}
		slices.Sort(out)
		return out
	}
	sorted := func(xs ...string) []string { slices.Sort(xs); return xs }
	if got, want := refs("/sessions", nil), sorted(a, mine); !slices.Equal(got, want) {
		t.Errorf("open sessions = %v, want %v", got, want)
	}
	if got, want := refs("/sessions?all=1", nil), sorted(a, closed, mine); !slices.Equal(got, want) {
		t.Errorf("all sessions = %v, want %v", got, want)
	}
	if got := refs("/sessions?all=1", writer); !slices.Equal(got, []string{mine}) {
		t.Errorf("a jobs- writer's sessions = %v, want only its own %s", got, mine)
	}
	_, doc := s.page("/sessions/"+a, http.StatusOK, nil)
	if href := dashAttr(dashOne(t, doc, "sessions-crumb"), "href"); href != "/sessions" {
		t.Errorf("a session page's breadcrumb links %q, want /sessions", href)
	}
	s.page("/sessions?cursor=!!", http.StatusBadRequest, nil)
}
