package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// needShellTools skips loudly when a tool the README's shell blocks use is missing, unless
// LEASEKEEPER_README_TESTS=required (CI), where it fails.
func needShellTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			msg := fmt.Sprintf("*** SKIPPING the README tour: %s is not on PATH ***", tool)
			if os.Getenv("LEASEKEEPER_README_TESTS") == "required" {
				t.Fatal(msg + " (LEASEKEEPER_README_TESTS=required)")
			}
			fmt.Fprintln(os.Stderr, "\n"+msg)
			t.Skip(msg)
		}
	}
}

var shBlockRE = regexp.MustCompile("(?s)```sh\n(.*?)```")

// readmeSection returns the ```sh blocks of the README section under heading, in order.
func readmeSection(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no section %q", heading)
	}
	s = s[i+len(heading)+2:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	var blocks []string
	for _, m := range shBlockRE.FindAllStringSubmatch(s, -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) == 0 {
		t.Fatalf("README.md section %q has no sh blocks", heading)
	}
	return blocks
}

// TestReadmeTour runs the curl tour of the README as a reader would: the blocks in order in
// one shell, those marked "# second terminal" in the background, against a fresh server. Only
// the port is changed.
func TestReadmeTour(t *testing.T) {
	needShellTools(t, "bash", "curl", "jq")
	blocks := readmeSection(t, "## A tour with curl")
	s := serveInProcess(t, nil, "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "lk.db"), "--log-level", "warn")
	host := strings.TrimPrefix(s.url, "http://")
	dir := t.TempDir()

	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	var bg []string // output files of the second-terminal blocks
	for _, b := range blocks {
		b = strings.ReplaceAll(b, "localhost:8080", host)
		if !strings.HasPrefix(b, "# second terminal") {
			script.WriteString(b + "\n")
			continue
		}
		out := filepath.Join(dir, fmt.Sprintf("second-%d", len(bg)))
		bg = append(bg, out)
		fmt.Fprintf(&script, "( %s\n) >%q 2>&1 &\n", b, out)
		switch {
		case strings.Contains(b, "wait_ms"):
			// The reader sees it waiting before going on; the harness asks the server.
			fmt.Fprintf(&script, "waiter=$!\nfor i in $(seq 200); do lk %s/v1/leases/demo | jq -e '.waiters > 0' >/dev/null && break; sleep 0.05; done\n", host)
		case strings.Contains(b, " -N "):
			script.WriteString("streams+=($!)\n")
		}
	}
	script.WriteString("wait $waiter\nsleep 0.2\nkill \"${streams[@]}\"\n")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Env = append(os.Environ(), "LEASEKEEPER_API_KEY="+testAdminKey)
	start := time.Now()
	outB, err := cmd.CombinedOutput()
	out := string(outB)
	if err != nil {
		t.Fatalf("the tour failed: %v\nscript:\n%s\noutput:\n%s", err, script.String(), out)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the tour took %v: something waited for a lease to expire", d)
	}
	for _, want := range []string{`"holder":"me"`, `"lease_held"`, `"stale_token"`, "Fencing-Token:"} {
		if !strings.Contains(out, want) {
			t.Errorf("tour output has no %s:\n%s", want, out)
		}
	}
	for _, bad := range []string{`"lease_lost"`, `"not_found"`, `"invalid_request"`, `"unauthenticated"`, `"forbidden"`} {
		if strings.Contains(out, bad) {
			t.Errorf("tour output has %s:\n%s", bad, out)
		}
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if l == "204" {
			n++
		}
	}
	if n != 3 {
		t.Errorf("tour output has %d lines 204, want 3 (release, delete resource, revoke):\n%s", n, out)
	}
	if len(bg) != 2 {
		t.Fatalf("tour has %d second-terminal blocks, want 2 (the waiting acquire, the watch)", len(bg))
	}
	waiter, _ := os.ReadFile(bg[0])
	if !strings.Contains(string(waiter), `"holder":"you"`) || !strings.Contains(string(waiter), `"lease_id"`) {
		t.Errorf("the waiting acquire answered %s, want a grant to you", waiter)
	}
	watch, _ := os.ReadFile(bg[1])
	if !strings.Contains(string(watch), "data:") {
		t.Errorf("the watch stream printed %q, want events", watch)
	}
}
