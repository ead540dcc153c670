package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
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

var (
	shBlockRE        = regexp.MustCompile("(?s)```sh\n(.*?)```")
	statusLineRE     = regexp.MustCompile(`(?m)(^|[}\]])204$`)
	prismListeningRE = regexp.MustCompile(`Prism is listening on http://(127\.0\.0\.1:[0-9]+)`)
)

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
	onBackends(t, func(t *testing.T, server string) {
		host := strings.TrimPrefix(server, "http://")
		runTour(t, host, host)
	})
}

// runTour runs the README's curl tour with its requests sent to host, but the watch stream's
// to watchHost, and checks what it printed.
func runTour(t *testing.T, host, watchHost string) {
	t.Helper()
	blocks := readmeSection(t, "## A tour with curl")
	dir := t.TempDir()

	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	var bg []string // output files of the second-terminal blocks
	for _, b := range blocks {
		if strings.Contains(b, " -N ") {
			b = strings.ReplaceAll(b, "localhost:8080", watchHost)
		}
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
			// The reader sees the stream open before going on; the harness asks the server,
			// or an event committed before the stream took its place would never reach it
			// (directly: /metrics is not in the spec a validating proxy checks against).
			script.WriteString("streams+=($!)\n")
			fmt.Fprintf(&script, "for i in $(seq 200); do lk %s/metrics | grep -q '^leasekeeper_watchers [1-9]' && break; sleep 0.05; done\n", watchHost)
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
	for _, want := range []string{`"holder":"me"`, `"lease_held"`, `"stale_token"`, "fencing-token:", `"writers":[{`,
		`{"code":"lease_held","held":["account-42"]}`, `[{"name":"account-17","token":`} {
		if !strings.Contains(strings.ToLower(out), want) { // header names in any case (Prism lowers them)
			t.Errorf("tour output has no %s:\n%s", want, out)
		}
	}
	for _, bad := range []string{`"lease_lost"`, `"not_found"`, `"invalid_request"`, `"unauthenticated"`, `"forbidden"`, "stoplight.io/prism/errors"} {
		if strings.Contains(out, bad) {
			t.Errorf("tour output has %s:\n%s", bad, out)
		}
	}
	// A status printed by -w '%{http_code}\n' ends a line, maybe after a body without a final
	// newline (Prism sends JSON without one).
	if n := len(statusLineRE.FindAllString(out, -1)); n != 3 {
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

// TestReadmeTourThroughPrism runs the README's curl tour through Stoplight Prism as a
// validating proxy with --errors, given the spec the server serves: a request or an answer
// that openapi.yaml does not allow fails it. Prism buffers a response until it ends, so the
// watch stream (which never ends) goes to the server directly. LEASEKEEPER_PRISM is the prism
// command; scripts/clients-check.sh installs it from npm and runs this test.
func TestReadmeTourThroughPrism(t *testing.T) {
	prism := os.Getenv("LEASEKEEPER_PRISM")
	if prism == "" {
		t.Skip("LEASEKEEPER_PRISM is not set; scripts/clients-check.sh runs this test with Prism")
	}
	needShellTools(t, "bash", "curl", "jq")
	s := serveInProcess(t, nil, "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "lk.db"), "--log-level", "warn")
	host := strings.TrimPrefix(s.url, "http://")

	resp, err := s.hc.Get(s.url + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	served, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi.yaml = %d, %v", resp.StatusCode, err)
	}
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	if err := os.WriteFile(spec, served, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	log := &lockedBuffer{}
	cmd := exec.CommandContext(ctx, prism, "proxy", "--errors", spec, s.url, "--host", "127.0.0.1", "--port", "0")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", prism, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cancel(); <-exited })
	var proxy string // Prism says where it listens: "Prism is listening on http://127.0.0.1:PORT"
	deadline := time.After(60 * time.Second)
	for proxy == "" {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("Prism exited (%v) before listening:\n%s", err, log)
		case <-deadline:
			t.Fatalf("Prism did not start listening within 60 s:\n%s", log)
		case <-time.After(100 * time.Millisecond):
		}
		if m := prismListeningRE.FindStringSubmatch(log.String()); m != nil {
			proxy = m[1]
		}
	}
	started := len(log.String())

	runTour(t, proxy, host)
	retryAfterRevoke(t, "http://"+proxy)

	var violations []string
	for _, l := range strings.Split(log.String()[started:], "\n") {
		if low := strings.ToLower(l); strings.Contains(l, "✖") || strings.Contains(l, "⚠") ||
			strings.Contains(low, "violation") || strings.Contains(low, "warning") {
			violations = append(violations, l)
		}
	}
	if len(violations) > 0 {
		t.Errorf("Prism found requests or answers the spec does not allow:\n%s", strings.Join(violations, "\n"))
	}
	if !strings.Contains(log.String()[started:], "Forwarding") {
		t.Errorf("Prism forwarded nothing:\n%s", log)
	}
}

// retryAfterRevoke sends what the tour does not: an idempotent acquire retried after its grant
// was revoked, which answers 409 lease_lost (and no Retry-After: waiting does not help).
func retryAfterRevoke(t *testing.T, base string) {
	t.Helper()
	send := func(method, path, idem string, want int) string {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"holder":"me","ttl_ms":30000}`)
		}
		req, err := http.NewRequest(method, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testAdminKey)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", idem)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Errorf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
		return string(b)
	}
	const idem = "retry-after-revoke-0123456789"
	send(http.MethodPost, "/v1/leases/revoked/acquire", idem, http.StatusOK)
	send(http.MethodDelete, "/v1/leases/revoked", "", http.StatusNoContent)
	if b := send(http.MethodPost, "/v1/leases/revoked/acquire", idem, http.StatusConflict); !strings.Contains(b, `"lease_lost"`) {
		t.Errorf("the retry after the revoke answered %s, want lease_lost", b)
	}
}

// TestReadmeSaysWhereTheBinaryIs: the quick start names the file `make build` writes and the
// target that puts it on PATH, and the Makefile has both.
func TestReadmeSaysWhereTheBinaryIs(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^BIN\s+\?=\s+(\S+)$`).FindSubmatch(mk)
	if m == nil || !regexp.MustCompile(`(?m)^install:`).Match(mk) {
		t.Fatalf("the Makefile has no BIN default or no install target")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	quick, _, _ := strings.Cut(string(readme), "\n## Keys\n")
	for _, want := range []string{"`" + string(m[1]) + "`", "`make install`"} {
		if !strings.Contains(quick, want) {
			t.Errorf("the README's quick start does not say %s", want)
		}
	}
}

// TestMakeTestReports: the README's `make test` goes through internal/testreport, which shows
// progress and lists the skipped tests with their reasons (its own tests check how).
func TestMakeTestReports(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	recipe := regexp.MustCompile(`(?m)^test:.*\n\t(.*)$`).FindSubmatch(mk)
	if recipe == nil || !strings.Contains(string(recipe[1]), "run ./internal/testreport -- -race -count=1 ./...") {
		t.Errorf("make test runs %q, want go test -race -count=1 ./... through internal/testreport", recipe)
	}
}
