package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/postgres"
)

// TestDeadReplicaLeavesLine: the waiter of a replica that dies (its connections close, so its
// presence lock goes) without leaving the line does not hold up the line: the next waiter, on
// another replica, is granted the name once it is free, and the line counts only live waiters.
// While the dead replica lived, its waiter was first and the other was refused.
func TestDeadReplicaLeavesLine(t *testing.T) {
	url := srv.NewDatabase(t)
	lines := make(chan string, 16)
	a := open(t, url, nil, postgresOptions(lines))
	b := open(t, url, nil, postgresOptions(nil))
	dying := open(t, url, nil, postgresOptions(nil))
	ctx := context.Background()
	p := jobParams
	held, err := a.Acquire(ctx, p("holder"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := dying.JoinLine(ctx, "job", "w")
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.JoinLine(ctx, "job", "w")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := a.LineLength(ctx, "job"); err != nil || n != 2 {
		t.Fatalf("LineLength() = %d, %v; want 2", n, err)
	}
	if err := a.Release(ctx, "job", held.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx, p("barger")); !lease.IsCode(err, lease.CodeHeld) {
		t.Errorf("Acquire(not in line, two wait) = %v, want lease_held", err)
	}
	if _, ahead, err := b.AcquireInLine(ctx, p("second"), second); !lease.IsCode(err, lease.CodeHeld) || ahead != 1 {
		t.Fatalf("AcquireInLine(second, the first alive) = %v, %d ahead; want lease_held, 1 ahead", err, ahead)
	}

	dying.Close() // no LeaveLine: the replica is gone
	// Its server process ends, and drops the lock, a moment after the connection closes.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n, err := a.LineLength(ctx, "job")
		if err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("LineLength() 5 s after the first waiter's replica died = %d, %v; want 1", n, err)
		}
	}
	got, _, err := b.AcquireInLine(ctx, p("second"), second)
	if err != nil {
		t.Fatalf("AcquireInLine(second, the first's replica dead) = %v, want granted", err)
	}
	if got.Token <= held.Token {
		t.Errorf("token %d, want > %d", got.Token, held.Token)
	}
	if n, err := a.LineLength(ctx, "job"); err != nil || n != 0 {
		t.Errorf("LineLength() after the grant = %d, %v; want 0", n, err)
	}
	// Removing the dead waiter told every replica's line.
	select {
	case name := <-lines:
		if name != "job" {
			t.Errorf("line hook got %q, want job", name)
		}
	case <-time.After(5 * time.Second):
		t.Error("no replica was told that the line of job changed")
	}
	// The dead replica's place is gone for good.
	if _, _, err := b.AcquireInLine(ctx, p("ghost"), first); !lease.IsCode(err, lease.CodeHeld) {
		t.Errorf("AcquireInLine(a removed place, name held) = %v, want lease_held", err)
	}
}

// TestLostPlace: a waiter whose place was removed (its replica's session ended) is told
// unavailable when it tries, not granted and not left waiting.
func TestLostPlace(t *testing.T) {
	url := srv.NewDatabase(t)
	a := open(t, url, nil, postgresOptions(nil))
	dying := open(t, url, nil, postgresOptions(nil))
	ctx := context.Background()
	id, err := dying.JoinLine(ctx, "job", "w")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.LeaveLine(ctx, "job", id); err != nil {
		t.Fatal(err)
	}
	if _, _, err := dying.AcquireInLine(ctx, store.AcquireParams{Name: "job", Holder: "w", TTL: time.Minute}, id); !lease.IsCode(err, lease.CodeUnavailable) || !errors.Is(err, store.ErrPlaceLost) {
		t.Errorf("AcquireInLine(place removed, name free) = %v, want unavailable, ErrPlaceLost", err)
	}
}

// TestHandoverTargetFirstInLine: once a grant whose handover request named a holder ends, the
// first live waiter of that holder, whatever its replica, is granted the name before older
// waiters; the others keep their order, and so do later grants. The latest request of the
// grant counts; one naming nobody in line changes no order; a waiter of the named holder that
// joins after the grant ended (and before the next grant) goes first too, and an end by revoke
// counts as a release does.
func TestHandoverTargetFirstInLine(t *testing.T) {
	url := srv.NewDatabase(t)
	a := open(t, url, nil, postgresOptions(nil))
	b := open(t, url, nil, postgresOptions(nil))
	c := open(t, url, nil, postgresOptions(nil))
	ctx := context.Background()
	p := jobParams
	join := func(s *postgres.Store, holder string) int64 {
		t.Helper()
		id, err := s.JoinLine(ctx, "job", holder)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	handover := func(to string) {
		t.Helper()
		if _, err := b.RequestHandover(ctx, "job", lease.Handover{To: to, Reason: "deploy"}); err != nil {
			t.Fatalf("RequestHandover(to %q) = %v", to, err)
		}
	}
	refused := func(s *postgres.Store, holder string, id int64, wantAhead int) {
		t.Helper()
		if _, ahead, err := s.AcquireInLine(ctx, p(holder), id); !lease.IsCode(err, lease.CodeHeld) || ahead != wantAhead {
			t.Fatalf("AcquireInLine(%s) = %v, %d ahead; want lease_held, %d ahead", holder, err, ahead, wantAhead)
		}
	}
	granted := func(s *postgres.Store, holder string, id int64) lease.Lease {
		t.Helper()
		l, _, err := s.AcquireInLine(ctx, p(holder), id)
		if err != nil {
			t.Fatalf("AcquireInLine(%s) = %v, want granted", holder, err)
		}
		return l
	}

	held, err := a.Acquire(ctx, p("holder"))
	if err != nil {
		t.Fatal(err)
	}
	w0 := join(a, "w0")
	next := join(c, "next")
	again := join(a, "next") // a second waiter of the holder named keeps its place
	w3 := join(b, "w3")
	handover("w3")
	handover("next")            // the latest request of the grant counts
	refused(c, "next", next, 0) // the grant has not ended
	if err := b.Release(ctx, "job", held.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx, p("barger")); !lease.IsCode(err, lease.CodeHeld) {
		t.Errorf("Acquire(not in line) = %v, want lease_held", err)
	}
	refused(a, "w0", w0, 1)
	refused(a, "next", again, 2)
	g := granted(c, "next", next)

	// The next grant has no request: first come first served again.
	if err := c.Release(ctx, "job", g.ID); err != nil {
		t.Fatal(err)
	}
	refused(a, "next", again, 1)
	g = granted(a, "w0", w0)

	// A request naming nobody in line, ended by a revoke; then its holder joins.
	handover("late")
	if err := b.Revoke(ctx, "job", g.Token, "admin"); err != nil {
		t.Fatal(err)
	}
	late := join(b, "late")
	refused(a, "next", again, 1)
	g = granted(b, "late", late)
	if err := b.Release(ctx, "job", g.ID); err != nil {
		t.Fatal(err)
	}
	refused(b, "w3", w3, 1)
	granted(a, "next", again)
}

// jobParams asks for the name job as holder for a minute.
func jobParams(holder string) store.AcquireParams {
	return store.AcquireParams{Name: "job", Holder: holder, TTL: time.Minute}
}
