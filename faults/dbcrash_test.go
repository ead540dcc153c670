package faults

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/pgtest"
)

// crashPG is the PostgreSQL cluster the database-crash test crashes: a throwaway one of its own,
// so that no other test's database goes down with it.
//
// A crash of the server (not of the machine) loses what PostgreSQL had not written to its WAL
// files yet; what it wrote is in the operating system's cache and survives. So fsync stays off
// (as in every test cluster: fast on a shared disk, and a process crash cannot tell). The
// server's synchronous_commit is off, as a database tuned for speed may have it: the store
// must not depend on it, and commits its own connections synchronously (a synchronous commit
// writes the WAL through its commit record before it returns; the store's flush after an
// asynchronous commit is one). wal_writer_delay is its maximum, 10 s: the WAL writer then
// writes an asynchronous commit within 10 s (or when a page of WAL fills), so a commit
// answered without the flush is still in the server's memory when the crash comes right after
// it, and is lost — what the test must see if the flush goes missing.
var crashPG = &pgtest.Server{Settings: []string{"synchronous_commit=off", "wal_writer_delay=10000ms"}}

// TestDatabaseCrash crashes PostgreSQL (pg_ctl stop -m immediate, then start) several times
// under a replica (the real binary) serving 32 clients that acquire, renew, release and write
// with their tokens (invariant 10). In each round the clients run until they have answers, then
// send no fenced writes for a moment (a fenced write commits synchronously today, which would
// flush the answered commits before it and hide a missing flush), and the database crashes
// under them. While it is down, every answer is 503 with Retry-After, /readyz too, and nothing
// succeeds; when it is back the replica serves again by itself, and every acknowledged grant,
// renewal, release and fenced write is there, new tokens above every acknowledged one.
func TestDatabaseCrash(t *testing.T) {
	w := dbFaultLoop(t, binary(t), crashPG, cycles(4, 20),
		func() { crashPG.Down(t, "immediate") }, func() { crashPG.Up(t) })
	w.report(t, "PostgreSQL crash")
}

// dbFaultLoop runs n rounds of the workload against bin serving a database of srv, with down
// (which stops the database) called under load and up (which starts it again) after the
// outage was probed; see TestDatabaseCrash.
func dbFaultLoop(t *testing.T, bin string, srv *pgtest.Server, n int, down, up func()) *workload {
	db := srv.NewDatabase(t)
	s := startArgs(t, bin, db, []string{"--secret-file", filepath.Join(t.TempDir(), "secret")})
	w := newWorkload(t, 32)
	w.only503 = true
	ctx := context.Background()
	for round := range n {
		w.verify(ctx, s)
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { w.run(cctx, s); close(done) }()
		acked := w.fig.acked.Load()
		waitAcked(w, acked+64)
		w.noPuts.Store(true)
		waitAcked(w, w.fig.acked.Load()+32)
		down()
		downAt := time.Now()
		probeOutage(t, ctx, s, round)
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("clients still running 30 s after the crash")
		}
		up()
		upAt := time.Now()
		waitReady(t, ctx, s)
		t.Logf("round %d: the database was down %v; the replica was ready %v after it was back",
			round, upAt.Sub(downAt).Round(time.Millisecond), time.Since(upAt).Round(time.Millisecond))
		w.noPuts.Store(false)
		w.fig.cycles.Add(1)
	}
	w.verify(ctx, s)
	return w
}

// waitAcked waits until the clients have had n acknowledgements in all, or 20 s: on a loaded
// machine the first answers can be slow, and a crash with nothing acknowledged checks nothing.
func waitAcked(w *workload, n int64) {
	for wait := time.Now(); w.fig.acked.Load() < n && time.Since(wait) < 20*time.Second; {
		time.Sleep(5 * time.Millisecond)
	}
}

// probeOutage sends, while the database is down, one of each kind of request: a grant, a
// renewal, a release, a fenced write, a read and /readyz. Each must be answered 503 with
// Retry-After (never a 500, never a success), however often it is asked.
func probeOutage(t *testing.T, ctx context.Context, s *server, round int) {
	t.Helper()
	name := "outage-" + strconv.Itoa(round)
	probes := []struct {
		what, method, path string
		body               any
		hdr                []string
	}{
		{"acquire", "POST", "/v1/leases/" + name + "/acquire", map[string]any{"holder": "probe", "ttl_ms": 1000}, nil},
		{"renew", "POST", "/v1/leases/fault-00/renew", map[string]any{"lease_id": "not-a-lease", "ttl_ms": 1000}, nil},
		{"release", "POST", "/v1/leases/fault-00/release", map[string]any{"lease_id": "not-a-lease"}, nil},
		{"fenced write", "PUT", "/v1/resources/" + name, []byte("x"), []string{"Fencing-Token", "1", "Content-Type", "text/plain"}},
		{"read", "GET", "/v1/leases/fault-00", nil, nil},
		{"readyz", "GET", "/readyz", nil, nil},
	}
	for range 3 {
		for _, p := range probes {
			rep := s.call(ctx, p.method, p.path, p.body, p.hdr...)
			switch {
			case rep.err != nil:
				t.Errorf("%s while the database is down: %v", p.what, rep.err)
			case rep.status != http.StatusServiceUnavailable || rep.header.Get("Retry-After") == "":
				t.Errorf("%s while the database is down = %d (Retry-After %q), want 503 with Retry-After: %s",
					p.what, rep.status, rep.header.Get("Retry-After"), rep.body)
			}
		}
	}
}

// waitReady waits until s answers /readyz 200, at most 30 s: the replica
// recovers without a restart.
func waitReady(t *testing.T, ctx context.Context, s *server) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if s.call(ctx, "GET", "/readyz", nil).status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica is not ready 30 s after the database came back; its log:\n%s", s.stderr)
		}
	}
}
