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
