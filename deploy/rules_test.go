// Package deploy_test checks what operators run beside leasekeeper: the Prometheus rules with
// promtool (their syntax, their unit tests, and that each alert's tests catch its rule broken
// both ways) and the Grafana board's JSON. The test that every metric and label they name is
// exported by a live server is cmd/leasekeeper's TestOperatingFilesMatchScrape.
package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/internal/promcheck"
)

const (
	rulesFile = "prometheus/leasekeeper.rules.yml"
	testsFile = "prometheus/leasekeeper.test.yml"
)

func promtool(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(promcheck.Promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestRules runs `promtool check rules` and `promtool test rules` on the shipped files.
func TestRules(t *testing.T) {
	if out, err := promtool(t, ".", "check", "rules", rulesFile); err != nil {
		t.Errorf("promtool check rules %s: %v\n%s", rulesFile, err, out)
	}
	if out, err := promtool(t, ".", "test", "rules", testsFile); err != nil {
		t.Errorf("promtool test rules %s: %v\n%s", testsFile, err, out)
	}
}

// TestAlertsAnnotated: every alert has a severity, a summary, a description and a runbook_url
// that points to its own section of docs/RUNBOOK.md, which exists.
func TestAlertsAnnotated(t *testing.T) {
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	runbook, err := os.ReadFile("../docs/RUNBOOK.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(rules), "\n      - alert: ")[1:]
	if len(blocks) < 13 {
		t.Fatalf("%s has %d alerts, want at least 13", rulesFile, len(blocks))
	}
	for _, b := range blocks {
		name, _, _ := strings.Cut(b, "\n")
		b, _, _ = strings.Cut(b, "\n      - ")
		for _, want := range []string{"severity: ", "summary: ", "description: ", "runbook_url: https://github.com/leasekeeper/leasekeeper/blob/main/docs/RUNBOOK.md#" + strings.ToLower(name) + "\n"} {
			if !strings.Contains(b, want) {
				t.Errorf("alert %s has no %q", name, want)
			}
		}
		if !strings.Contains(string(runbook), "\n## "+name+"\n") {
			t.Errorf("docs/RUNBOOK.md has no section ## %s", name)
		}
	}
}

// loosened breaks each alert so that it fires where its tests want it quiet: the negative
// case of every alert must catch it.
var loosened = map[string][2]string{
	"LeasekeeperStaleWriteRefused":          {"(leasekeeper_stale_writes_rejected_total[5m])) > 0", "(leasekeeper_stale_writes_rejected_total[5m])) >= 0"},
	"LeasekeeperLeasesExpiringUnreleased":   {"(leasekeeper_lease_expirations_total[15m])) > 5", "(leasekeeper_lease_expirations_total[15m])) > 1"},
	"LeasekeeperLeaderVacant":               {"max by (job, name) (leasekeeper_watched_lease_held)", "min by (job, name) (leasekeeper_watched_lease_held)"},
	"LeasekeeperRenewalsLate":               {`{op="renew", outcome="lease_lost"}`, `{outcome="lease_lost"}`},
	"LeasekeeperWaitersPilingUp":            {"(leasekeeper_waiters) > 100\n        for: 10m", "(leasekeeper_waiters) > 50\n        for: 1m"},
	"LeasekeeperWaitersAtCap":               {"leasekeeper_waiters >= 0.9 *", "leasekeeper_waiters >= 0.8 *"},
	"LeasekeeperWatchersAtCap":              {"leasekeeper_watchers >= 0.9 *", "leasekeeper_watchers >= 0.8 *"},
	"LeasekeeperStoreWritesFailing":         {"(increase(leasekeeper_store_write_failures_total[5m]))", "(leasekeeper_store_write_failures_total)"},
	"LeasekeeperDiskAlmostFull":             {"leasekeeper_store_disk_free_bytes < 1073741824", "leasekeeper_store_disk_free_bytes <= 1073741824"},
	"LeasekeeperNotReady":                   {"expr: leasekeeper_ready == 0\n        for: 1m", "expr: leasekeeper_ready == 0\n        for: 0m"},
	"LeasekeeperKeyRateLimited":             {"(rate(leasekeeper_rate_limited_total[5m])) > 1", "(rate(leasekeeper_rate_limited_total[5m])) > 0.1"},
	"LeasekeeperRestartStretchedLeases":     {"process_start_time_seconds < 1800", "process_start_time_seconds < 86400"},
	"LeasekeeperReplicaDatabaseUnreachable": {`leasekeeper_store_info{backend="postgres"} == 1`, `leasekeeper_store_info == 1`},
}

var alertRE = regexp.MustCompile(`(?m)^      - alert: (\w+)\n        expr: (.*)$`)

// TestAlertTestsCatchBrokenRules is the negative control of every alert's tests: the rule made
// silent (its expression never true) fails its firing case, and the rule loosened fails its
// quiet case. Each mutated copy of the rules runs under `promtool test rules`.
func TestAlertTestsCatchBrokenRules(t *testing.T) {
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(testsFile)
	if err != nil {
		t.Fatal(err)
	}
	alerts := alertRE.FindAllStringSubmatch(string(rules), -1)
	if len(alerts) != len(loosened) {
		t.Errorf("%s has %d alerts, the loosened table %d: give every alert a loosened rule", rulesFile, len(alerts), len(loosened))
	}
	for _, a := range alerts {
		name, expr := a[1], a[2]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(string(tests), "alertname: "+name+"\n") {
				t.Fatalf("%s has no test of %s", testsFile, name)
			}
			silent := strings.Replace(string(rules), "expr: "+expr+"\n", "expr: vector(1) < 0\n", 1)
			l, ok := loosened[name]
			if !ok {
				t.Fatalf("no loosened rule for %s", name)
			}
			if strings.Count(string(rules), l[0]) != 1 {
				t.Fatalf("the loosened rule's text %q occurs %d times in %s, want once", l[0], strings.Count(string(rules), l[0]), rulesFile)
			}
			loose := strings.Replace(string(rules), l[0], l[1], 1)
			for what, mutated := range map[string]string{"silent": silent, "loosened": loose} {
				dir := t.TempDir()
				for file, body := range map[string]string{"leasekeeper.rules.yml": mutated, "leasekeeper.test.yml": string(tests)} {
					if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				out, err := promtool(t, dir, "test", "rules", "leasekeeper.test.yml")
				if err == nil {
					t.Errorf("promtool test rules passed with %s %s: its tests do not catch it", name, what)
					continue
				}
				if !strings.Contains(out, "alertname: "+name+",") {
					t.Errorf("promtool test rules with %s %s failed, but not on %s:\n%s", name, what, name, out)
				}
			}
		})
	}
}
