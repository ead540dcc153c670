package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
)

// sessionCommand runs `leasekeeper session open|close`: a session to share among processes
// (acquire, lock and run hold their leases under the one LEASEKEEPER_SESSION_ID names), as
// `consul session create` gives a session to several `consul lock`s.
func sessionCommand(ctx context.Context, cf *clientFlags, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return &exitError{code: 2, err: errors.New("session: say open or close")}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		_, err := cf.parseAll([]string{"-h"})
		return err
	}
	switch args[0] {
	case "open", "close":
		cf.fs.Init("session "+args[0], flag.ContinueOnError) // its -h and errors are about the subcommand
	}
	switch sub, args := args[0], args[1:]; sub {
	case "open":
		return sessionOpen(ctx, cf, args, getenv, stdout)
	case "close":
		return sessionClose(ctx, cf, args, getenv, stdout)
	default:
		return &exitError{code: 2, err: fmt.Errorf("session: unknown subcommand %q (open or close)", sub)}
	}
}

// sessionOpen opens a session and prints its ID, then leaves it to the processes that hold
// leases under it to keep it alive: it expires a ttl later unless one does.
func sessionOpen(ctx context.Context, cf *clientFlags, args []string, getenv func(string) string, stdout io.Writer) error {
	ttl := duration(cf.fs, "ttl", 30*time.Second, "the session's duration: it and its leases expire this long after the last renewal")
	holder := cf.fs.String("holder", defaultHolder(getenv), "who holds the session, for humans (env LEASEKEEPER_HOLDER)")
	metadata := cf.fs.String("metadata", "", "a JSON object shown with the session")
	if err := cf.noArgs(args, "session open"); err != nil {
		return err
	}
	md, err := parseMetadata(*metadata)
	if err != nil {
		return err
	}
	c, err := cf.client(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := c.OpenSession(ctx, client.SessionOptions{Holder: *holder, TTL: *ttl, Metadata: md})
	if err != nil {
		return cf.fail(err)
	}
	s.Detach()
	if cf.json {
		return writeJSON(stdout, sessionJSON{SessionID: s.ID(), Session: s.Ref(), Holder: *holder, TTLMs: ttl.Milliseconds()})
	}
	_, err = fmt.Fprintln(stdout, s.ID())
	return err
}

// sessionClose closes the shared session, which releases every lease held under it in one
// transaction, whoever holds them.
func sessionClose(ctx context.Context, cf *clientFlags, args []string, getenv func(string) string, stdout io.Writer) error {
	sf := addSessionFlags(cf.fs, getenv, false)
	if err := cf.noArgs(args, "session close"); err != nil {
		return err
	}
	id, err := sf.sharedID()
	if err != nil {
		return err
	}
	if id == "" {
		return &exitError{code: 2, err: errors.New("session close: no session: set LEASEKEEPER_SESSION_ID or --session-id-file")}
	}
	c, err := cf.client(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	released, err := c.CloseSession(ctx, id)
	if err != nil {
		return cliError(err)
	}
	if cf.json {
		return writeJSON(stdout, sessionJSON{Session: released.Ref, Leases: &released.Leases})
	}
	_, err = fmt.Fprintf(stdout, "closed %s: released %d leases\n", released.Ref, released.Leases)
	return err
}

// sessionJSON is what the session commands print with --json.
type sessionJSON struct {
	SessionID string `json:"session_id,omitempty"`
	Session   string `json:"session"`
	Holder    string `json:"holder,omitempty"`
	TTLMs     int64  `json:"ttl_ms,omitempty"`
	Leases    *int   `json:"leases,omitempty"`
}
