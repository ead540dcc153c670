package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// TestDiskFullReserve fills a real file system (a 4 MiB tmpfs) to its last byte, with the
// database and a file beside it: then deleting a resource, releasing and revoking a lease and
// closing a session each commit at the first try, every time (the disk reserve is given back
// for them), while writes that need room answer unavailable, never an internal error; and once
// room is made outside the database, writes work again without a restart.
func TestDiskFullReserve(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("*** SKIPPING: mounting a tmpfs needs root ***")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("*** SKIPPING: mount a tmpfs: %v ***", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	ctx := context.Background()
	clock := lease.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	s, err := sqlite.Open(ctx, filepath.Join(dir, "leasekeeper.db"), sqlite.Options{Clock: clock, Reserve: 256 << 10})
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	acquire := func(name string) (lease.Lease, error) {
		return s.Acquire(ctx, store.AcquireParams{Name: name, Holder: "w", TTL: time.Hour})
	}
	job, err := acquire("job")
	if err != nil {
		t.Fatal(err)
	}
	var held []lease.Lease
	for i := range 4 {
		l, err := acquire(fmt.Sprintf("held-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	ses, err := s.OpenSession(ctx, store.SessionParams{Holder: "w", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string, size int) error {
		_, err := s.PutResource(ctx, store.ResourceWrite{Name: name, Token: job.Token, Value: bytes.Repeat([]byte("x"), size)})
		return err
	}
	// A file beside the database takes all but 1 MiB of the disk; the database fills that.
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, int64(st.Bavail)*st.Bsize-1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	// A disk fills slowly, and the background checkpoints keep the WAL short meanwhile: here
	// a connection of the test's own checkpoints after each write.
	db, err := sql.Open("sqlite3", filepath.Join(dir, "leasekeeper.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	written := 0
	for ; written < 200; written++ {
		db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`) // near the end it may find no room to copy to
		if err := put(fmt.Sprintf("fill-%d", written), 64<<10); err != nil {
			if !lease.IsCode(err, lease.CodeUnavailable) {
				t.Fatalf("PutResource(fill-%d) = %v, want unavailable (disk full)", written, err)
			}
			break
		}
	}
	if written < 4 || written == 200 {
		t.Fatalf("%d writes of 64 KiB before the disk was full", written)
	}

	for i := range 3 {
		if err := put(fmt.Sprintf("more-%d", i), 64<<10); !lease.IsCode(err, lease.CodeUnavailable) {
			t.Fatalf("PutResource(more-%d) on a full disk = %v, want unavailable", i, err)
		}
		if _, err := acquire(fmt.Sprintf("new-%d", i)); err != nil && !lease.IsCode(err, lease.CodeUnavailable) {
			t.Fatalf("Acquire(new-%d) on a full disk = %v, want a grant or unavailable", i, err)
		}
		if err := s.DeleteResource(ctx, fmt.Sprintf("fill-%d", i), "test"); err != nil {
			t.Fatalf("DeleteResource(fill-%d) on a full disk = %v, want it to commit at once", i, err)
		}
	}
	for i, l := range held[:2] {
		if err := s.Release(ctx, l.Name, l.ID); err != nil {
			t.Errorf("Release(%s) on a full disk = %v, want it to commit at once", l.Name, err)
		}
		// The deletes freed pages the database reuses: a write may fit in them now, or not
		// (how many pages the log gave back depends on the indexes); either way it is
		// answered as one, never as a failure of another kind.
		if err := put(fmt.Sprintf("again-%d", i), 64<<10); err != nil && !lease.IsCode(err, lease.CodeUnavailable) {
			t.Fatalf("PutResource(again-%d) on a full disk = %v, want a write or unavailable", i, err)
		}
	}
	if err := s.Revoke(ctx, held[2].Name, 0, "test"); err != nil {
		t.Errorf("Revoke(%s) on a full disk = %v, want it to commit at once", held[2].Name, err)
	}
	if _, err := s.CloseSession(ctx, ses.ID, ""); err != nil {
		t.Errorf("CloseSession() on a full disk = %v, want it to commit at once", err)
	}

	// Room made outside the database: writes work again.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := put("after", 8<<10); err != nil {
		t.Errorf("PutResource() once there is room = %v", err)
	}
	if _, err := acquire("after"); err != nil {
		t.Errorf("Acquire() once there is room = %v", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping() once there is room = %v, want ready", err)
	}
}
