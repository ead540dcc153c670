package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// TestWorkerHelperProcess is not a test: the pause test runs the test binary as a real worker
// process through it, with the worker's flags after "--".
func TestWorkerHelperProcess(t *testing.T) {
	if os.Getenv("LEASEKEEPER_WORKER_HELPER") != "1" {
		t.Skip("helper process for TestPausedWorkerStaleWriteRefused")
	}
	os.Exit(run(context.Background(), flag.Args(), os.Getenv, os.Stdout, os.Stderr))
}

// worker is a running worker process and the lines it printed.
type worker struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

func startWorker(t *testing.T, server, key string, args ...string) *worker {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestWorkerHelperProcess$", "--", "--server", server}, args...)...)
	cmd.Env = append(os.Environ(), "LEASEKEEPER_WORKER_HELPER=1", "LEASEKEEPER_API_KEY="+key)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	w := &worker{cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		<-w.done
		t.Logf("worker %v:\n  %s", args, strings.Join(w.output(), "\n  "))
	})
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, sc.Text())
			w.mu.Unlock()
		}
		cmd.Wait()
	}()
	return w
}

func (w *worker) output() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...)
}

// waitLine waits up to limit for a printed line containing s.
func (w *worker) waitLine(t *testing.T, s string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		for _, l := range w.output() {
			if strings.Contains(l, s) {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("worker did not print %q within %v; it printed:\n%s", s, limit, strings.Join(w.output(), "\n"))
}

// exit waits up to limit for the worker to end and returns its status.
func (w *worker) exit(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-w.done:
		return w.cmd.ProcessState.ExitCode()
	case <-time.After(limit):
		t.Fatalf("worker did not exit within %v; it printed:\n%s", limit, strings.Join(w.output(), "\n"))
		return -1
	}
}

// TestPausedWorkerStaleWriteRefused is the demo as a test: worker A takes the lease and is
// frozen with SIGSTOP between checking it and writing, past its ttl; worker B takes over and
// writes; A is continued and writes with its old token, which the server refuses and records.
func TestPausedWorkerStaleWriteRefused(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "lk.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := handlers.New(handlers.Config{Store: st, Clock: st.Clock(), Limits: lease.DefaultLimits(),
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler), Spec: leasekeeper.OpenAPI()})
	if err != nil {
		t.Fatalf("handlers.New: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	key := servicetest.Key(t, st, auth.Writer, "demo-")

	a := startWorker(t, srv.URL, key, "--holder", "worker-A", "--ttl", "1s", "--pause")
	a.waitLine(t, "checked: the lease is still mine", 10*time.Second)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP A: %v", err)
	}

	b := startWorker(t, srv.URL, key, "--holder", "worker-B", "--ttl", "1s", "--wait", "5s")
	if code := b.exit(t, 10*time.Second); code != exitWritten {
		t.Fatalf("worker B exit %d, want %d (written)", code, exitWritten)
	}

	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT A: %v", err)
	}
	if code := a.exit(t, 10*time.Second); code != exitStale {
		t.Fatalf("worker A exit %d, want %d (stale write refused)", code, exitStale)
	}
	a.waitLine(t, "the lease had already been lost", time.Second)

	var tokens [2]int64
	for i, w := range []*worker{a, b} {
		for _, l := range w.output() {
			if _, rest, ok := strings.Cut(l, "with fencing token "); ok {
				json.Unmarshal([]byte(strings.Fields(rest)[0]), &tokens[i])
			}
		}
	}
	if tokens[0] == 0 || tokens[1] <= tokens[0] {
		t.Fatalf("tokens A %d, B %d: want B's above A's", tokens[0], tokens[1])
	}

	resp, err := servicetest.Bearer(servicetest.AdminKey(t, st)).Get(srv.URL + "/v1/rejections?resource=demo-resource")
	if err != nil {
		t.Fatalf("GET /v1/rejections: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var list struct {
		Rejections []struct {
			Resource       string `json:"resource"`
			Lease          string `json:"lease"`
			Holder         string `json:"holder"`
			PresentedToken int64  `json:"presented_token"`
			CurrentFence   int64  `json:"current_fence"`
		} `json:"rejections"`
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&list); err != nil {
		t.Fatalf("decode rejections %s: %v", body, err)
	}
	type rej struct {
		Resource, Lease, Holder string
		Presented, Fence        int64
	}
	var got []rej
	for _, r := range list.Rejections {
		got = append(got, rej{r.Resource, r.Lease, r.Holder, r.PresentedToken, r.CurrentFence})
	}
	want := []rej{{"demo-resource", "demo-lease", "worker-A", tokens[0], tokens[1]}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET /v1/rejections (-want +got):\n%s", diff)
	}
}
