package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const adminKey = "lkk_faults-admin-key-0123456789abcdefghijklmnopqrstuvwxyz"

var listeningRE = regexp.MustCompile(`leasekeeper listening on (https?://\S+)`)

// long reports whether the long versions run (make faults); the short ones run in make test.
func long() bool { return os.Getenv("LEASEKEEPER_FAULTS") == "long" }

// cycles is the number of fault cycles: LEASEKEEPER_FAULTS_CYCLES, or short or long defaults.
func cycles(short, longN int) int {
	if n, err := strconv.Atoi(os.Getenv("LEASEKEEPER_FAULTS_CYCLES")); err == nil && n > 0 {
		return n
	}
	if long() {
		return longN
	}
	return short
}

// mutation replaces the exact text find by repl in one file of the module, in a test copy of
// the binary only (go build -overlay): the source tree is never edited.
type mutation struct{ file, find, repl string }

var builds sync.Map // key → *built

type built struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

func moduleRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// skipUnlessRequired skips a test whose machine lacks what it needs, loudly, unless
// LEASEKEEPER_FAULT_TESTS=required (as in CI), where it fails instead.
func skipUnlessRequired(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("LEASEKEEPER_FAULT_TESTS") == "required" {
		t.Fatalf("LEASEKEEPER_FAULT_TESTS=required, but: %s", why)
	}
	t.Skipf("SKIP %s (set LEASEKEEPER_FAULT_TESTS=required to make this a failure)", why)
}

// binary builds cmd/leasekeeper once per set of mutations and returns its path.
func binary(t testing.TB, muts ...mutation) string {
	t.Helper()
	if testing.Short() {
		t.Skip("fault tests run the real binary; skipped in -short mode")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("SKIP: `go` is not on PATH, so the real binary cannot be built")
	}
	key := fmt.Sprint(muts)
	v, _ := builds.LoadOrStore(key, &built{})
	b := v.(*built)
	b.once.Do(func() {
		root := moduleRoot(t)
		dir, err := os.MkdirTemp("", "leasekeeper-faults-bin-")
		if err != nil {
			b.err = err
			return
		}
		args := []string{"build", "-o", filepath.Join(dir, "leasekeeper")}
		// The mutation check (internal/mutants) runs this suite with one file of the module
		// replaced; the binary gets the same replacement.
		overlay := map[string]map[string]string{"Replace": {}}
		if p := os.Getenv("LEASEKEEPER_FAULTS_OVERLAY"); p != "" {
			j, err := os.ReadFile(p)
			if err == nil {
				err = json.Unmarshal(j, &overlay)
			}
			if err != nil {
				b.err = fmt.Errorf("LEASEKEEPER_FAULTS_OVERLAY: %w", err)
				return
			}
		}
		if len(overlay["Replace"]) > 0 || len(muts) > 0 {
			for i, m := range muts {
				src, err := os.ReadFile(filepath.Join(root, m.file))
				if err != nil {
					b.err = err
					return
				}
				if bytes.Count(src, []byte(m.find)) != 1 {
					b.err = fmt.Errorf("mutation text %q is not in %s exactly once: update the mutation", m.find, m.file)
					return
				}
				p := filepath.Join(dir, fmt.Sprintf("m%d.go", i))
				if err := os.WriteFile(p, bytes.Replace(src, []byte(m.find), []byte(m.repl), 1), 0o644); err != nil {
					b.err = err
					return
				}
				overlay["Replace"][filepath.Join(root, m.file)] = p
			}
			j, _ := json.Marshal(overlay)
			op := filepath.Join(dir, "overlay.json")
			if err := os.WriteFile(op, j, 0o644); err != nil {
				b.err = err
				return
			}
			args = append(args, "-overlay", op)
		}
		cmd := exec.Command("go", append(args, "./cmd/leasekeeper")...)
		cmd.Dir = root
		if b.out, b.err = cmd.CombinedOutput(); b.err == nil {
			b.path = filepath.Join(dir, "leasekeeper")
		}
	})
	if b.err != nil {
		t.Fatalf("build leasekeeper %v: %v\n%s", muts, b.err, b.out)
	}
	return b.path
}

// server is the real binary serving one database.
type server struct {
	t      testing.TB
	cmd    *exec.Cmd
	url    string
	stderr *lockedBuffer
	exited chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs `bin serve` on a free port over db, optionally through a wrapper command (e.g.
// unshare), and waits until it prints its address.
func start(t testing.TB, bin, db string, wrapper ...string) *server {
	t.Helper()
	return startArgs(t, bin, db, nil, wrapper...)
}

// startArgs is start with more arguments for serve.
func startArgs(t testing.TB, bin, db string, args []string, wrapper ...string) *server {
	t.Helper()
	argv := append(append([]string{}, wrapper...), bin, "serve", "--addr", "127.0.0.1:0", "--db", db,
		"--log-level", "warn", "--min-ttl", "100ms")
	argv = append(argv, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "LEASEKEEPER_ADMIN_KEY="+adminKey)
	// Its own process group, so that a kill reaches the server under a wrapper too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s := &server{t: t, cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = s.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	go func() { cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("stderr of %v (the last 8 KiB):\n%s", argv, tail(s.stderr.String(), 8<<10))
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case s.url = <-addr:
	case <-s.exited:
		t.Fatalf("%v exited before listening; stderr:\n%s", argv, s.stderr)
	case <-time.After(30 * time.Second):
		// SIGQUIT makes the Go runtime print every goroutine's stack: where the start is stuck.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGQUIT)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("%v did not print its address in 30 s; its goroutines at SIGQUIT, and its stderr:\n%s", argv, tail(s.stderr.String(), 64<<10))
	}
	return s
}

// kill stops the server (and its wrapper) with SIGKILL: no shutdown, no checkpoint; it waits
// until the server's process has gone.
func (s *server) kill() {
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.t.Errorf("server %d still running 30 s after SIGKILL", s.cmd.Process.Pid)
	}
	// Under a wrapper the server is a grandchild, reaped by someone else.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if syscall.Kill(-s.cmd.Process.Pid, 0) == syscall.ESRCH {
			return
		}
	}
}

// reply is one HTTP answer; err is set when no answer came (the outcome is unknown).
type reply struct {
	status int
	header http.Header
	body   []byte
	err    error
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// call sends one request with the admin key; body is JSON-encoded unless it is []byte.
func (s *server) call(ctx context.Context, method, path string, body any, hdr ...string) reply {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	if err != nil {
		return reply{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+adminKey)
	if _, raw := body.([]byte); body != nil && !raw {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{err: err}
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// leaseReply is the part of a Lease or lease state the checks read.
type leaseReply struct {
	Held      *bool     `json:"held"`
	LeaseID   string    `json:"lease_id"`
	Token     int64     `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	Holder    string    `json:"holder"`
}

func decode[T any](r reply) (T, error) {
	var v T
	if r.err != nil {
		return v, r.err
	}
	err := json.Unmarshal(r.body, &v)
	return v, err
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
