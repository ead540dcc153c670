// Package migrations holds the versioned SQL schema of each backend, embedded in the binary
// and applied in order at start-up. Files are named NNNN_name.sql in goose's format.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed sqlite/*.sql postgres/*.sql
var files embed.FS

// SQLite returns the SQLite migrations.
func SQLite() fs.FS { return dir("sqlite") }

// Postgres returns the PostgreSQL migrations.
func Postgres() fs.FS { return dir("postgres") }

func dir(name string) fs.FS {
	sub, err := fs.Sub(files, name)
	if err != nil {
		panic(err) // the directories are embedded above; this cannot fail
	}
	return sub
}
