package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestReport feeds the events of a run and checks the report: a line per package as it ends,
// the output of a failing test, and the skipped tests with their reasons at the end.
func TestReport(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	var out bytes.Buffer
	r := newReport(&out, func() time.Time { return now })
	ev := func(action, pkg, test, output string) {
		b, err := json.Marshal(event{Action: action, Package: pkg, Test: test, Output: output, Elapsed: 1.5})
		if err != nil {
			t.Fatal(err)
		}
		r.line(string(b))
	}
	ev("start", "ex/a", "", "")
	ev("start", "ex/b", "", "")
	ev("run", "ex/a", "TestOK", "")
	ev("output", "ex/a", "TestOK", "=== RUN   TestOK\n")
	ev("output", "ex/a", "TestOK", "    a_test.go:9: chatter of a passing test\n")
	ev("pass", "ex/a", "TestOK", "")
	ev("output", "ex/a", "TestBrowser", "=== RUN   TestBrowser\n")
	ev("output", "ex/a", "TestBrowser", "    browser_test.go:30: *** SKIPPING: chromium is not on PATH ***\n")
	ev("output", "ex/a", "TestBrowser", "--- SKIP: TestBrowser (0.00s)\n")
	ev("skip", "ex/a", "TestBrowser", "")
	ev("pass", "ex/a", "", "")
	now = t0.Add(90 * time.Second)
	r.progress()
	ev("output", "ex/b", "TestBroken", "=== RUN   TestBroken\n")
	ev("output", "ex/b", "TestBroken", "    b_test.go:7: Get() = 3, want 4\n")
	ev("fail", "ex/b", "TestBroken", "")
	ev("skip", "ex/c", "", "") // no test files: not a package that ran
	ev("fail", "ex/b", "", "")
	r.summary()
	got := out.String()
	for _, want := range []string{
		"ok   ex/a", "(2 tests, 1 skipped)",
		"… 1m30s: 1 packages done; running ex/b (1m30s)",
		"--- FAIL: TestBroken (ex/b)\n", "b_test.go:7: Get() = 3, want 4",
		"FAIL ex/b",
		"1 tests skipped:\n  ex/a: TestBrowser\n      *** SKIPPING: chromium is not on PATH ***\n",
		"1 of 2 packages FAILED",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report has no %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"chatter of a passing test", "ex/c"} {
		if strings.Contains(got, bad) {
			t.Errorf("report has %q:\n%s", bad, got)
		}
	}
}

func TestReason(t *testing.T) {
	for _, tc := range []struct {
		out  []string
		want string
	}{
		{[]string{"=== RUN   TestX\n", "    x_test.go:12: no PostgreSQL: initdb not found\n", "--- SKIP: TestX (0.00s)\n"}, "no PostgreSQL: initdb not found"},
		{[]string{"=== RUN   TestX\n", "--- SKIP: TestX (0.00s)\n"}, "(no reason given)"},
		{[]string{"    x_test.go:3: first\n", "    x_test.go:4: second\n"}, "first / second"},
	} {
		if got := reason(tc.out); got != tc.want {
			t.Errorf("reason(%q) = %q, want %q", tc.out, got, tc.want)
		}
	}
}
