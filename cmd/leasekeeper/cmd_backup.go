package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// backupCommand writes a consistent copy of the database, safe to take while serve runs.
func backupCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	setUsage(fs)
	db := getenv("LEASEKEEPER_DB")
	if db == "" {
		db = "./leasekeeper.db"
	}
	fs.StringVar(&db, "db", db, "the SQLite database to copy (env LEASEKEEPER_DB)")
	out := fs.String("out", "", "the file to write; it must not exist (required)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return &exitError{code: 2, err: fmt.Errorf("backup takes no arguments, got %q", fs.Args())}
	case *out == "":
		return &exitError{code: 2, err: errors.New("backup: --out is required")}
	}
	if isPostgres(db) {
		return &exitError{code: 2, err: errors.New("backup copies a SQLite database; back up PostgreSQL with pg_dump (see README)")}
	}
	if err := sqlite.Backup(ctx, db, *out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backed up %s to %s\n", db, *out)
	return nil
}
