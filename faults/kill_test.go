package faults

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"
)

// loop runs the workload of 32 clients against bin over db for n cycles: each cycle restarts
// the server, verifies every acknowledged operation, drives the clients and calls fault at a
// random moment; fault must leave the server stopped. A last restart verifies the last cycle.
func loop(t *testing.T, bin, db string, n int, fault func(*server)) *workload {
	w := newWorkload(t, 32)
	ctx := context.Background()
	for range n {
		s := start(t, bin, db)
		w.verify(ctx, s)
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		acked := w.fig.acked.Load()
		go func() { w.run(cctx, s); close(done) }()
		time.Sleep(time.Duration(50+rand.IntN(400)) * time.Millisecond) // the fault's random moment
		// …but not before the clients have had some answers: on a loaded machine the first
		// ones can take longer than that, and a fault with nothing acknowledged checks nothing.
		for wait := time.Now(); w.fig.acked.Load()-acked < 8 && time.Since(wait) < 20*time.Second; {
			time.Sleep(10 * time.Millisecond)
		}
		fault(s)
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("clients still running 30 s after the fault")
		}
		w.fig.cycles.Add(1)
	}
	w.verify(ctx, start(t, bin, db))
	return w
}

// killLoop kills the server with SIGKILL in each cycle (invariants 2, 3 and 5).
func killLoop(t *testing.T, bin string, n int) *workload {
	return loop(t, bin, filepath.Join(t.TempDir(), "lk.db"), n, func(s *server) { s.kill() })
}

// TestKill9Loop: no acknowledged grant, renewal, release or fenced write is lost across kill -9,
// and every grant's token is above every token acknowledged before it.
func TestKill9Loop(t *testing.T) {
	w := killLoop(t, binary(t), cycles(3, 200))
	w.report(t, "kill -9")
}

// TestKill9LoopCatchesLostRelease is the checker's negative control: a server that answers
// 204 to a release without making it must be caught.
func TestKill9LoopCatchesLostRelease(t *testing.T) {
	bin := binary(t, mutation{file: "handlers/leases.go",
		find: "err = s.store.Release(ctx, req.Name, req.Body.LeaseId)",
		repl: "_ = s.store.Release"})
	w := killLoop(t, bin, 2)
	t.Logf("kill -9 with releases not made: %s", &w.fig)
	w.logFirst(t, 3)
	if w.fig.lost.Load() == 0 {
		t.Fatal("the kill -9 check found no lost release against a server that makes none")
	}
}
