package main

import (
	"bufio"
	"fmt"
	"io"
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

// TestKillTheLeadersProcess runs a real leasekeeper and three candidate processes, kills the
// leader's process with SIGKILL, and checks that a follower takes over with a higher token and
// that the other follower observes the new leader.
func TestKillTheLeadersProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	dir := t.TempDir()
	for _, b := range []struct{ out, pkg string }{{"leasekeeper", "../../cmd/leasekeeper"}, {"election", "."}} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, b.out), b.pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	const key = "lkk_election-test-admin-key-0123456789abcdefghijkl"
	srv := exec.Command(filepath.Join(dir, "leasekeeper"), "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "lk.db"))
	srv.Env = append(os.Environ(), "LEASEKEEPER_ADMIN_KEY="+key)
	stdout, _ := srv.StdoutPipe()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("server said nothing: %v", err)
	}
	url := strings.TrimSpace(line[strings.Index(line, "http://"):])

	type proc struct {
		name  string
		cmd   *exec.Cmd
		mu    sync.Mutex
		lines []string
	}
	var procs []*proc
	for i := range 3 {
		p := &proc{name: fmt.Sprintf("node-%d", i)}
		p.cmd = exec.Command(filepath.Join(dir, "election"), "-server", url, "-name", p.name, "-addr", p.name+":9000", "-ttl", "1s")
		out, _ := p.cmd.StdoutPipe()
		p.cmd.Stderr = os.Stderr
		p.cmd.Env = append(os.Environ(), "LEASEKEEPER_API_KEY="+key)
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
		go func(r io.Reader) {
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				p.mu.Lock()
				p.lines = append(p.lines, sc.Text())
				p.mu.Unlock()
			}
		}(out)
		procs = append(procs, p)
	}
	leadingRe := regexp.MustCompile(`^leading token=(\d+)$`)
	// leading returns the token of the last term p started, and whether it still leads.
	leading := func(p *proc) (int64, bool) {
		p.mu.Lock()
		defer p.mu.Unlock()
		var tok int64
		on := false
		for _, l := range p.lines {
			if m := leadingRe.FindStringSubmatch(l); m != nil {
				tok, _ = strconv.ParseInt(m[1], 10, 64)
				on = true
			} else if l == "stopped leading" {
				on = false
			}
		}
		return tok, on
	}
	saw := func(p *proc, want string) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, l := range p.lines {
			if l == want {
				return true
			}
		}
		return false
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if cond() {
				return
			}
		}
		t.Fatalf("timed out waiting for %s", what)
	}

	var leader *proc
	var oldToken int64
	wait("a leader", func() bool {
		for _, p := range procs {
			if tok, on := leading(p); on {
				leader, oldToken = p, tok
				return true
			}
		}
		return false
	})
	for _, p := range procs {
		want := fmt.Sprintf("leader %s token=%d addr=%s:9000", leader.name, oldToken, leader.name)
		wait(p.name+" observing "+leader.name, func() bool { return saw(p, want) })
	}

	leader.cmd.Process.Signal(syscall.SIGKILL) // no release: its term must run out
	leader.cmd.Wait()
	killed := time.Now()

	var next *proc
	var newToken int64
	wait("a new leader", func() bool {
		for _, p := range procs {
			if tok, on := leading(p); on && p != leader {
				next, newToken = p, tok
				return true
			}
		}
		return false
	})
	t.Logf("%s took over %v after %s was killed", next.name, time.Since(killed).Round(time.Millisecond), leader.name)
	if newToken <= oldToken {
		t.Errorf("new leader's token %d, want > %d", newToken, oldToken)
	}
	for _, p := range procs {
		if p == leader {
			continue
		}
		want := fmt.Sprintf("leader %s token=%d addr=%s:9000", next.name, newToken, next.name)
		wait(p.name+" observing the new leader", func() bool { return saw(p, want) })
	}
	for _, p := range procs {
		if _, on := leading(p); on && p != next && p != leader {
			t.Errorf("%s also leads", p.name)
		}
	}
}
