package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/leasekeeper/leasekeeper/client/internal/wire"
)

// Event is one entry of a name's history: acquired, renewed, released, expired, revoked or
// rejected, with the token and holder it concerns.
type Event struct {
	Seq    int64
	Type   string
	Name   string
	Token  int64
	Holder string
	// At is when it happened; for "expired", the moment the lease expired.
	At time.Time
	// ExpiresAt is the expiry an acquired or renewed event set.
	ExpiresAt time.Time
	Metadata  map[string]any
	// Resource is the resource that refused a write, for "rejected".
	Resource string
	// Handover is the request, for "handover_requested".
	Handover *HandoverRequest
}

func eventOf(e wire.Event) Event {
	out := Event{Seq: e.Seq, Type: string(e.Type), Name: e.Name, Token: e.Token, Holder: e.Holder, At: e.At.Time,
		ExpiresAt: deref(e.ExpiresAt).Time, Resource: deref(e.Resource)}
	if e.Metadata != nil {
		out.Metadata = *e.Metadata
	}
	if h := e.Handover; h != nil && out.Type == EventHandoverRequested {
		out.Handover = &HandoverRequest{Name: e.Name, Token: e.Token, To: deref(h.To), Reason: deref(h.Reason), By: deref(e.Actor), At: e.At.Time}
	}
	return out
}

// errStop ends a watch from inside its callback without an error.
var errStop = errors.New("stop watching")

// Watch calls fn for every event on names that start with prefix, from now on, until ctx ends,
// the client is closed (ErrClosed), or fn returns an error (which Watch returns). A dropped connection is reopened after a
// jittered pause and resumes after the last event seen (Last-Event-ID), so no event is missed
// or repeated while the server keeps its history.
func (c *Client) Watch(ctx context.Context, prefix string, fn func(Event) error) error {
	return c.Follow(ctx, prefix, nil, fn)
}

// Follow is Watch with opened, called each time the stream is (re)connected and before any
// event it carries: read the current state there, and nothing can happen unseen between that
// read and the stream. An error from opened ends Follow with it. Client.Close ends it too,
// with ErrClosed.
func (c *Client) Follow(ctx context.Context, prefix string, opened func() error, fn func(Event) error) error {
	return c.follow(ctx, func(ctx context.Context) (string, context.Context, context.CancelFunc) {
		return prefix, ctx, func() {}
	}, opened, fn)
}

// follow is Follow over a prefix that may change: each connection watches the prefix conn
// returns, until the context conn returns with it ends, and then reconnects at once,
// resuming after the last event seen.
func (c *Client) follow(ctx context.Context, conn func(context.Context) (string, context.Context, context.CancelFunc),
	opened func() error, fn func(Event) error) error {
	outer := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(c.closeCtx, func() { cancel(ErrClosed) })()
	var last string
	pause := 100 * time.Millisecond
	for {
		prefix, cctx, done := conn(ctx)
		err := c.watchOnce(cctx, prefix, &last, opened, fn)
		reopen := cctx.Err() != nil
		done()
		if ctx.Err() != nil {
			if outer.Err() == nil {
				return fmt.Errorf("watch %q: %w", prefix, ErrClosed)
			}
			return outer.Err()
		}
		var cbErr *callbackError
		if errors.As(err, &cbErr) {
			if errors.Is(cbErr.err, errStop) {
				return nil
			}
			return cbErr.err
		}
		if reopen {
			continue // ended to watch another prefix
		}
		var ae *APIError
		if errors.As(err, &ae) && !ae.retryable() && ae.Status != http.StatusTooManyRequests {
			return fmt.Errorf("watch %q: %w", prefix, err)
		}
		c.log.DebugContext(ctx, "watch interrupted; reconnecting", "prefix", prefix, "err", err)
		if sleep(ctx, c.clock, jitter(pause)) != nil {
			if outer.Err() == nil {
				return fmt.Errorf("watch %q: %w", prefix, ErrClosed)
			}
			return outer.Err()
		}
		pause = min(pause*2, 5*time.Second)
	}
}

type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// watchOnce reads one connection of the stream; last holds the seq of the last event seen.
func (c *Client) watchOnce(ctx context.Context, prefix string, last *string, opened func() error, fn func(Event) error) error {
	params := &wire.WatchParams{Prefix: &prefix}
	if *last != "" {
		params.LastEventID = last
	}
	resp, err := c.api.Watch(ctx, params)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return problemOf(resp, body)
	}
	if opened != nil {
		if err := opened(); err != nil {
			return &callbackError{err}
		}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != "" {
				var e wire.Event
				if err := json.Unmarshal([]byte(data), &e); err != nil {
					return fmt.Errorf("watch: event %s: %w", id, err)
				}
				if err := fn(eventOf(e)); err != nil {
					return &callbackError{err}
				}
				if id != "" {
					*last = id
				} else {
					*last = strconv.FormatInt(e.Seq, 10)
				}
			}
			id, data = "", ""
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(line[5:], " ")
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}
