package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/testwait"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

func modeParams(name, holder string, mode lease.Mode) store.AcquireParams {
	return store.AcquireParams{Name: name, Holder: holder, TTL: time.Minute, Mode: mode}
}

// TestWritersNeverStarve: one line per name for both modes. Once a writer waits behind a
// reader, a later reader is refused without wait_ms and waits behind the writer with it,
// though the name is held shared; the writer is granted when the reader lets go; the readers
// that waited behind it are then granted together. On SQLite the line is the server's; on
// PostgreSQL it is the database's.
func TestWritersNeverStarve(t *testing.T) { onBothLines(t, testWritersNeverStarve) }

func testWritersNeverStarve(t *testing.T, f *fixture) {
	ctx := context.Background()
	r0, err := f.line.Acquire(ctx, modeParams("cfg", "r0", lease.ModeShared), 0)
	if err != nil {
		t.Fatal(err)
	}
	writer := make(chan result, 1)
	go func() {
		l, err := f.line.Acquire(ctx, modeParams("cfg", "w", lease.ModeExclusive), time.Minute)
		writer <- result{l, err}
	}()
	waitFor(t, "the writer in line", func() bool { return f.line.Waiters("cfg") == 1 })
	if _, err := f.line.Acquire(ctx, modeParams("cfg", "late", lease.ModeShared), 0); !lease.IsCode(err, lease.CodeHeld) {
		t.Fatalf("Acquire(shared, no wait, a writer waiting) = %v, want lease_held", err)
	}
	readers := make(chan result, 2)
	for i, holder := range []string{"r1", "r2"} {
		go func() {
			l, err := f.line.Acquire(ctx, modeParams("cfg", holder, lease.ModeShared), time.Minute)
			readers <- result{l, err}
		}()
		waitFor(t, holder+" in line", func() bool { return f.line.Waiters("cfg") == i+2 })
	}
	if err := f.st.Release(ctx, "cfg", r0.ID); err != nil {
		t.Fatal(err)
	}
	w := testwait.Receive(t, writer, 5*time.Second)
	if w.err != nil || w.l.Holder != "w" || w.l.Mode == lease.ModeShared {
		t.Fatalf("the writer's wait = %+v, %v; want it granted first", w.l, w.err)
	}
	if st, err := f.st.Get(ctx, "cfg"); err != nil || !st.Held || st.Holder != "w" || st.Mode == lease.ModeShared {
		t.Fatalf("cfg once the writer has it = %+v, %v; want w alone", st, err)
	}
	if err := f.st.Release(ctx, "cfg", w.l.ID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if r := testwait.Receive(t, readers, 5*time.Second); r.err != nil || r.l.Mode != lease.ModeShared {
			t.Fatalf("a reader's wait = %+v, %v; want a shared grant", r.l, r.err)
		}
	}
	if st, err := f.st.Get(ctx, "cfg"); err != nil || len(st.Holders) != 2 {
		t.Errorf("cfg after the writer = %+v, %v; want r1 and r2 holding it together", st, err)
	}
}

// TestSharedSetsWaitBehindWriters: a shared acquire of several names keeps the line's rules of
// both. Without a wait it is refused while a writer waits for one of its names, though that
// name is only read and the others are free, and it grants none of them; waiting, it holds none
// of its names, is granted only after the writer ahead of it, and the readers of sets that
// waited behind the writer are then granted together, beside each other.
func TestSharedSetsWaitBehindWriters(t *testing.T) { onBothLines(t, testSharedSetsWaitBehindWriters) }

func testSharedSetsWaitBehindWriters(t *testing.T, f *fixture) {
	ctx := context.Background()
	shared := func(holder string, names ...string) store.AcquireAllParams {
		p := allParams(holder, names...)
		p.Mode = lease.ModeShared
		return p
	}
	r0, err := f.line.Acquire(ctx, modeParams("a", "r0", lease.ModeShared), 0)
	if err != nil {
		t.Fatal(err)
	}
	writer := make(chan result, 1)
	go func() {
		l, err := f.line.Acquire(ctx, modeParams("a", "w", lease.ModeExclusive), time.Minute)
		writer <- result{l, err}
	}()
	waitFor(t, "the writer in line", func() bool { return f.line.Waiters("a") == 1 })
	if _, err := f.line.AcquireAll(ctx, shared("late", "b", "a"), 0); !lease.IsCode(err, lease.CodeHeld) {
		t.Fatalf("AcquireAll([b a] shared, no wait, a writer waiting for a) = %v, want lease_held", err)
	}
	if _, err := f.st.Get(ctx, "b"); !lease.IsCode(err, lease.CodeNotFound) {
		t.Errorf("Get(b) after the refused set = %v, want not_found", err)
	}
	readers := make(chan grant, 2)
	for i, set := range [][]string{{"a", "b"}, {"c", "a"}} {
		holder := "s" + set[0] + set[1]
		go func() {
			ls, err := f.line.AcquireAll(ctx, shared(holder, set...), time.Minute)
			readers <- grant{holder, ls, err}
		}()
		waitFor(t, holder+" in line", func() bool { return f.line.Waiters("a") == i+2 })
	}
	if err := f.st.Release(ctx, "a", r0.ID); err != nil {
		t.Fatal(err)
	}
	w := testwait.Receive(t, writer, 10*time.Second)
	if w.err != nil || w.l.Holder != "w" || w.l.Mode == lease.ModeShared {
		t.Fatalf("the writer's wait = %+v, %v; want it granted first", w.l, w.err)
	}
	for _, n := range []string{"b", "c"} {
		if st, err := f.st.Get(ctx, n); err == nil && st.Held {
			t.Errorf("%s while its reader waits behind the writer = %+v, want free: a waiter holds none of its names", n, st)
		}
	}
	if err := f.st.Release(ctx, "a", w.l.ID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		g := testwait.Receive(t, readers, 10*time.Second)
		if g.err != nil || len(g.ls) != 2 || g.ls[0].Mode != lease.ModeShared || g.ls[1].Mode != lease.ModeShared {
			t.Fatalf("%s's wait = %+v, %v; want both names shared", g.holder, g.ls, g.err)
		}
	}
	if st, err := f.st.Get(ctx, "a"); err != nil || len(st.Holders) != 2 {
		t.Errorf("a after the writer = %+v, %v; want both sets' readers holding it together", st, err)
	}
}
