//go:build unix

package sqlite_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/logtest"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// TestFileModes runs TestFileModesUnderUmask022 in a child process whose umask is 022, the
// usual one, under which files are created readable by everyone: the umask is process-wide, so
// this process, whose tests run in parallel, keeps its own.
func TestFileModes(t *testing.T) {
	if os.Getenv("LEASEKEEPER_UMASK_CHILD") != "" {
		t.Skip("in the child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFileModesUnderUmask022$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "LEASEKEEPER_UMASK_CHILD="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child with umask 022 failed: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

func TestFileModesUnderUmask022(t *testing.T) {
	dir := os.Getenv("LEASEKEEPER_UMASK_CHILD")
	if dir == "" {
		t.Skip("runs in the child process of TestFileModes")
	}
	syscall.Umask(0o022)
	ctx := context.Background()
	path := filepath.Join(dir, "lk.db")
	mode := func(p string) fs.FileMode {
		t.Helper()
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("stat %s: %v", p, err)
		}
		return fi.Mode().Perm()
	}
	// What the umask gives a file nobody takes care of, so that the test means something.
	if err := os.WriteFile(filepath.Join(dir, "plain"), nil, 0o666); err != nil || mode(filepath.Join(dir, "plain")) != 0o644 {
		t.Fatalf("a plain file under umask 022 is %#o, %v; want 0644", mode(filepath.Join(dir, "plain")), err)
	}

	t.Run("NewDatabase", func(t *testing.T) {
		s, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			if m := mode(p); m != 0o600 {
				t.Errorf("%s is %#o, want 0600", filepath.Base(p), m)
			}
		}
		out := filepath.Join(dir, "backup.db")
		if err := sqlite.Backup(ctx, path, out); err != nil {
			t.Fatal(err)
		}
		if m := mode(out); m != 0o600 {
			t.Errorf("backup is %#o, want 0600", m)
		}
	})

	t.Run("ExistingDatabaseTightened", func(t *testing.T) {
		old := filepath.Join(dir, "old.db")
		s, err := sqlite.Open(ctx, old, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if err := os.Chmod(old, 0o644); err != nil { // as files were created before
			t.Fatal(err)
		}
		var log logtest.Sink
		s, err = sqlite.Open(ctx, old, sqlite.Options{Logger: log.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, p := range []string{old, old + "-wal", old + "-shm"} {
			if m := mode(p); m != 0o600 {
				t.Errorf("%s is %#o, want 0600", filepath.Base(p), m)
			}
		}
		if warns := log.Records(t, "WARN"); len(warns) != 1 {
			t.Errorf("warnings = %v, want one saying the file was made private", warns)
		}
	})
}

// TestPathWithURICharacters: a database path with the characters SQLite's URIs give a meaning
// to opens that file, not another one ("a#b.db" would otherwise be "a").
func TestPathWithURICharacters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a#b?c=1%20.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("no database at %q: %v", path, err)
	}
	for _, other := range []string{"a", "a#b", "a#b?c=1 .db"} {
		if _, err := os.Stat(filepath.Join(dir, other)); err == nil {
			t.Errorf("a database was opened at %q instead of %q", other, path)
		}
	}
}
