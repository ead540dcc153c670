package main

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/service/servicetest"
)

// TestSQLiteProcs: a server on SQLite runs with two Ps at least unless GOMAXPROCS is set; one on
// PostgreSQL keeps what Go chose.
func TestSQLiteProcs(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	for _, c := range []struct {
		name   string
		getenv func(string) string
		db     string
		procs  int
		want   int
	}{
		{"SQLite on one CPU", env(nil), "lk.db", 1, 2},
		{"SQLite on two", env(nil), "lk.db", 2, 0},
		{"SQLite, GOMAXPROCS set", env(map[string]string{"GOMAXPROCS": "1"}), "lk.db", 1, 0},
		{"PostgreSQL on one CPU", env(nil), "postgres://u@h/db", 1, 0},
	} {
		if got := sqliteProcs(c.getenv, c.db, c.procs); got != c.want {
			t.Errorf("%s: sqliteProcs(…, %q, %d) = %d, want %d", c.name, c.db, c.procs, got, c.want)
		}
	}
}

// TestServeOnOneCPURunsTwoProcs: the real binary on SQLite, allowed one CPU (taskset), runs with
// GOMAXPROCS 2 (the runtime's own metric on /metrics), where Go alone would choose 1.
func TestServeOnOneCPURunsTwoProcs(t *testing.T) {
	needBinary(t)
	if runtime.GOOS != "linux" {
		t.Skip("SKIP: taskset is Linux's")
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Fatalf("taskset (util-linux, essential on Debian) is missing: %v", err)
	}
	p := startBinaryVia(t, []string{taskset, "-c", "0"}, "--db", filepath.Join(t.TempDir(), "lk.db"))
	procs := scrapeProcs(t, p.url)
	if procs != "2" {
		t.Errorf("go_sched_gomaxprocs_threads = %s on one CPU, want 2: the SQLite writer would commit one operation at a time", procs)
	}
}

var procsRE = regexp.MustCompile(`(?m)^go_sched_gomaxprocs_threads (\d+)$`)

// scrapeProcs returns the GOMAXPROCS the server at url reports on /metrics.
func scrapeProcs(t *testing.T, url string) string {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: servicetest.BearerTransport{Key: testAdminKey}}
	status, body := scrape(t, hc, url)
	m := procsRE.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no go_sched_gomaxprocs_threads on /metrics (status %d)", status)
	}
	return string(m[1])
}
