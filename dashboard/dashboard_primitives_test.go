package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// dashSession is a holder's session as POST /v1/sessions answers it.
type dashSession struct {
	ID  string `json:"session_id"`
	Ref string `json:"session"`
}

// openSession opens a holder's session through the JSON API.
func (s *dashServer) openSession(holder string, ttl time.Duration) dashSession {
	s.t.Helper()
	b, _ := json.Marshal(map[string]any{"holder": holder, "ttl_ms": ttl.Milliseconds()})
	resp, body := s.do(http.MethodPost, "/v1/sessions", bytes.NewReader(b), map[string]string{"Content-Type": "application/json"})
	var ss dashSession
	if resp.StatusCode != http.StatusCreated || json.Unmarshal([]byte(body), &ss) != nil {
		s.t.Fatalf("open a session = %d %s, want 201", resp.StatusCode, body)
	}
	return ss
}

// closeSession closes a holder's session through the JSON API.
func (s *dashServer) closeSession(ss dashSession) {
	s.t.Helper()
	resp, body := s.do(http.MethodPost, "/v1/sessions/"+ss.Ref+"/close", strings.NewReader(`{"session_id":"`+ss.ID+`"}`),
		map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("close session %s = %d %s, want 200", ss.Ref, resp.StatusCode, body)
	}
}

// stretchedDB prepares a database at path in which name is held by holder with a ttl of 60 s,
// granted 30 s before at: a server started at at stretches it by 30 s (invariant 5).
func stretchedDB(t *testing.T, path, name, holder string, at time.Time) {
	t.Helper()
	clock := lease.NewFakeClock(at.Add(-30 * time.Second))
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Acquire(context.Background(), store.AcquireParams{Name: name, Holder: holder, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDashboardPrimitives: the pages show a semaphore as one row with its slots, a lease held
// under a session with a link to the session's page, which lists its leases, and the grant a
// restart stretched.
func TestDashboardPrimitives(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leasekeeper.db")
	stretchedDB(t, path, "stretched-job", "w-old", dashT0)
	s := newDashServerAt(t, path)
	a := s.acquireWith("pool", map[string]any{"holder": "h1", "ttl_ms": 60000, "limit": 3})
	b := s.acquireWith("pool", map[string]any{"holder": "h2", "ttl_ms": 30000, "limit": 3, "lock_delay_ms": 2000})
	ss := s.openSession("proc-1", 20*time.Second)
	s.acquireWith("jobs-a", map[string]any{"holder": "proc-1", "ttl_ms": 0, "session_id": ss.ID})
	s.acquireWith("jobs-b", map[string]any{"holder": "proc-1", "ttl_ms": 0, "session_id": ss.ID})
	s.acquire("plain", "w", time.Minute, "")

	t.Run("OverviewSemaphoreRow", func(t *testing.T) {
		_, doc := s.page("/", http.StatusOK, nil)
		var names []string
		for _, row := range dashByTestID(doc, "lease-row") {
			names = append(names, dashText(dashOne(t, row, "lease-link")))
		}
		if got := strings.Join(names, " "); got != "jobs-a jobs-b plain pool stretched-job" {
			t.Errorf("overview rows = %q, want each slot folded into one row of pool", got)
		}
		if n := len(dashByTestID(doc, "more-matches")); n != 0 {
			t.Errorf("the overview says %d times that it shows only some matches, want never: the slots are one row", n)
		}
		if got := dashTexts(dashByTestID(doc, "slots-held")); len(got) != 1 || got[0] != "2/3 slots held" {
			t.Errorf("pool's row says %q, want 2/3 slots held", got)
		}
		if got := dashTexts(dashByTestID(doc, "session-link")); len(got) != 2 || got[0] != ss.Ref {
			t.Errorf("session links on the overview = %q, want %s on both of its leases", got, ss.Ref)
		}
	})

	t.Run("SemaphorePage", func(t *testing.T) {
		_, doc := s.page("/leases/pool", http.StatusOK, nil)
		if got := dashText(dashOne(t, doc, "slots-held")); got != "2/3 slots held" {
			t.Errorf("status = %q, want 2/3 slots held", got)
		}
		rows := wantSlotRows(t, doc, a, b)
		if got := dashText(rows[1]); !strings.Contains(got, "2 s") || !strings.Contains(got, "in 30 s") {
			t.Errorf("slot 1 = %q, want its lock delay of 2 s and 30 s left", got)
		}
		if n := len(dashByTestID(doc, "event-row")); n != 2 {
			t.Errorf("%d history rows, want the slots' 2 acquires", n)
		}
		if n := len(dashByTestID(doc, "revoke")); n != 0 {
			t.Errorf("a semaphore's page offers %d revoke forms, want none (they revoke one grant)", n)
		}
	})

	t.Run("SessionScope", func(t *testing.T) {
		bearer := func(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }
		_, doc := s.page("/sessions/"+ss.Ref, http.StatusOK, bearer(servicetest.Key(t, s.store, auth.Reader, "jobs-a")))
		if got := dashTexts(dashByTestID(doc, "lease-link")); strings.Join(got, " ") != "jobs-a" {
			t.Errorf("a reader of jobs-a sees the session's leases %q, want jobs-a alone", got)
		}
		if got := dashText(dashOne(t, doc, "session-held")); got != "1" {
			t.Errorf("a reader of jobs-a is told the session holds %s leases, want 1: the one it may see", got)
		}
		s.page("/sessions/"+ss.Ref, http.StatusNotFound, bearer(servicetest.Key(t, s.store, auth.Reader, "other-")))
	})

	t.Run("SessionPage", func(t *testing.T) {
		_, doc := s.page("/leases/jobs-a", http.StatusOK, nil)
		link := dashOne(t, doc, "session-link")
		if got := dashAttr(link, "href"); got != "/sessions/"+ss.Ref {
			t.Fatalf("jobs-a's session link = %q, want /sessions/%s", got, ss.Ref)
		}
		_, doc = s.page("/sessions/"+ss.Ref, http.StatusOK, nil)
		for id, want := range map[string]string{"session-holder": "proc-1", "session-ttl": "20 s", "session-held": "2", "state": "open"} {
			if got := dashText(dashOne(t, doc, id)); got != want {
				t.Errorf("%s = %q, want %q", id, got, want)
			}
		}
		if got := dashText(dashOne(t, doc, "session-left")); !strings.HasPrefix(got, "in 20 s") {
			t.Errorf("time left = %q, want in 20 s", got)
		}
		if got := dashTexts(dashByTestID(doc, "lease-link")); strings.Join(got, " ") != "jobs-a jobs-b" {
			t.Errorf("the session's leases = %q, want jobs-a jobs-b", got)
		}
		if strings.Contains(dashHTML(doc), ss.ID) {
			t.Errorf("the session's page shows its secret ID")
		}
		s.closeSession(ss)
		_, doc = s.page("/sessions/"+ss.Ref, http.StatusOK, nil)
		if got := dashText(dashOne(t, doc, "state")); got != "closed" {
			t.Errorf("after the close the state = %q, want closed", got)
		}
		if got := dashTexts(dashByTestID(doc, "lease-state")); strings.Join(got, " ") != "released released" {
			t.Errorf("after the close its leases = %q, want both released", got)
		}
	})

	t.Run("ErrSessionNotFound", func(t *testing.T) {
		for _, p := range []string{"/sessions/ses_0000000000000000", "/sessions/nope", "/sessions/ses_" + strings.Repeat("a", 80)} {
			s.page(p, http.StatusNotFound, map[string]string{"Accept": "text/html"})
		}
	})

	t.Run("StretchedGrantMarked", func(t *testing.T) {
		_, doc := s.page("/leases/stretched-job", http.StatusOK, nil)
		if got := dashText(dashOne(t, doc, "lease-stretched")); got != "+30 s" {
			t.Errorf("restart stretch = %q, want +30 s", got)
		}
		marks := dashByTestID(doc, "stretch")
		if len(marks) != 1 || !strings.Contains(dashText(marks[0]), "stretched this grant by 30 s") {
			t.Errorf("timeline stretch marks = %q, want one of 30 s", dashTexts(marks))
		}
		dashOne(t, doc, "legend-stretch")
		_, doc = s.page("/leases/plain", http.StatusOK, nil)
		if n := len(dashByTestID(doc, "stretch")) + len(dashByTestID(doc, "lease-stretched")); n != 0 {
			t.Errorf("a grant made after the restart shows %d stretch marks, want none", n)
		}
		// The overview marks the stretched lease's row, and only it.
		_, doc = s.page("/", http.StatusOK, nil)
		marked := map[string]string{}
		for _, row := range dashByTestID(doc, "lease-row") {
			for _, m := range dashByTestID(row, "stretch-mark") {
				marked[dashText(dashOne(t, row, "lease-link"))] = dashText(m)
			}
		}
		if diff := cmp.Diff(map[string]string{"stretched-job": "restart +30 s"}, marked); diff != "" {
			t.Errorf("overview stretch marks (-want +got):\n%s", diff)
		}
	})
}
