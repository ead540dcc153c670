// Command fenced-sqlite guards a row of its own SQLite database with a
// leasekeeper fencing token.
//
// It acquires the lease on -name from a leasekeeper server, writes the row
// -name of table kv through fence.Table (which refuses any token below the
// row's fence, in the same statement as the write), releases the lease, and
// reports to the server any write the fence refused. With -token it skips
// the lease and writes with that token, as a holder that paused and lost its
// lease would: a token below the row's fence is refused and reported.
//
// See README.md for a walk-through.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/leasekeeper/leasekeeper/fence"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fenced-sqlite:", err)
		os.Exit(1)
	}
}

// kv is the guarded table: one row per lease name, with its own fence.
var kv = fence.Table{Name: "kv", KeyColumn: "name", FenceColumn: "fence"}

const schema = `CREATE TABLE IF NOT EXISTS kv (
	name       TEXT PRIMARY KEY,
	value      TEXT NOT NULL,
	holder     TEXT NOT NULL,
	written_at TEXT NOT NULL,
	fence      INTEGER NOT NULL
)`

// errStale is returned (wrapped) when the write was refused as stale.
var errStale = errors.New("write refused")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
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

	lk := &leasekeeper{base: strings.TrimRight(*server, "/"), client: &http.Client{Timeout: 30 * time.Second}}
	tok := *token
	if tok < 0 {
		lease, err := lk.acquire(ctx, *name, *holder, *ttl)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "acquired %q: token %d\n", *name, lease.Token)
		tok = lease.Token
		defer func() {
			// Release even when ctx was canceled: the lease should not
			// outlive the work.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := lk.release(rctx, *name, lease.LeaseID); err != nil {
				fmt.Fprintf(stderr, "release %q: %v\n", *name, err)
			}
		}()
	} else {
		fmt.Fprintf(stdout, "writing with forced token %d, no lease\n", tok)
	}

	if *value == "" {
		*value = fmt.Sprintf("written by %s at %s", *holder, time.Now().UTC().Format(time.RFC3339Nano))
	}
	err = kv.Upsert(ctx, db, *name, tok, map[string]any{
		"value":      *value,
		"holder":     *holder,
		"written_at": time.Now().UTC().Format(time.RFC3339Nano),
	})
	var stale *fence.StaleTokenError
	switch {
	case errors.As(err, &stale):
		fmt.Fprintf(stdout, "refused: token %d is below the row's fence %d\n", stale.PresentedToken, stale.CurrentFence)
		rep := &fence.Reporter{BaseURL: lk.base, Client: lk.client, Timeout: 5 * time.Second}
		rerr := rep.Report(ctx, fence.Rejection{
			Resource:       *name,
			Lease:          *name,
			PresentedToken: stale.PresentedToken,
			CurrentFence:   stale.CurrentFence,
			Reason:         "stale write to table kv in " + *dbPath,
		})
		if rerr != nil {
			fmt.Fprintf(stderr, "reporting the rejection: %v\n", rerr)
		} else {
			fmt.Fprintln(stdout, "rejection reported to leasekeeper")
		}
		return fmt.Errorf("%w: %w", errStale, err)
	case err != nil:
		return err
	}
	fmt.Fprintf(stdout, "wrote row %q with token %d\n", *name, tok)
	return nil
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

// leasekeeper is a minimal client for the two lease endpoints the example
// uses; real programs would use the project's client package.
type leasekeeper struct {
	base   string
	client *http.Client
}

// lease is the part of the acquire answer the example needs.
type lease struct {
	Token   int64  `json:"token"`
	LeaseID string `json:"lease_id"`
	Holder  string `json:"holder"`
}

// problem is the part of an RFC 9457 error body the example prints.
type problem struct {
	Code      string `json:"code"`
	Detail    string `json:"detail"`
	Title     string `json:"title"`
	Holder    string `json:"holder"`
	ExpiresAt string `json:"expires_at"`
}

func (l *leasekeeper) post(ctx context.Context, path string, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.base+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return l.client.Do(req)
}

// failure turns a non-success answer into an error with its problem detail.
func failure(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	var p problem
	if json.Unmarshal(b, &p) != nil || p.Code == "" {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	msg := fmt.Sprintf("%s: %s", resp.Status, p.Code)
	if p.Detail != "" {
		msg += ": " + p.Detail
	}
	if p.Holder != "" {
		msg += fmt.Sprintf(" (held by %s until %s)", p.Holder, p.ExpiresAt)
	}
	return errors.New(msg)
}

func (l *leasekeeper) acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease, error) {
	resp, err := l.post(ctx, "/v1/leases/"+url.PathEscape(name)+"/acquire",
		map[string]any{"holder": holder, "ttl_ms": ttl.Milliseconds()})
	if err != nil {
		return lease{}, fmt.Errorf("acquire %q: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return lease{}, fmt.Errorf("acquire %q: %w", name, failure(resp))
	}
	var ls lease
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ls); err != nil {
		return lease{}, fmt.Errorf("acquire %q: decode answer: %w", name, err)
	}
	if h := resp.Header.Get(fence.Header); h != "" {
		if ht, err := fence.ParseToken(h); err != nil || ht != ls.Token {
			return lease{}, fmt.Errorf("acquire %q: %s header %q does not match token %d", name, fence.Header, h, ls.Token)
		}
	}
	if ls.LeaseID == "" || ls.Token < 0 || ls.Token > fence.MaxToken {
		return lease{}, fmt.Errorf("acquire %q: answer lacks a lease_id or a valid token (%d)", name, ls.Token)
	}
	return ls, nil
}

func (l *leasekeeper) release(ctx context.Context, name, leaseID string) error {
	resp, err := l.post(ctx, "/v1/leases/"+url.PathEscape(name)+"/release", map[string]string{"lease_id": leaseID})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		// 409 lease_lost means the lease ended before the release: another
		// holder may have run in between, which is what the fence is for.
		return failure(resp)
	}
	return nil
}
