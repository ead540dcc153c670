package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
)

// waitFile waits up to limit for path to exist and returns its content.
func waitFile(t *testing.T, path string, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFileOr is waitFile that shows the process's stderr when the file never appears.
func waitFileOr(t *testing.T, path string, limit time.Duration, stderr *bytes.Buffer) string {
	t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("%s did not appear within %v; stderr: %s", path, limit, stderr.String())
	return ""
}

func TestRun(t *testing.T) {
	tests := []struct {
		name      string
		held      bool                                             // somebody else holds the lease first
		holdLimit int                                              // with this limit
		script    string                                           // for sh -c; $OUT is a file in a temp dir
		flags     []string                                         // extra run flags
		during    func(t *testing.T, c *client.Client, out string) // while run runs
		wantCode  int
		wantOut   func(t *testing.T, c *client.Client, out string)
		wantErr   string
		within    time.Duration
	}{
		{
			name:   "OKTokenInEnvironment",
			script: `echo "$LEASEKEEPER_FENCING_TOKEN $LEASEKEEPER_LEASE_NAME $LEASEKEEPER_SERVER" > "$OUT"`,
			wantOut: func(t *testing.T, c *client.Client, out string) {
				st, err := c.Get(context.Background(), "job")
				if err != nil {
					t.Fatalf("Get = %v", err)
				}
				if want := fmt.Sprintf("%d job %s", st.Token, c.BaseURL()); waitFile(t, out, 10*time.Second) != want {
					t.Errorf("CMD saw %q, want %q", waitFile(t, out, time.Second), want)
				}
				if st.Held || st.End != "released" {
					t.Errorf("after run: held %v end %q, want released", st.Held, st.End)
				}
			},
			within: 5 * time.Second,
		},
		{name: "ExitCodePassedThrough", script: `exit 3`, wantCode: 3, within: 5 * time.Second},
		{
			name: "TempFailWithoutLease", held: true, script: `echo ran > "$OUT"`, flags: []string{"--wait", "300ms"},
			wantCode: exTempFail, wantErr: "not starting sh",
			wantOut: func(t *testing.T, _ *client.Client, out string) {
				if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("CMD ran without the lease (stat %s: %v)", out, err)
				}
			},
			within: 5 * time.Second,
		},
		{
			name: "StoppedWhenRevoked", script: `echo started > "$OUT"; exec sleep 30`, flags: []string{"--ttl", "1s"},
			during: func(t *testing.T, c *client.Client, out string) {
				waitFile(t, out, 30*time.Second)
				if err := c.Revoke(context.Background(), "job"); err != nil {
					t.Errorf("Revoke = %v", err)
				}
			},
			wantCode: exLeaseLost, wantErr: "was lost", within: 5 * time.Second,
		},
		{
			// The next renewal of a 30 s lease is 10 s away: the watch stream stops CMD, with
			// SIGTERM.
			name:   "StoppedSoonWhenRevokedWithLongTTL",
			script: `trap 'echo TERM > "$OUT.sig"; exit 0' TERM; echo started > "$OUT"; while :; do sleep 0.05; done`, flags: []string{"--ttl", "30s"},
			during: func(t *testing.T, c *client.Client, out string) {
				waitFile(t, out, 30*time.Second)
				if err := c.Revoke(context.Background(), "job"); err != nil {
					t.Errorf("Revoke = %v", err)
				}
			},
			wantCode: exLeaseLost, wantErr: "revoked", within: 3 * time.Second,
			wantOut: func(t *testing.T, _ *client.Client, out string) {
				if s := waitFile(t, out+".sig", time.Second); s != "TERM" {
					t.Errorf("CMD's trap wrote %q, want TERM", s)
				}
			},
		},
		{
			name:   "KilledAfterGraceWhenTermIgnored",
			script: `trap "" TERM; echo started > "$OUT"; while :; do sleep 0.05; done`, flags: []string{"--ttl", "1s", "--grace", "300ms"},
			during: func(t *testing.T, c *client.Client, out string) {
				waitFile(t, out, 30*time.Second)
				if err := c.Revoke(context.Background(), "job"); err != nil {
					t.Errorf("Revoke = %v", err)
				}
			},
			wantCode: exLeaseLost, wantErr: "was lost", within: 5 * time.Second,
		},
		{
			// One of two slots: somebody holds slot 0, so CMD gets slot 1.
			name: "LimitTakesAFreeSlot", held: true, script: `echo "$LEASEKEEPER_SLOT" > "$OUT"`, flags: []string{"--limit", "2"},
			holdLimit: 2,
			wantOut: func(t *testing.T, c *client.Client, out string) {
				if s := waitFile(t, out, 10*time.Second); s != "1" {
					t.Errorf("CMD saw LEASEKEEPER_SLOT=%q, want 1", s)
				}
			},
			within: 5 * time.Second,
		},
		{
			// `leasekeeper handover` reaches CMD as SIGTERM; the lease stays held until CMD has
			// stopped, then is released (not lost).
			name:   "HandoverSendsTerm",
			script: `trap 'echo term > "$OUT.term"; exit 0' TERM; echo started > "$OUT"; while :; do sleep 0.05; done`, flags: []string{"--ttl", "1s"},
			during: func(t *testing.T, c *client.Client, out string) {
				waitFile(t, out, 30*time.Second)
				stdout, stderr, code := cli(t, c.BaseURL(), "handover", "job", "--reason", "deploy")
				if code != 0 || !strings.Contains(stdout, "token") {
					t.Errorf("leasekeeper handover = %d, %q, %q; want 0 and the request", code, stdout, stderr)
				}
			},
			wantErr: "handover of \"job\" requested",
			wantOut: func(t *testing.T, c *client.Client, out string) {
				if s := waitFile(t, out+".term", 5*time.Second); s != "term" {
					t.Errorf("CMD's trap wrote %q, want term", s)
				}
				st, err := c.Get(context.Background(), "job")
				if err != nil || st.Held || st.End != "released" {
					t.Errorf("after run: %+v, %v; want released", st, err)
				}
			},
			// Without the handover CMD would run forever: the bound only has to end the test, and
			// a loaded machine took more than 5 s to renew, signal and release.
			within: 30 * time.Second,
		},
		{
			// Several names, all or none: CMD sees every lease's token.
			name: "SeveralNamesEveryToken", script: `echo "$LEASEKEEPER_FENCING_TOKENS" > "$OUT"`, flags: []string{"--name", "job2"},
			wantOut: func(t *testing.T, c *client.Client, out string) {
				var want []string
				for _, n := range []string{"job", "job2"} {
					st, err := c.Get(context.Background(), n)
					if err != nil || st.Held || st.End != "released" {
						t.Errorf("%s after run: %+v, %v; want released", n, st, err)
					}
					want = append(want, fmt.Sprintf("%s=%d", n, st.Token))
				}
				if got := waitFile(t, out, 10*time.Second); got != strings.Join(want, " ") {
					t.Errorf("CMD saw LEASEKEEPER_FENCING_TOKENS=%q, want %q", got, strings.Join(want, " "))
				}
			},
			within: 5 * time.Second,
		},
		{
			name: "SeveralNamesNoneWhenOneHeld", held: true, script: `echo ran > "$OUT"`, flags: []string{"--name", "job2", "--wait", "300ms"},
			wantCode: exTempFail, wantErr: "not starting sh",
			wantOut: func(t *testing.T, c *client.Client, out string) {
				if _, err := c.Get(context.Background(), "job2"); !errors.Is(err, client.ErrNotFound) {
					t.Errorf("Get(job2) = %v, want not found: granted with none of the others", err)
				}
			},
			within: 5 * time.Second,
		},
		{
			// One of several leases lost stops CMD: their contexts end together.
			name:   "SeveralNamesStoppedWhenOneRevoked",
			script: `trap 'exit 0' TERM; echo started > "$OUT"; while :; do sleep 0.05; done`, flags: []string{"--name", "job2", "--ttl", "30s"},
			during: func(t *testing.T, c *client.Client, out string) {
				waitFile(t, out, 30*time.Second)
				if err := c.Revoke(context.Background(), "job2"); err != nil {
					t.Errorf("Revoke = %v", err)
				}
			},
			wantCode: exLeaseLost, wantErr: `"job2"`, within: 5 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newTestServer(t)
			c, err := client.New(srv, client.WithHTTPClient(servicetest.Client()))
			if err != nil {
				t.Fatal(err)
			}
			if tt.held {
				if _, err := c.Acquire(context.Background(), "job", client.AcquireOptions{Holder: "other", TTL: time.Minute, DisableKeepAlive: true, Limit: tt.holdLimit}); err != nil {
					t.Fatalf("Acquire by other = %v", err)
				}
			}
			out := filepath.Join(t.TempDir(), "out")
			t.Setenv("OUT", out)
			args := append([]string{"run", "--name", "job", "--ttl", "10s"}, tt.flags...)
			args = append(args, "--", "sh", "-c", tt.script)
			type result struct {
				stderr string
				code   int
			}
			done := make(chan result, 1)
			start := time.Now()
			go func() {
				_, errOut, code := cli(t, srv, args...)
				done <- result{errOut, code}
			}()
			if tt.during != nil {
				tt.during(t, c, out)
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(tt.within):
				t.Fatalf("run did not return within %v", tt.within)
			}
			t.Logf("run returned after %v", time.Since(start).Round(time.Millisecond))
			if r.code != tt.wantCode {
				t.Errorf("run exit %d, want %d; stderr: %s", r.code, tt.wantCode, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.wantErr) {
				t.Errorf("run stderr = %q, want it to mention %q", r.stderr, tt.wantErr)
			}
			if tt.wantOut != nil {
				tt.wantOut(t, c, out)
			}
		})
	}
}

// TestRunHelperProcess is not a test: TestRunForwardsSignals runs the test binary as a real
// `leasekeeper` process through it, with the command line after "--".
func TestRunHelperProcess(t *testing.T) {
	if os.Getenv("LEASEKEEPER_TEST_HELPER") != "1" {
		t.Skip("helper process for TestRunForwardsSignals")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, flag.Args(), os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "leasekeeper:", err)
		os.Exit(exitCode(err))
	}
	os.Exit(0)
}

// TestRunForwardsSignals sends signals to a real `leasekeeper run` process and checks CMD gets
// them and run exits with CMD's status.
func TestRunForwardsSignals(t *testing.T) {
	srv := newTestServer(t)
	tests := []struct {
		name string
		sig  syscall.Signal
	}{
		{"OKTerm", syscall.SIGTERM},
		{"OKInt", syscall.SIGINT},
		{"OKHup", syscall.SIGHUP},
		{"OKUsr1", syscall.SIGUSR1},
		{"OKUsr2", syscall.SIGUSR2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
			sig := strings.TrimPrefix(tt.name, "OK")
			script := fmt.Sprintf(`trap 'echo %s > %q; exit 7' %s; echo $$ > %q; while :; do sleep 0.05; done`,
				sig, got, strings.ToUpper(sig), ready)
			cmd := exec.Command(os.Args[0], "-test.run=^TestRunHelperProcess$", "--",
				"run", "--server", srv, "--name", "sig-"+sig, "--ttl", "10s", "--", "sh", "-c", script)
			cmd.Env = append(os.Environ(), "LEASEKEEPER_TEST_HELPER=1", "LEASEKEEPER_API_KEY="+servicetest.KeyOf(srv))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatalf("start helper: %v", err)
			}
			t.Cleanup(func() {
				cmd.Process.Kill()
				// CMD runs in its own process group; a failed case must not leave it behind.
				if b, err := os.ReadFile(ready); err == nil {
					if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
						syscall.Kill(-pid, syscall.SIGKILL)
					}
				}
			})
			// Generous bounds: these wait for a -race test binary to start and acquire on a
			// shared, busy machine; they are not timing assertions.
			waitFileOr(t, ready, 60*time.Second, &stderr)
			if err := cmd.Process.Signal(tt.sig); err != nil {
				t.Fatalf("signal: %v", err)
			}
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			select {
			case <-waited:
			case <-time.After(30 * time.Second):
				t.Fatalf("run did not exit within 30 s of %v; stderr: %s", tt.sig, stderr.String())
			}
			if code := cmd.ProcessState.ExitCode(); code != 7 {
				t.Errorf("run exit %d, want CMD's 7; stderr: %s", code, stderr.String())
			}
			if s := waitFile(t, got, 5*time.Second); s != sig {
				t.Errorf("CMD's trap wrote %q, want %q", s, sig)
			}
		})
	}
}
