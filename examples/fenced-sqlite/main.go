// Command fenced-sqlite guards a row of its own SQLite database with a
// leasekeeper fencing token.
//
// It takes the lease on -name from a leasekeeper server with the Go client,
// writes the row -name of table kv through fence.Table (which refuses any
// token below the row's fence, in the same statement as the write), and
// releases the lease; a write the fence refuses is reported to the server,
// which shows it on its dashboard. With -token it skips the lease and writes
// with that token, as a holder that paused and lost its lease would: a token
// below the row's fence is refused and reported.
//
// The API key, when the server needs one, comes from LEASEKEEPER_API_KEY.
// See README.md for a walk-through.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/fence"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fenced-sqlite:", err)
		os.Exit(1)
	}
}

const schema = `CREATE TABLE IF NOT EXISTS kv (
	name       TEXT PRIMARY KEY,
	value      TEXT NOT NULL,
	holder     TEXT NOT NULL,
	written_at TEXT NOT NULL,
	fence      INTEGER NOT NULL
)`

// userAgent is recorded by the server with every rejection this program reports.
const userAgent = "fenced-sqlite/1.0"

// errStale is returned (wrapped) when the write was refused as stale.
var errStale = errors.New("write refused")

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("fenced-sqlite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "http://127.0.0.1:8080", "leasekeeper server URL")
	dbPath := fs.String("db", "fenced.db", "SQLite file to write to (created if missing)")
	name := fs.String("name", "fenced-sqlite-demo", "lease name, also the key of the row written")
	holder := fs.String("holder", fmt.Sprintf("fenced-sqlite@%s/%d", host, os.Getpid()), "holder shown by leasekeeper")
	ttl := fs.Duration("ttl", 10*time.Second, "lease duration")
	token := fs.Int64("token", -1, "write with this token instead of acquiring a lease (to show a stale write)")
	value := fs.String("value", "", "value to write (default: a message with the time)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	db, err := openDB(*dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	opts := []client.Option{client.WithUserAgent(userAgent)}
	if key := getenv("LEASEKEEPER_API_KEY"); key != "" {
		opts = append(opts, client.WithAPIKey(key))
	}
	c, err := client.New(*server, opts...)
	if err != nil {
		return err
	}
	defer c.Close()

	reporter := c.Reporter()
	reporter.Timeout = 5 * time.Second
	kv := fence.Table{Name: "kv", KeyColumn: "name", FenceColumn: "fence", Lease: *name,
		OnReject: func(ctx context.Context, r fence.Rejection) {
			r.Reason = "stale write to table kv in " + *dbPath
			if err := reporter.Report(ctx, r); err != nil {
				fmt.Fprintf(stderr, "reporting the rejection: %v\n", err)
				return
			}
			fmt.Fprintln(stdout, "rejection reported to leasekeeper")
		}}
	if *value == "" {
		*value = fmt.Sprintf("written by %s at %s", *holder, time.Now().UTC().Format(time.RFC3339Nano))
	}
	write := func(ctx context.Context, token int64) error {
		err := kv.Upsert(ctx, db, *name, token, map[string]any{
			"value":      *value,
			"holder":     *holder,
			"written_at": time.Now().UTC().Format(time.RFC3339Nano),
		})
		if stale, ok := errors.AsType[*fence.StaleTokenError](err); ok {
			fmt.Fprintf(stdout, "refused: token %d is below the row's fence %d\n", stale.PresentedToken, stale.CurrentFence)
			return fmt.Errorf("%w: %w", errStale, err)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote row %q with token %d\n", *name, token)
		return nil
	}

	if *token >= 0 {
		fmt.Fprintf(stdout, "writing with forced token %d, no lease\n", *token)
		return write(ctx, *token)
	}
	// Do releases the lease however the write ends, and its error says whether the lease
	// was lost meanwhile (errors.Is client.ErrLeaseLost): work may then have overlapped.
	return client.Do(ctx, c, *name, client.AcquireOptions{Holder: *holder, TTL: *ttl},
		func(ctx context.Context, token int64) error {
			fmt.Fprintf(stdout, "acquired %q: token %d\n", *name, token)
			return write(ctx, token)
		})
}

// openDB opens (creating if needed) the SQLite file and its table.
func openDB(path string) (*sql.DB, error) {
	q := url.Values{
		"_journal_mode": {"WAL"},
		"_synchronous":  {"FULL"},
		"_busy_timeout": {"5000"},
		"_txlock":       {"immediate"},
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: create table: %w", path, err)
	}
	return db, nil
}
