// Package promcheck runs Prometheus's own linter, `promtool check metrics`, on a scrape taken
// in a test, so what a Prometheus server would complain about fails the test.
//
// Without promtool on PATH the check skips, saying so, unless LEASEKEEPER_PROMTOOL_TESTS=required
// (CI), where it fails. Debian's `prometheus` package installs promtool.
package promcheck

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Required reports whether the environment requires the promtool check to run (CI).
func Required() bool { return os.Getenv("LEASEKEEPER_PROMTOOL_TESTS") == "required" }

// Promtool returns the path of promtool. Without it the test skips, saying so, unless the
// environment requires it (Required), where it fails.
func Promtool(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if Required() {
			t.Fatalf("the promtool checks are required (LEASEKEEPER_PROMTOOL_TESTS=required), but promtool is not on PATH: %v", err)
		}
		t.Skipf("*** SKIPPED: the promtool checks need promtool on PATH (apt-get install prometheus): %v ***", err)
	}
	return bin
}

// Check pipes scrape, a /metrics answer in the text format, into `promtool check metrics` and
// fails t with each of its complaints.
func Check(t testing.TB, scrape []byte) {
	t.Helper()
	bin := Promtool(t)
	if len(bytes.TrimSpace(scrape)) == 0 {
		t.Fatal("promcheck.Check: the scrape is empty")
	}
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = bytes.NewReader(scrape)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			t.Errorf("promtool check metrics: %s", line)
		}
	case err != nil:
		t.Fatalf("run %s check metrics: %v\n%s", bin, err, out)
	case len(bytes.TrimSpace(out)) > 0:
		// promtool exits 0 on a clean scrape and prints nothing; anything it prints is a complaint.
		t.Errorf("promtool check metrics: %s", bytes.TrimSpace(out))
	}
}
