package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
)

// private is the mode of the database files: they hold resource values, holders, client
// addresses and hashes of secrets, readable by the server's user alone.
const private fs.FileMode = 0o600

// createPrivate creates the file at path with mode 0600, whatever the umask, unless it exists.
// SQLite gives the WAL and shared-memory files it creates beside a database the database's
// mode, so creating the database file first is what keeps all three private.
func createPrivate(path string) (created bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, private)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// The umask may have taken bits of 0600 away (then the server could not write it).
	err = errors.Join(f.Chmod(private), f.Close())
	return true, err
}

// tighten takes group and other permissions away from the database files that exist: a
// database created before files were made private, or by hand, would otherwise stay readable
// by other users, and its new WAL files with it. Files the server does not own are left as
// they are, with a warning.
func tighten(path string, log *slog.Logger) {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		mode := fi.Mode().Perm()
		if mode&0o077 == 0 {
			continue
		}
		if err := os.Chmod(p, mode&^0o077); err != nil {
			log.Warn("database file is readable by other users and could not be made private", "file", p,
				"mode", fmt.Sprintf("%#o", mode), "err", err)
			continue
		}
		log.Warn("made a database file private", "file", p, "mode", fmt.Sprintf("%#o", mode), "now", fmt.Sprintf("%#o", mode&^0o077))
	}
}
