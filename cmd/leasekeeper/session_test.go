package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/service/servicetest"
)

// lastEvent is the newest event of name as the API says: its type and the session it names.
func lastEvent(t *testing.T, srv, name string) (typ, session string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv+"/v1/leases/"+name+"/events?limit=1000", nil)
	req.Header.Set("Authorization", "Bearer "+servicetest.KeyOf(srv))
	resp, err := servicetest.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Events []struct {
			Type    string `json:"type"`
			Session string `json:"session"`
		} `json:"events"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Events) == 0 {
		t.Fatalf("events of %s: %v (%d events)", name, err, len(out.Events))
	}
	e := out.Events[len(out.Events)-1]
	return e.Type, e.Session
}

// TestLockSession: `lock --session-ttl` holds its lease under a session of its own, which the
// session's keepalive keeps past the session's ttl and whose close, on exit, releases it.
func TestLockSession(t *testing.T) {
	ctx := context.Background()
	t.Run("OKHeldBySessionThenClosed", func(t *testing.T) {
		srv := newTestServer(t)
		c := newAdminClient(t, srv)
		h := start(t, srv, "lock", "--session-ttl", "2s", "--holder", "me", "--json", "job")
		var g leaseJSON
		if err := jsonDecode(h.waitOutput(t, "}"), &g); err != nil || g.TTLMs != 2000 {
			t.Fatalf("lock --json printed %q (%v), want a grant of the session's 2 s", h.stdout.lines(), err)
		}
		time.Sleep(2500 * time.Millisecond) // past the session's ttl: renewed by the session
		if st, err := c.Get(ctx, "job"); err != nil || !st.Held || st.Token != g.Token {
			t.Fatalf("after the session's ttl: %+v, %v; want held with token %d", st, err, g.Token)
		}
		h.stop()
		if code := h.exit(t, 10*time.Second); code != 0 {
			t.Errorf("lock exit %d after the interrupt, want 0; stderr %q", code, h.stderr.lines())
		}
		if typ, ses := lastEvent(t, srv, "job"); typ != "released" || !strings.HasPrefix(ses, "ses_") {
			t.Errorf("after lock ended the last event is %q naming session %q, want released by closing its session", typ, ses)
		}
	})
	t.Run("UsageErrors", func(t *testing.T) {
		srv := newTestServer(t)
		for _, args := range [][]string{{"lock", "--ttl", "5s", "--session-ttl", "5s", "job"}, {"lock", "--session-ttl", "5", "job"}} {
			if _, errOut, code := cli(t, srv, args...); code != 2 {
				t.Errorf("%q: exit %d %q, want 2", args, code, errOut)
			}
		}
	})
}

// TestRunSession: `run --session-ttl` runs CMD while a session of its own holds the lease, and
// closes the session when CMD exits.
func TestRunSession(t *testing.T) {
	srv := newTestServer(t)
	out := filepath.Join(t.TempDir(), "out")
	_, errOut, code := cli(t, srv, "run", "--name", "job", "--session-ttl", "2s", "--", "sh", "-c", `sleep 2.5; echo "$LEASEKEEPER_FENCING_TOKEN" > "`+out+`"`)
	if code != 0 {
		t.Fatalf("run --session-ttl exit %d %q, want 0", code, errOut)
	}
	if b, err := os.ReadFile(out); err != nil || strings.TrimSpace(string(b)) == "" {
		t.Errorf("CMD wrote %q, %v; want its token", b, err)
	}
	// Held for longer than the session's ttl, and released only by the close.
	if typ, ses := lastEvent(t, srv, "job"); typ != "released" || !strings.HasPrefix(ses, "ses_") {
		t.Errorf("after run the last event is %q naming session %q, want released by closing its session", typ, ses)
	}
}
