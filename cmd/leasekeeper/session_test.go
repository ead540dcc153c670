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

	"github.com/leasekeeper/leasekeeper/lease"
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

// TestSharedSession: `session open` gives a session that lock, run and acquire share (env
// LEASEKEEPER_SESSION_ID): each holds its lease under it and keeps it alive while it runs;
// each gives back only its own lease when it ends, never the session; `session close` then
// releases what is still held under it.
func TestSharedSession(t *testing.T) {
	ctx := context.Background()
	srv := newTestServer(t)
	c := newAdminClient(t, srv)
	id, errOut, code := cli(t, srv, "session", "open", "--ttl", "2s", "--holder", "deploy-42")
	id = strings.TrimSpace(id)
	if code != 0 || !strings.HasPrefix(id, "lks_") {
		t.Fatalf("session open printed %q, exit %d %q; want a session ID", id, code, errOut)
	}
	env := map[string]string{"LEASEKEEPER_SERVER": srv, "LEASEKEEPER_API_KEY": servicetest.KeyOf(srv), "LEASEKEEPER_SESSION_ID": id}

	lock := startEnv(t, env, "lock", "--json", "a")
	var a leaseJSON
	if err := jsonDecode(lock.waitOutput(t, "}"), &a); err != nil || a.TTLMs != 2000 {
		t.Fatalf("lock under the session printed %q (%v), want a grant of the session's 2 s", lock.stdout.lines(), err)
	}
	aSession := lease.SessionRef(lease.HashID(id)) // its public name, which events show

	// run shares it: CMD outlives the session's ttl, kept alive by both processes.
	out := filepath.Join(t.TempDir(), "out")
	if _, errOut, code := cliEnv(t, env, "run", "--name", "b", "--", "sh", "-c", `sleep 2.5; echo "$LEASEKEEPER_FENCING_TOKEN" > "`+out+`"`); code != 0 {
		t.Fatalf("run under the session: exit %d %q, want 0", code, errOut)
	}
	if b, err := os.ReadFile(out); err != nil || strings.TrimSpace(string(b)) == "" {
		t.Errorf("CMD wrote %q, %v; want its token", b, err)
	}
	if typ, ses := lastEvent(t, srv, "b"); typ != "released" || ses != aSession || !strings.HasPrefix(ses, "ses_") {
		t.Errorf("after run, b's last event is %q naming session %q; want released under the shared session %q", typ, ses, aSession)
	}
	// run gave back its own lease only: lock's is held, and stays held past another ttl.
	time.Sleep(2500 * time.Millisecond)
	if st, err := c.Get(ctx, "a"); err != nil || !st.Held || st.Token != a.Token {
		t.Fatalf("a after run ended and a ttl passed: %+v, %v; want still held by lock (token %d)", st, err, a.Token)
	}

	// A one-shot acquire under the session: the lease lives as long as the session.
	var cj leaseJSON
	if got, errOut, code := cliEnv(t, env, "acquire", "--json", "c"); code != 0 || jsonDecode(got, &cj) != nil {
		t.Fatalf("acquire under the session: exit %d %q %q", code, got, errOut)
	}

	lock.stop()
	if code := lock.exit(t, 10*time.Second); code != 0 {
		t.Errorf("lock exit %d after the interrupt, want 0; stderr %q", code, lock.stderr.lines())
	}
	if typ, _ := lastEvent(t, srv, "a"); typ != "released" {
		t.Errorf("after lock ended, a's last event is %q, want released", typ)
	}
	if st, err := c.Get(ctx, "c"); err != nil || !st.Held {
		t.Fatalf("c after lock ended: %+v, %v; want held (the session is not closed by a process that shared it)", st, err)
	}
	got, errOut, code := cliEnv(t, env, "session", "close")
	if code != 0 || !strings.Contains(got, "released 1 leases") {
		t.Fatalf("session close printed %q, exit %d %q; want 1 lease released", got, code, errOut)
	}
	if typ, ses := lastEvent(t, srv, "c"); typ != "released" || ses != aSession {
		t.Errorf("after session close, c's last event is %q naming %q, want released by closing %s", typ, ses, aSession)
	}
	// The closed session is no one's to hold leases under any more.
	if _, errOut, code := cliEnv(t, env, "lock", "d"); code != 1 || !strings.Contains(errOut, "session lost") {
		t.Errorf("lock under the closed session: exit %d %q, want 1 and session lost", code, errOut)
	}
}

// TestSharedSessionUsageErrors: a shared session does not go with a session or a ttl of the
// command's own; session close needs a session; unknown subcommands and arguments are refused.
func TestSharedSessionUsageErrors(t *testing.T) {
	srv := newTestServer(t)
	env := map[string]string{"LEASEKEEPER_SERVER": srv, "LEASEKEEPER_API_KEY": servicetest.KeyOf(srv), "LEASEKEEPER_SESSION_ID": "lks_whatever"}
	noID := map[string]string{"LEASEKEEPER_SERVER": srv, "LEASEKEEPER_API_KEY": servicetest.KeyOf(srv)}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  map[string]string
		args []string
	}{
		{env, []string{"lock", "--session-ttl", "5s", "job"}},
		{env, []string{"lock", "--ttl", "5s", "job"}},
		{env, []string{"acquire", "--ttl", "5s", "job"}},
		{env, []string{"run", "--name", "job", "--ttl", "5s", "--", "true"}},
		{noID, []string{"session", "close"}},
		{noID, []string{"session"}},
		{noID, []string{"session", "list"}},
		{noID, []string{"session", "open", "extra"}},
		{noID, []string{"session", "open", "--ttl", "30"}},
		{noID, []string{"lock", "--session-id-file", empty, "job"}},
	} {
		if _, errOut, code := cliEnv(t, tc.env, tc.args...); code != 2 {
			t.Errorf("%q: exit %d %q, want 2", tc.args, code, errOut)
		}
	}
	// An ID that is no session's: refused by the server, nothing held.
	if _, errOut, code := cliEnv(t, env, "lock", "job"); code != 1 || !strings.Contains(errOut, "session lost") {
		t.Errorf("lock under an unknown session: exit %d %q, want 1 and session lost", code, errOut)
	}
}
