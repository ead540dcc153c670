package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// newTestServer starts a real leasekeeper, assembled as serve does (waiting line, watch,
// sweeper), on the real clock and returns its URL.
func newTestServer(t *testing.T) string {
	t.Helper()
	srv, _ := servicetest.Start(t, service.Config{}, sqlite.Options{})
	return srv.URL
}

// newTestServerOn runs the real `serve` in-process on backend b and returns its URL.
func newTestServerOn(t *testing.T, b backend) string {
	t.Helper()
	return serveInProcess(t, nil, append([]string{"--addr", "127.0.0.1:0", "--log-level", "warn"}, b.args(t)...)...).url
}

// onBackends runs test on a whole server on each backend.
func onBackends(t *testing.T, test func(t *testing.T, server string)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, newTestServerOn(t, b)) })
	}
}

// adminKeyOf returns the admin key of a server of servicetest or serveInProcess.
func adminKeyOf(server string) string {
	if key := servicetest.KeyOf(server); key != "" {
		return key
	}
	return testAdminKey
}

// cli runs one command in-process against server, with its admin key, and returns its
// stdout, stderr and exit code.
func cli(t *testing.T, server string, args ...string) (string, string, int) {
	t.Helper()
	return cliEnv(t, map[string]string{"LEASEKEEPER_SERVER": server, "LEASEKEEPER_API_KEY": adminKeyOf(server)}, args...)
}

// cliEnv runs one command in-process with env as its environment.
func cliEnv(t *testing.T, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := 0
	if err := run(ctx, args, func(k string) string { return env[k] }, &stdout, &stderr); err != nil {
		code = exitCode(err)
		stderr.WriteString(err.Error())
	}
	return stdout.String(), stderr.String(), code
}

func jsonDecode(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// TestClientCommands runs the commands against a whole server on each backend.
func TestClientCommands(t *testing.T) { onBackends(t, testClientCommands) }

func testClientCommands(t *testing.T, srv string) {
	out, errOut, code := cli(t, srv, "acquire", "--ttl", "1m", "--holder", "alice", "--metadata", `{"addr":"x"}`, "--json", "job")
	if code != 0 {
		t.Fatalf("acquire: exit %d: %s", code, errOut)
	}
	var got leaseJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("acquire --json output %q: %v", out, err)
	}
	if got.LeaseID == "" || got.Token <= 0 || got.Holder != "alice" || got.TTLMs != 60000 {
		t.Errorf("acquire --json = %+v, want a lease_id, a token, holder alice, ttl 60000", got)
	}

	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string // substrings of stdout+stderr
	}{
		{"OKAcquireTable", []string{"acquire", "--ttl", "1m", "other"}, 0, []string{"lease_id", "token", "other"}},
		{"ErrHeldExits75", []string{"acquire", "--holder", "bob", "job"}, 75, []string{`held by "alice"`}},
		{"OKGetTable", []string{"get", "job"}, 0, []string{"NAME", "job", "held", "alice", "1"}},
		{"OKListJSON", []string{"list", "--json", "--state", "held"}, 0, []string{`"name": "job"`, `"name": "other"`, `"addr": "x"`}},
		{"OKRenew", []string{"renew", "--lease-id", got.LeaseID, "--ttl", "2m", "--json", "job"}, 0, []string{`"ttl_ms": 120000`}},
		{"ErrLostRenewWithWrongID", []string{"renew", "--lease-id", "lk_wrong", "job"}, 1, []string{"lease_lost"}},
		{"OKRelease", []string{"release", "--lease-id", got.LeaseID, "job"}, 0, []string{"released job"}},
		{"OKReleaseAgain", []string{"release", "--lease-id", got.LeaseID, "job"}, 0, []string{"released job"}},
		{"OKGetFreeJSON", []string{"get", "--json", "job"}, 0, []string{`"held": false`, `"end": "released"`}},
		{"ErrNotFound", []string{"get", "never"}, 1, []string{"not_found"}},
		{"ErrUsageNoName", []string{"get"}, 2, []string{"a lease name is required"}},
		{"ErrUsageTwoNames", []string{"get", "a", "b"}, 2, []string{"one lease name expected"}},
		{"ErrUsageNoLeaseID", []string{"release", "job"}, 2, []string{"--lease-id is required"}},
		{"ErrLeaderNoName", []string{"leader"}, 2, []string{"a lease name is required"}},
		{"OKLeader", []string{"leader", "other"}, 0, []string{"leader "}},
		{"OKNoLeader", []string{"leader", "job"}, 0, []string{"no leader (last: alice"}},
		{"OKNoLeaderNeverUsed", []string{"leader", "--json", "never"}, 0, []string{`"leading":false`}},
		{"ErrUnreachableExits75", []string{"get", "--server", "http://127.0.0.1:1", "job"}, 75, []string{"connect"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := cli(t, srv, tt.args...)
			if code != tt.wantCode {
				t.Errorf("%v: exit %d, want %d\nstdout: %s\nstderr: %s", tt.args, code, tt.wantCode, out, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(out+errOut, w) {
					t.Errorf("%v: output lacks %q\nstdout: %s\nstderr: %s", tt.args, w, out, errOut)
				}
			}
		})
	}
}

func TestSplitDashDash(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		flags, cmd []string
		found      bool
	}{
		{"OKCommandKeepsItsOwnDashDash", []string{"--name", "x", "--", "grep", "--", "-v"}, []string{"--name", "x"}, []string{"grep", "--", "-v"}, true},
		{"NoDashDash", []string{"--name", "x", "cmd"}, []string{"--name", "x", "cmd"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flags, cmd, found := splitDashDash(tt.args)
			if diff := cmp.Diff([]any{tt.flags, tt.cmd, tt.found}, []any{flags, cmd, found}); diff != "" {
				t.Errorf("splitDashDash(%q) (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

// TestAPIKeyFromEnvironment checks the client commands send LEASEKEEPER_API_KEY as a bearer
// key: the library reads no environment, the command does.
func TestAPIKeyFromEnvironment(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"type":"about:blank","title":"Not found","status":404,"code":"not_found"}`))
	}))
	t.Cleanup(srv.Close)
	env := map[string]string{"LEASEKEEPER_SERVER": srv.URL, "LEASEKEEPER_API_KEY": "lk_from-env"}
	var stdout, stderr bytes.Buffer
	run(context.Background(), []string{"get", "job"}, func(k string) string { return env[k] }, &stdout, &stderr)
	if auth := <-got; auth != "Bearer lk_from-env" {
		t.Errorf("Authorization = %q, want the key from LEASEKEEPER_API_KEY", auth)
	}
}

func TestGlobalFlagsAnywhere(t *testing.T) {
	srv := newTestServer(t)
	env := map[string]string{"LEASEKEEPER_API_KEY": servicetest.KeyOf(srv)} // no LEASEKEEPER_SERVER: --server must count
	if _, errOut, code := cliEnv(t, env, "--server", srv, "acquire", "--ttl", "1m", "--holder", "alice", "job"); code != 0 {
		t.Fatalf("--server URL acquire: exit %d: %s", code, errOut)
	}
	for _, args := range [][]string{
		{"--server", srv, "--json", "get", "job"},
		{"--server=" + srv, "get", "--json", "job"},
		{"get", "--server", srv, "job", "--json"},
		{"get", "job", "--json", "--server", srv},
		{"--json", "list", "--server", srv},
		{"--server", srv, "keys", "list", "--json"},
	} {
		out, errOut, code := cliEnv(t, env, args...)
		if code != 0 || !strings.HasPrefix(strings.TrimSpace(out), "{") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want JSON", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{
		{"--server", srv, "serve"},
		{"--server"},
		{"--server", srv},
		{"get", "job", "extra", "--server", srv},
	} {
		if _, _, code := cliEnv(t, env, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

func TestReleaseBogusLeaseID(t *testing.T) {
	srv := newTestServer(t)
	for _, name := range []string{"free", "held"} {
		if name == "held" {
			if _, errOut, code := cli(t, srv, "acquire", "--ttl", "1m", name); code != 0 {
				t.Fatalf("acquire: exit %d: %s", code, errOut)
			}
		}
		_, errOut, code := cli(t, srv, "release", "--lease-id", "lk_bogus", name)
		if code != 1 || !strings.Contains(errOut, "lease_lost") || strings.Contains(errOut, "overlap") {
			t.Errorf("release --lease-id lk_bogus %s: exit %d, %q; want exit 1, lease_lost and no claim of overlap", name, code, errOut)
		}
	}
}

func TestDurationNeedsUnit(t *testing.T) {
	for _, args := range [][]string{
		{"acquire", "--ttl", "30", "job"},
		{"renew", "--lease-id", "lk_x", "--ttl", "30", "job"},
		{"run", "--name", "job", "--ttl", "30", "--", "true"},
		{"serve", "--max-ttl", "30"},
	} {
		_, errOut, code := cliEnv(t, nil, args...)
		if code != 2 || !strings.Contains(errOut, "add a unit, e.g. 30s") {
			t.Errorf("%q: exit %d, %q; want exit 2 asking for a unit", args, code, errOut)
		}
	}
}

func TestServeBadEnvironment(t *testing.T) {
	for _, name := range []string{"LEASEKEEPER_MIN_TTL", "LEASEKEEPER_MAX_TTL", "LEASEKEEPER_MAX_WAIT",
		"LEASEKEEPER_MAX_LOCK_DELAY", "LEASEKEEPER_RETENTION", "LEASEKEEPER_BODY_TIMEOUT"} {
		env := map[string]string{name: "30", "LEASEKEEPER_DB": filepath.Join(t.TempDir(), "lk.db"), "LEASEKEEPER_ADDR": "127.0.0.1:0"}
		_, errOut, code := cliEnv(t, env, "serve")
		if code != 2 || !strings.Contains(errOut, name+"=30") || !strings.Contains(errOut, "add a unit") {
			t.Errorf("%s=30 serve: exit %d, %q; want exit 2 naming it", name, code, errOut)
		}
	}
}

func TestHealth(t *testing.T) {
	onBackends(t, func(t *testing.T, srv string) {
		if out, errOut, code := cliEnv(t, nil, "health", "--server", srv); code != 0 || out != "ready\n" {
			t.Errorf("health --server %s: exit %d, %q, %q; want 0, ready", srv, code, out, errOut)
		}
		if _, _, code := cliEnv(t, nil, "--server", srv, "health"); code != 0 {
			t.Errorf("--server %s health: exit %d, want 0", srv, code)
		}
	})
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	if _, errOut, code := cliEnv(t, nil, "health", "--server", down.URL); code != 1 || !strings.Contains(errOut, "503") {
		t.Errorf("health of a server answering 503: exit %d, %q; want 1", code, errOut)
	}
	down.Close()
	if _, _, code := cliEnv(t, nil, "health", "--server", down.URL, "--timeout", "2s"); code != 1 {
		t.Errorf("health of a stopped server: exit %d, want 1", code)
	}
}
