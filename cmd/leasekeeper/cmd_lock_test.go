package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
)

// held is a command running in-process until its context is cancelled, as Ctrl-C does.
type held struct {
	stdout, stderr syncBuffer
	stop           context.CancelFunc
	done           chan int // the exit code
}

// start runs args in-process against srv with its admin key.
func start(t *testing.T, srv string, args ...string) *held {
	t.Helper()
	return startEnv(t, map[string]string{"LEASEKEEPER_SERVER": srv, "LEASEKEEPER_API_KEY": servicetest.KeyOf(srv)}, args...)
}

// startEnv runs args in-process with env as its environment.
func startEnv(t *testing.T, env map[string]string, args ...string) *held {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &held{stop: cancel, done: make(chan int, 1)}
	getenv := func(k string) string { return env[k] }
	go func() {
		code := 0
		if err := run(ctx, args, getenv, &h.stdout, &h.stderr); err != nil {
			code = exitCode(err)
			h.stderr.Write([]byte(err.Error()))
		}
		h.done <- code
	}()
	t.Cleanup(func() {
		cancel()
		<-h.done
	})
	return h
}

// waitOutput waits until stdout has a line with want.
func (h *held) waitOutput(t *testing.T, want string) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if s := strings.Join(h.stdout.lines(), "\n"); strings.Contains(s, want) {
			return s
		}
	}
	t.Fatalf("stdout %q never had %q; stderr: %q", h.stdout.lines(), want, h.stderr.lines())
	return ""
}

// exit waits for the command to end, up to within, and returns its exit code.
func (h *held) exit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case code := <-h.done:
		h.done <- code // for the cleanup
		return code
	case <-time.After(within):
		t.Fatalf("the command did not end within %v; stderr: %q", within, h.stderr.lines())
		return 0
	}
}

// waitInLine waits until somebody waits in line for name.
func waitInLine(t *testing.T, c *client.Client, name string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if st, err := c.Get(context.Background(), name); err == nil && st.Waiters > 0 {
			return
		}
	}
	t.Fatalf("nobody waited in line for %q", name)
}

func newAdminClient(t *testing.T, srv string) *client.Client {
	t.Helper()
	c, err := client.New(srv, client.WithHTTPClient(servicetest.Client()), client.WithAPIKey(servicetest.KeyOf(srv)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestLock(t *testing.T) {
	ctx := context.Background()
	t.Run("OKHeldUntilInterruptThenReleased", func(t *testing.T) {
		srv := newTestServer(t)
		c := newAdminClient(t, srv)
		h := start(t, srv, "lock", "--ttl", "2s", "--holder", "me", "--metadata", `{"addr":"a:1"}`, "--json", "job")
		var g leaseJSON
		if err := jsonDecode(h.waitOutput(t, "}"), &g); err != nil {
			t.Fatalf("lock --json printed %q: %v", h.stdout.lines(), err)
		}
		if g.Name != "job" || g.Holder != "me" || g.Token == 0 || g.LeaseID == "" || g.TTLMs != 2000 {
			t.Errorf("lock --json printed %+v, want the grant to me for 2 s", g)
		}
		// Held past its ttl: renewed.
		time.Sleep(2500 * time.Millisecond)
		st, err := c.Get(ctx, "job")
		if err != nil || !st.Held || st.Token != g.Token || st.Metadata["addr"] != "a:1" {
			t.Fatalf("after the ttl: %+v, %v; want held with token %d and the metadata", st, err, g.Token)
		}
		h.stop()
		if code := h.exit(t, 10*time.Second); code != 0 {
			t.Errorf("lock exit %d after the interrupt, want 0; stderr %q", code, h.stderr.lines())
		}
		if st, err := c.Get(ctx, "job"); err != nil || st.Held || st.End != "released" {
			t.Errorf("after lock ended: %+v, %v; want released", st, err)
		}
	})
	t.Run("OKTableNamesTheToken", func(t *testing.T) {
		srv := newTestServer(t)
		h := start(t, srv, "lock", "job")
		out := h.waitOutput(t, "expires_at")
		if !strings.Contains(out, "token ") || !strings.Contains(out, "lease_id ") {
			t.Errorf("lock printed %q, want the token and the lease_id", out)
		}
	})
	t.Run("LostOnRevokeWithinMoments", func(t *testing.T) {
		srv := newTestServer(t)
		c := newAdminClient(t, srv)
		h := start(t, srv, "lock", "--ttl", "30s", "job")
		h.waitOutput(t, "token")
		if err := c.Revoke(ctx, "job"); err != nil {
			t.Fatal(err)
		}
		// The next renewal of a 30 s lease is 10 s away: the watch stream ends it.
		if code := h.exit(t, 3*time.Second); code != exLeaseLost {
			t.Errorf("lock exit %d after a revoke, want %d", code, exLeaseLost)
		}
		if s := strings.Join(h.stderr.lines(), " "); !strings.Contains(s, "revoked") {
			t.Errorf("stderr %q, want it to say the lease was revoked", s)
		}
	})
	t.Run("TempFailWhenHeld", func(t *testing.T) {
		srv := newTestServer(t)
		c := newAdminClient(t, srv)
		if _, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "other", TTL: time.Minute, DisableKeepAlive: true}); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := cli(t, srv, "lock", "--wait", "200ms", "job")
		if code != exTempFail || !strings.Contains(errOut, "other") {
			t.Errorf("lock of a held lease: exit %d %q, want %d naming the holder", code, errOut, exTempFail)
		}
	})
	t.Run("InterruptedWhileWaiting", func(t *testing.T) {
		srv := newTestServer(t)
		c := newAdminClient(t, srv)
		if _, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "other", TTL: time.Minute, DisableKeepAlive: true}); err != nil {
			t.Fatal(err)
		}
		h := start(t, srv, "lock", "--wait", "1m", "job")
		waitInLine(t, c, "job")
		h.stop()
		if code := h.exit(t, 10*time.Second); code != 0 || h.stdout.lines()[0] != "" {
			t.Errorf("lock interrupted while waiting: exit %d, stdout %q; want 0 and nothing", code, h.stdout.lines())
		}
	})
	t.Run("SeveralNamesAllOrNone", func(t *testing.T) {
		srv := newTestServer(t)
		c := newAdminClient(t, srv)
		h := start(t, srv, "lock", "--json", "a", "b")
		h.waitOutput(t, `"name": "b"`)
		var got []string
		for deadline := time.Now().Add(10 * time.Second); len(got) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			got = nil
			dec := json.NewDecoder(strings.NewReader(strings.Join(h.stdout.lines(), "\n")))
			for {
				var g leaseJSON
				if err := dec.Decode(&g); err != nil || g.Token == 0 || g.LeaseID == "" {
					break
				}
				got = append(got, g.Name)
			}
		}
		if !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("lock a b printed grants of %v, want a then b", got)
		}
		h.stop()
		if code := h.exit(t, 10*time.Second); code != 0 {
			t.Errorf("lock a b exit %d after the interrupt, want 0", code)
		}
		for _, n := range []string{"a", "b"} {
			if st, err := c.Get(ctx, n); err != nil || st.Held || st.End != "released" {
				t.Errorf("%s after lock ended: %+v, %v; want released", n, st, err)
			}
		}
		if _, err := c.Acquire(ctx, "d", client.AcquireOptions{Holder: "other", TTL: time.Minute, DisableKeepAlive: true}); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := cli(t, srv, "lock", "--wait", "200ms", "c", "d")
		if code != exTempFail || !strings.Contains(errOut, "other") {
			t.Errorf("lock c d with d held: exit %d %q, want %d naming the holder", code, errOut, exTempFail)
		}
		if _, err := c.Get(ctx, "c"); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("Get(c) = %v, want not found: none granted", err)
		}
	})
	t.Run("SeveralNamesShared", func(t *testing.T) {
		srv := newTestServer(t)
		c := newAdminClient(t, srv)
		var hs []*held
		for _, names := range [][]string{{"a", "b"}, {"b", "a"}} {
			h := start(t, srv, append([]string{"lock", "--shared", "--json"}, names...)...)
			h.waitOutput(t, `"name": "`+names[1]+`"`)
			hs = append(hs, h)
		}
		for _, n := range []string{"a", "b"} {
			if st, err := c.Get(ctx, n); err != nil || !st.Held || len(st.Holders) != 2 {
				t.Errorf("%s read by two `lock --shared a b` = %+v, %v; want held by both", n, st, err)
			}
		}
		_, errOut, code := cli(t, srv, "lock", "--wait", "200ms", "c", "a")
		if code != exTempFail {
			t.Errorf("lock c a (exclusive) while a is read: exit %d %q, want %d", code, errOut, exTempFail)
		}
		for _, h := range hs {
			h.stop()
			if code := h.exit(t, 10*time.Second); code != 0 {
				t.Errorf("lock --shared exit %d after the interrupt, want 0", code)
			}
		}
		for _, n := range []string{"a", "b"} {
			if st, err := c.Get(ctx, n); err != nil || st.Held {
				t.Errorf("%s after both readers ended: %+v, %v; want free", n, st, err)
			}
		}
	})
	t.Run("UsageErrors", func(t *testing.T) {
		srv := newTestServer(t)
		for _, args := range [][]string{{"lock"}, {"lock", "a", "a"}, {"lock", "--metadata", "[1]", "job"}, {"lock", "--ttl", "30", "job"}} {
			if _, errOut, code := cli(t, srv, args...); code != 2 {
				t.Errorf("%q: exit %d %q, want 2", args, code, errOut)
			}
		}
	})
}

// TestLockInterruptedProcess sends SIGINT to a real `leasekeeper lock` process, as Ctrl-C
// does, and checks that it releases the lease and exits 0.
func TestLockInterruptedProcess(t *testing.T) {
	srv := newTestServer(t)
	c := newAdminClient(t, srv)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunHelperProcess$", "--", "lock", "--server", srv, "--ttl", "10s", "job")
	cmd.Env = append(os.Environ(), "LEASEKEEPER_TEST_HELPER=1", "LEASEKEEPER_API_KEY="+servicetest.KeyOf(srv))
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	// A generous bound: the test binary starts and acquires on a shared, busy machine.
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(strings.Join(stdout.lines(), "\n"), "token"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("lock printed no token; stderr %q", stderr.lines())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		t.Fatalf("lock did not exit within 30 s of SIGINT; stderr %q", stderr.lines())
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("lock exit %d after SIGINT, want 0; stderr %q", code, stderr.lines())
	}
	if st, err := c.Get(context.Background(), "job"); err != nil || st.Held || st.End != "released" {
		t.Errorf("after SIGINT: %+v, %v; want released", st, err)
	}
}

func TestElect(t *testing.T) {
	ctx := context.Background()
	t.Run("OKLeadsInTurnAndResigns", func(t *testing.T) {
		srv := newTestServer(t)
		c := newAdminClient(t, srv)
		listen := start(t, srv, "elect", "--listen", "sched")
		listen.waitOutput(t, "no leader")
		first := start(t, srv, "elect", "--ttl", "10s", "--metadata", `{"addr":"a:1"}`, "sched", "node-1")
		first.waitOutput(t, "leader node-1 token=")
		second := start(t, srv, "elect", "--json", "sched", "node-2")
		st, err := c.Get(ctx, "sched")
		if err != nil || st.Holder != "node-1" || st.Metadata["addr"] != "a:1" {
			t.Fatalf("state %+v, %v; want node-1 leading with its metadata", st, err)
		}
		waitInLine(t, c, "sched")
		if len(second.stdout.lines()) > 1 || second.stdout.lines()[0] != "" {
			t.Fatalf("node-2 printed %q while node-1 led", second.stdout.lines())
		}
		first.stop()
		if code := first.exit(t, 10*time.Second); code != 0 {
			t.Errorf("node-1 exit %d after the interrupt, want 0; stderr %q", code, first.stderr.lines())
		}
		var v leaderView
		if err := jsonDecode(second.waitOutput(t, "node-2"), &v); err != nil || !v.Leading || v.Holder != "node-2" || v.Token <= st.Token {
			t.Errorf("node-2 printed %q (%v), want it leads with a higher token than %d", second.stdout.lines(), err, st.Token)
		}
		second.stop()
		if code := second.exit(t, 10*time.Second); code != 0 {
			t.Errorf("node-2 exit %d, want 0", code)
		}
		if st, err := c.Get(ctx, "sched"); err != nil || st.Held || st.End != "released" {
			t.Errorf("after both resigned: %+v, %v; want released", st, err)
		}
		out := listen.waitOutput(t, "last: node-2")
		for _, want := range []string{"leader node-1", "leader node-2"} {
			if !strings.Contains(out, want) {
				t.Errorf("elect --listen printed %q, want %q", out, want)
			}
		}
	})
	t.Run("LostOnRevoke", func(t *testing.T) {
		srv := newTestServer(t)
		c := newAdminClient(t, srv)
		h := start(t, srv, "elect", "--ttl", "30s", "sched", "node-1")
		h.waitOutput(t, "leader node-1")
		if err := c.Revoke(ctx, "sched"); err != nil {
			t.Fatal(err)
		}
		if code := h.exit(t, 3*time.Second); code != exLeaseLost {
			t.Errorf("elect exit %d after a revoke, want %d; stderr %q", code, exLeaseLost, h.stderr.lines())
		}
	})
	t.Run("InterruptedBeforeLeading", func(t *testing.T) {
		srv := newTestServer(t)
		c := newAdminClient(t, srv)
		if _, err := c.Acquire(ctx, "sched", client.AcquireOptions{Holder: "other", TTL: time.Minute, DisableKeepAlive: true}); err != nil {
			t.Fatal(err)
		}
		h := start(t, srv, "elect", "sched", "node-1")
		time.Sleep(200 * time.Millisecond)
		h.stop()
		if code := h.exit(t, 10*time.Second); code != 0 || h.stdout.lines()[0] != "" {
			t.Errorf("elect interrupted while following: exit %d, stdout %q; want 0 and nothing", code, h.stdout.lines())
		}
	})
	t.Run("UsageErrors", func(t *testing.T) {
		srv := newTestServer(t)
		for _, args := range [][]string{{"elect"}, {"elect", "sched"}, {"elect", "sched", "a", "b"}, {"elect", "--listen"},
			{"elect", "--listen", "sched", "node-1"}, {"elect", "--metadata", "x", "sched", "node-1"}, {"elect", "bad/name", "node-1"}} {
			if _, errOut, code := cli(t, srv, args...); code != 2 {
				t.Errorf("%q: exit %d %q, want 2", args, code, errOut)
			}
		}
	})
}

// TestHelpAndUsageErrorStreams: -h and --help print that command's help (its synopsis, what it
// does, its flags; not every command's) to stdout and exit 0; a usage error is one line on
// stderr and a pointer to the command's help, exit 2, for every command.
func TestHelpAndUsageErrorStreams(t *testing.T) {
	commands := [][]string{{"serve"}, {"backup"}, {"bench"}, {"health"}, {"acquire"}, {"renew"}, {"release"}, {"get"},
		{"list"}, {"leader"}, {"run"}, {"lock"}, {"elect"}, {"handover"}, {"keys"}, {"keys", "create"}, {"keys", "list"},
		{"keys", "revoke"}, {"session"}, {"session", "open"}, {"session", "close"}}
	try := func(args ...string) (stdout, stderr string, code int) {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, func(string) string { return "" }, &out, &errOut); err != nil {
			code = exitCode(err)
			fmt.Fprintln(&errOut, "leasekeeper:", err) // as main does
		}
		return out.String(), errOut.String(), code
	}
	for _, cmd := range commands {
		name := strings.Join(cmd, " ")
		for _, help := range []string{"-h", "--help"} {
			out, errOut, code := try(append(cmd, help)...)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, "Usage: leasekeeper "+name+" ") || !strings.Contains(out, "-") {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want exit 0 and its help on stdout only", name, help, code, out, errOut)
			}
			for other, h := range commandHelp {
				if other != name && strings.Contains(out, "leasekeeper "+h.synopsis) {
					t.Errorf("%s %s shows the synopsis of %s too:\n%s", name, help, other, out)
				}
			}
		}
		out, errOut, code := try(append(cmd, "--no-such-flag")...)
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		if code != 2 || out != "" || len(lines) != 2 || !strings.Contains(lines[0], "no-such-flag") {
			t.Errorf("%s --no-such-flag: exit %d, stdout %q, stderr %q; want exit 2 and one line of error on stderr only, then the pointer", name, code, out, errOut)
		} else if want := "see leasekeeper " + name + " -h"; lines[1] != want {
			t.Errorf("%s --no-such-flag: stderr %q, want its second line %q", name, errOut, want)
		}
	}
	if out, errOut, code := try("-h"); code != 0 || errOut != "" || !strings.Contains(out, "Usage") {
		t.Errorf("leasekeeper -h: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, errOut, code := try("no-such-command"); code != 2 || out != "" || errOut != "leasekeeper: unknown command \"no-such-command\"\nsee leasekeeper -h\n" {
		t.Errorf("leasekeeper no-such-command: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The status 2 of run's command is not a usage error of run's.
	child := &exitError{code: 2, child: true, err: errors.New("run: sh: exit status 2")}
	if err := withHelpPointer(child, "run"); err.Error() != child.Error() {
		t.Errorf("withHelpPointer(CMD's status 2) = %q, want %q", err, child)
	}
}

// TestBoundsInUserUnits: a duration outside the server's bounds is reported in the unit the
// user typed, as a usage error.
func TestBoundsInUserUnits(t *testing.T) {
	srv := newTestServer(t)
	c := newAdminClient(t, srv)
	l, err := c.Acquire(context.Background(), "renewed", client.AcquireOptions{TTL: time.Minute, DisableKeepAlive: true})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"acquire", "--ttl", "100h", "job"}, "ttl 100h exceeds the maximum 1h"},
		{[]string{"acquire", "--ttl", "5400s", "job"}, "ttl 5400s exceeds the maximum 3600s"},
		{[]string{"acquire", "--ttl", "1h30m", "job"}, "ttl 1h30m exceeds the maximum 60m"},
		{[]string{"acquire", "--ttl", "500ms", "job"}, "ttl 500ms is below the minimum 1000ms"},
		{[]string{"acquire", "--lock-delay", "2h", "job"}, "lock delay 2h exceeds the maximum 1m"},
		{[]string{"acquire", "--lock-delay", "90s", "job"}, "lock delay 90s exceeds the maximum 60s"},
		{[]string{"renew", "--lease-id", l.ID(), "--ttl", "2h", "renewed"}, "ttl 2h exceeds the maximum 1h"},
		{[]string{"lock", "--ttl", "100h", "job"}, "ttl 100h exceeds the maximum 1h"},
		{[]string{"elect", "--ttl", "100h", "job", "me"}, "ttl 100h exceeds the maximum 1h"},
		{[]string{"run", "--name", "job", "--ttl", "100h", "--", "true"}, "ttl 100h exceeds the maximum 1h"},
	}
	for _, tt := range tests {
		_, errOut, code := cli(t, srv, tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%q: exit %d %q, want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
}

func TestInUnitOf(t *testing.T) {
	tests := []struct {
		d     time.Duration
		typed string
		want  string
	}{
		{time.Hour, "100h", "1h"},
		{time.Hour, "5000s", "3600s"},
		{time.Hour, "1h30m", "60m"},
		{time.Second, "10ms", "1000ms"},
		{90 * time.Minute, "2h", "1.5h"},
		{time.Second, "2h", "1s"}, // not a round number of hours: in the largest unit it is round in
		{90 * time.Second, "1h", "90s"},
		{time.Second, "1.5µs", "1000000µs"},
		{time.Second, "30", "1s"},
	}
	for _, tt := range tests {
		if got := inUnitOf(tt.d, tt.typed); got != tt.want {
			t.Errorf("inUnitOf(%v, %q) = %q, want %q", tt.d, tt.typed, got, tt.want)
		}
	}
}

// TestReadmeCommandLines checks that every command line of the README's command-line section
// takes the flags it shows: each is parsed with -h added after its flags (before run's --).
func TestReadmeCommandLines(t *testing.T) {
	n := 0
	for _, block := range readmeSection(t, "## The command line") {
		for _, line := range strings.Split(block, "\n") {
			line, _, _ = strings.Cut(line, "  #") // a comment after the command
			if !strings.HasPrefix(line, "leasekeeper ") {
				continue
			}
			args := shellWords(t, strings.TrimPrefix(line, "leasekeeper "))
			if i := slices.Index(args, "--"); i >= 0 {
				args = slices.Insert(args, i, "-h")
			} else {
				args = append(args, "-h")
			}
			var stdout, stderr bytes.Buffer
			if err := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); err != nil || stdout.Len() == 0 {
				t.Errorf("README: %s\n-h after its flags: %v (exit %d), stderr %q", line, err, exitCode(err), stderr.String())
			}
			n++
		}
	}
	if n < 10 {
		t.Errorf("found %d command lines in the README's command-line section, want at least 10", n)
	}
}

// shellWords splits s as a shell would, for the quoting the README uses: single quotes and
// double quotes, no escapes.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("unbalanced quote in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
