package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
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
	p := func(holder string) store.AcquireParams {
		return store.AcquireParams{Name: "job", Holder: holder, TTL: time.Minute}
	}
	held, err := a.Acquire(ctx, p("holder"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := dying.JoinLine(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.JoinLine(ctx, "job")
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
	id, err := dying.JoinLine(ctx, "job")
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
