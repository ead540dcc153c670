package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// apiKeyEnv is an environment that holds key as LEASEKEEPER_API_KEY, and nothing else.
func apiKeyEnv(key string) func(string) string {
	return func(k string) string {
		if k == "LEASEKEEPER_API_KEY" {
			return key
		}
		return ""
	}
}

// TestBench runs every mode briefly against a server with authentication on, with the key
// from LEASEKEEPER_API_KEY, and checks that each one ran without errors.
func TestBench(t *testing.T) {
	srv, st := servicetest.Start(t, service.Config{}, sqlite.Options{})
	getenv := apiKeyEnv(servicetest.AdminKey(t, st))
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"bench", "--server", srv.URL, "-c", "4", "-d", "200ms", "--baseline",
		"--mode", "cycle,renew,fenced,acquire,contend,contend-wait,watchers", "--watchers", "5", "--waiters", "5", "--wait", "50ms"},
		getenv, &out, &errb)
	if err != nil {
		t.Fatalf("bench = %v\n%s%s", err, out.String(), errb.String())
	}
	for _, mode := range []string{"baseline", "cycle", "renew", "fenced", "acquire", "contend", "contend-wait", "cycle+5w+5q"} {
		found := false
		for line := range strings.Lines(out.String()) {
			if f := strings.Fields(line); len(f) >= 8 && f[0] == mode {
				found = true
				if f[7] != "0" {
					t.Errorf("mode %s: %s errors", mode, f[7])
				}
			}
		}
		if !found {
			t.Errorf("no result line for mode %s in:\n%s", mode, out.String())
		}
	}
	if strings.Contains(out.String(), "first error") {
		t.Errorf("bench reported errors:\n%s", out.String())
	}

	// --watch-own: each watcher follows one writer's lease, and gets its events. 2 s, not
	// less: on a machine at load 24-40, 300 ms ended before a watcher had attached.
	out.Reset()
	err = run(context.Background(), []string{"bench", "--server", srv.URL, "-c", "3", "-d", "2s", "--mode", "watchers",
		"--watchers", "6", "--waiters", "0", "--watch-own"}, getenv, &out, &errb)
	if err != nil {
		t.Fatalf("bench --watch-own = %v\n%s%s", err, out.String(), errb.String())
	}
	m := regexp.MustCompile(`([0-9]+) events streamed`).FindStringSubmatch(out.String())
	if m == nil || m[1] == "0" {
		t.Errorf("watchers of their own writer's lease received no events:\n%s", out.String())
	}
}

// TestCycleNamesArePrefixFree: no cycle client's name starts with another's, so a watcher of
// one as a prefix follows that lease alone.
func TestCycleNamesArePrefixFree(t *testing.T) {
	for i := range 200 {
		for j := range 200 {
			if i != j && strings.HasPrefix(cycleName("t", j), cycleName("t", i)) {
				t.Fatalf("%q starts with %q", cycleName("t", j), cycleName("t", i))
			}
		}
	}
}

// TestBenchWatchersApart runs the watchers mode of the real binary, whose watchers and waiters
// are held by a second bench process: it attaches, their events are counted, and it ends.
func TestBenchWatchersApart(t *testing.T) {
	needBinary(t)
	p := startBinary(t, "--db", filepath.Join(t.TempDir(), "lk.db"))
	// 2 s: long enough for the second process's watchers to attach on a loaded machine.
	cmd := exec.Command(binary, "bench", "--server", p.url, "-c", "2", "-d", "2s", "--mode", "watchers",
		"--watchers", "3", "--waiters", "2", "--watchers-apart")
	cmd.Env = append(os.Environ(), "LEASEKEEPER_API_KEY="+testAdminKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bench --mode watchers: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`in a second process at nice 19\): [0-9.]+ of the writers' throughput alone; ([0-9]+) events streamed`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no result of the watchers held apart in:\n%s", out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n == 0 {
		t.Errorf("the watchers held apart received no events:\n%s", out)
	}
	// The real server says its CPU time on /metrics: bench divides it by the operations.
	if !regexp.MustCompile(`(?m)^cycle .* [0-9]+µs$`).Match(out) || !strings.Contains(string(out), "the server's CPU per cycle: ") {
		t.Errorf("no server CPU per operation in:\n%s", out)
	}
}

// TestProcessCPU reads the process's CPU seconds from a scrape, and says when it is absent.
func TestProcessCPU(t *testing.T) {
	scrape := "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n" +
		"# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total_x 9\nprocess_cpu_seconds_total 12.5\ngo_goroutines 7\n"
	if v, ok := processCPU(strings.NewReader(scrape)); !ok || v != 12.5 {
		t.Errorf("processCPU = %v, %v; want 12.5", v, ok)
	}
	if v, ok := processCPU(strings.NewReader("go_goroutines 7\n")); ok {
		t.Errorf("processCPU without the metric = %v, true; want false", v)
	}
}

// TestBenchAcquireTTL: the acquire mode's leases last --ttl (60 s unless set: a run that
// leaves many leases to expire together, to measure the sweep, sets a short one); a ttl that is
// not positive is a usage error.
func TestBenchAcquireTTL(t *testing.T) {
	srv, st := servicetest.Start(t, service.Config{}, sqlite.Options{})
	getenv := apiKeyEnv(servicetest.AdminKey(t, st))
	var out bytes.Buffer
	if err := run(context.Background(), []string{"bench", "--server", srv.URL, "-c", "2", "-d", "1s", "--mode", "acquire", "--ttl", "7s"},
		getenv, &out, &out); err != nil {
		t.Fatalf("bench --ttl 7s = %v\n%s", err, out.String())
	}
	p, err := st.List(context.Background(), store.LeaseFilter{State: "held", Limit: store.MaxLimit})
	if err != nil || len(p.Items) == 0 {
		t.Fatalf("List(held) = %d leases, %v; want the bench's", len(p.Items), err)
	}
	for _, l := range p.Items {
		if l.TTL != 7*time.Second {
			t.Errorf("lease %s has ttl %v, want the --ttl given, 7s", l.Name, l.TTL)
		}
	}
	for _, ttl := range []string{"0s", "-1s"} {
		if err := run(context.Background(), []string{"bench", "--server", srv.URL, "--mode", "acquire", "--ttl", ttl}, getenv, &out, &out); exitCode(err) != 2 {
			t.Errorf("bench --ttl %s = %v, want a usage error", ttl, err)
		}
	}
}

// TestBenchRefusesRemote: bench drives servers on this machine only.
func TestBenchRefusesRemote(t *testing.T) {
	err := run(context.Background(), []string{"bench", "--server", "http://192.0.2.1:8080"}, func(string) string { return "" }, &bytes.Buffer{}, &bytes.Buffer{})
	if exitCode(err) != 2 {
		t.Errorf("bench --server on another host = %v, want a usage error", err)
	}
}

// TestBenchReplicas: bench sends requests to each of several replicas in turn; on replicas of
// one PostgreSQL database a lease taken through one renews and releases through another.
func TestBenchReplicas(t *testing.T) {
	url := pg.NewDatabase(t)
	secret := filepath.Join(t.TempDir(), "secret")
	a := serveInProcess(t, nil, "--addr", "127.0.0.1:0", "--db", url, "--secret-file", secret)
	b := serveInProcess(t, nil, "--addr", "127.0.0.1:0", "--db", url, "--secret-file", secret)
	getenv := func(k string) string {
		if k == "LEASEKEEPER_API_KEY" {
			return testAdminKey
		}
		return ""
	}
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"bench", "--server", a.url + "," + b.url, "-c", "4", "-d", "300ms", "--mode", "cycle,renew"},
		getenv, &out, &errb)
	if err != nil || strings.Contains(out.String(), "first error") {
		t.Fatalf("bench on two replicas = %v\n%s%s", err, out.String(), errb.String())
	}
	for _, s := range []*served{a, b} {
		_, m := scrape(t, s.hc, s.url)
		if !strings.Contains(string(m), `leasekeeper_lease_operations_total{op="renew",outcome="ok"}`) {
			t.Errorf("replica %s renewed nothing: bench did not take turns", s.url)
		}
	}
	if err := run(context.Background(), []string{"bench", "--server", a.url + ",http://192.0.2.1:8080"}, getenv, &out, &errb); exitCode(err) != 2 {
		t.Errorf("bench with a remote server among the replicas = %v, want a usage error", err)
	}
}
