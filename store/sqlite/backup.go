package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
)

// Backup writes a consistent copy of the database at path to out (which must not exist, and is
// created 0600 like the database), while a server may be using it: SQLite's VACUUM INTO reads
// one snapshot in a read transaction. A restored backup is safe to serve from: tokens keep
// growing past everything issued after it was taken, because the token rule follows the clock
// (invariant 2).
func Backup(ctx context.Context, path, out string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("backup to %s: the file exists", out)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("backup to %s: %w", out, err)
	}
	q := url.Values{}
	q.Set("_busy_timeout", "10000")
	q.Set("mode", "ro")
	db, err := sql.Open("sqlite3", fileURI(path, q))
	if err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	defer db.Close()
	// VACUUM INTO fills an empty file as it is: created here, it is private from the start.
	if created, err := createPrivate(out); err != nil || !created {
		return fmt.Errorf("backup to %s: %w", out, errors.Join(err, fs.ErrExist))
	}
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, out); err != nil {
		os.Remove(out)
		return fmt.Errorf("backup %s to %s: %w", path, out, w(err))
	}
	return nil
}
