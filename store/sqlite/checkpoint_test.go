package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/store"
)

// TestCheckpointsOffTheWriter: the writer never checkpoints (so no commit pays for copying the
// WAL into the database), and the background checkpointer keeps the WAL from growing with
// everything ever written.
func TestCheckpointsOffTheWriter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "leasekeeper.db")
	s, err := Open(ctx, path, Options{CheckpointEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var auto int
	if err := s.w.QueryRow(`PRAGMA wal_autocheckpoint`).Scan(&auto); err != nil {
		t.Fatal(err)
	}
	if auto != 0 {
		t.Errorf("writer's wal_autocheckpoint = %d, want 0 (the checkpointer's job)", auto)
	}
	// 16 MiB written in 4 KiB values: without checkpoints the WAL would hold all of it.
	const n, size = 4096, 4 << 10
	value := bytes.Repeat([]byte("x"), size)
	for i := range n {
		if _, err := s.PutResource(ctx, store.ResourceWrite{Name: fmt.Sprintf("r-%d", i%64), Token: 0, Value: value}); err != nil {
			t.Fatal(err)
		}
	}
	if s.cp.runs.Load() == 0 {
		t.Fatal("the checkpointer never ran")
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > n*size/2 {
		t.Errorf("WAL is %d bytes after %d bytes were written: not checkpointed as it went", fi.Size(), n*size)
	}
}

// TestCheckpointsTheStart: what the start-up wrote (a restart's stretch of every open grant)
// is copied into the database file without waiting for a write to follow it.
func TestCheckpointsTheStart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "leasekeeper.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, store.AcquireParams{Name: "a", Holder: "w", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, path, Options{CheckpointEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for deadline := time.Now().Add(time.Minute); s.cp.runs.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint after the start-up write, and no write since")
		}
	}
}
