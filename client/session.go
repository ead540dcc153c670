package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasekeeper/leasekeeper/client/internal/wire"
	"github.com/leasekeeper/leasekeeper/lease"
)

// SessionOptions describes a session asked for.
type SessionOptions struct {
	// Holder tells humans who holds the session's leases; empty means this host and process.
	Holder string
	// TTL is the session's duration (zero means DefaultTTL): its leases expire with it unless
	// it is renewed, which the session does by itself.
	TTL time.Duration
	// Metadata is any JSON object of at most 4 KiB shown with the session.
	Metadata map[string]any
}

// Session holds many leases of one process with one keepalive (POST /v1/sessions): every
// lease acquired with Session.Acquire expires with the session, one renewal renews them all,
// and Close releases them all in one transaction on the server. Its Context, and the context
// of each of its leases, ends by this process's clock before the server could consider the
// session expired, and at once when the server refuses a renewal.
type Session struct {
	c        *Client
	id, ref  string
	holder   string
	ttl      time.Duration
	margin   time.Duration
	interval time.Duration

	ctx    context.Context
	cancel context.CancelCauseFunc
	bg     sync.WaitGroup

	mu       sync.Mutex
	lastSent time.Time // client clock: when the open or last successful renewal was sent
	deadline time.Time
	timer    Timer
	leases   []*Lease

	closeMu   sync.Mutex
	closed    bool
	closeErr  error
	stopClose func() bool
}

// ErrSessionLost means the server refused the session's renewal: it expired or was closed, and
// every lease held under it ended with it.
var ErrSessionLost = errors.New("session lost")

// OpenSession opens a session and keeps it alive until Close (or until a renewal is refused).
func (c *Client) OpenSession(ctx context.Context, o SessionOptions) (*Session, error) {
	const op = "open session"
	if c.isClosed() {
		return nil, fmt.Errorf("%s: %w", op, ErrClosed)
	}
	lo, body, err := c.acquireRequest("session", AcquireOptions{Holder: o.Holder, TTL: o.TTL, Metadata: o.Metadata})
	if err != nil {
		return nil, invalid(op, err)
	}
	margin := c.marginFor(lo.TTL)
	if lo.TTL <= margin {
		return nil, fmt.Errorf("%s: %w: ttl %v must be longer than the safety margin %v", op, ErrInvalid, lo.TTL, margin)
	}
	sent := c.clock.Now()
	resp, err := c.api.OpenSessionWithResponse(ctx, wire.SessionRequest{Holder: lo.Holder, TtlMs: lo.TTL.Milliseconds(), Metadata: body.Metadata})
	if err != nil {
		return nil, unanswered(ctx, op, err)
	}
	if resp.JSON201 == nil || resp.JSON201.SessionId == nil {
		return nil, fmt.Errorf("%s: %w", op, problemOf(resp.HTTPResponse, resp.Body))
	}
	return c.keepSession(ctx, *resp.JSON201.SessionId, resp.JSON201.Session, lo.Holder, lo.TTL, sent), nil
}

// AttachSession takes up a session another process opened (leasekeeper session open, or
// Session.ID passed along), by its secret ID: it renews the session once, to learn its ttl
// and holder, and from then on keeps it alive too, until Detach or Close. Many processes can
// hold leases under one session this way, each renewing it; this process reckons the
// session's deadline from its own renewals only, so a renewal of another process never makes
// it rely on the session longer. Leases acquired through the returned Session are this
// process's to release; Detach, unlike Close, leaves the session and the other processes'
// leases alone.
func (c *Client) AttachSession(ctx context.Context, id string) (*Session, error) {
	ref := lease.SessionRef(lease.HashID(id))
	op := fmt.Sprintf("attach session %s", ref)
	if c.isClosed() {
		return nil, fmt.Errorf("%s: %w", op, ErrClosed)
	}
	if id == "" {
		return nil, fmt.Errorf("%s: %w: the session ID is empty", op, ErrInvalid)
	}
	sent := c.clock.Now()
	resp, err := c.api.RenewSessionWithResponse(ctx, ref, wire.SessionIDRequest{SessionId: id})
	if err != nil {
		return nil, unanswered(ctx, op, err)
	}
	if resp.JSON200 == nil {
		perr := problemOf(resp.HTTPResponse, resp.Body)
		if sessionGone(perr) {
			return nil, fmt.Errorf("%s: %w: %w", op, ErrSessionLost, perr)
		}
		return nil, fmt.Errorf("%s: %w", op, perr)
	}
	ttl := time.Duration(resp.JSON200.TtlMs) * time.Millisecond
	if margin := c.marginFor(ttl); ttl <= margin {
		return nil, fmt.Errorf("%s: %w: the session's ttl %v is not longer than the safety margin %v", op, ErrInvalid, ttl, margin)
	}
	return c.keepSession(ctx, id, ref, resp.JSON200.Holder, ttl, sent), nil
}

// sessionGone reports whether the server refused an act on a session because it has ended
// (expired or closed) or is unknown.
func sessionGone(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && (ae.Code == CodeSessionLost || ae.Code == CodeNotFound)
}

// keepSession returns the session id (public name ref) whose last successful renewal, or
// opening, was sent at sent, and starts keeping it alive.
func (c *Client) keepSession(ctx context.Context, id, ref, holder string, ttl time.Duration, sent time.Time) *Session {
	margin := c.marginFor(ttl)
	s := &Session{c: c, id: id, ref: ref, holder: holder, ttl: ttl, margin: margin,
		interval: time.Duration(float64(ttl) * c.renewFraction), lastSent: sent, deadline: sent.Add(ttl - margin)}
	s.ctx, s.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	s.mu.Lock()
	s.timer = c.clock.AfterFunc(s.deadline.Sub(c.clock.Now()), s.checkDeadline)
	s.mu.Unlock()
	s.stopClose = context.AfterFunc(c.closeCtx, func() { s.cancel(ErrClosed) })
	s.bg.Add(1)
	if err := c.goBackground(func() {
		defer s.bg.Done()
		renewLoop(s.ctx, c.clock, s.interval, s.lastRenewal, s.Renew, func(err error, pause time.Duration) {
			c.log.Warn("session renewal failed; retrying", "session", s.ref, "err", err, "retry_in", pause)
		})
	}); err != nil {
		s.bg.Done()
		s.cancel(err)
	}
	return s
}

// Ref returns the session's public name (ses_…), which leases and events show.
func (s *Session) Ref() string { return s.ref }

// ID returns the session's secret ID.
func (s *Session) ID() string { return s.id }

// Context returns a context that ends when the session, and so every lease under it, may no
// longer be relied on.
func (s *Session) Context() context.Context { return s.ctx }

// Acquire acquires name under the session: the lease expires with the session and is kept
// alive by the session's renewals (o.TTL and o.DisableKeepAlive are ignored).
func (s *Session) Acquire(ctx context.Context, name string, o AcquireOptions) (*Lease, error) {
	if err := context.Cause(s.ctx); err != nil {
		return nil, fmt.Errorf("acquire %q under session %s: %w", name, s.ref, err)
	}
	if o.Holder == "" {
		o.Holder = s.holder
	}
	o.session = s
	return s.c.Acquire(ctx, name, o)
}

// AcquireAll acquires several names under the session, all or none, as Client.AcquireAll:
// every lease expires with the session, and closing the session releases them all.
func (s *Session) AcquireAll(ctx context.Context, names []string, o AcquireOptions) ([]*Lease, error) {
	if err := context.Cause(s.ctx); err != nil {
		return nil, fmt.Errorf("acquire %q under session %s: %w", names, s.ref, err)
	}
	if o.Holder == "" {
		o.Holder = s.holder
	}
	o.session = s
	return s.c.AcquireAll(ctx, names, o)
}

func (s *Session) lastRenewal() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSent
}

// reckoning returns when the last successful renewal was sent and the deadline it gives.
func (s *Session) reckoning() (time.Time, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSent, s.deadline
}

// add counts l among the session's leases, whose deadlines move with its renewals.
func (s *Session) add(l *Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	live := s.leases[:0]
	for _, x := range s.leases {
		if x.ctx.Err() == nil {
			live = append(live, x)
		}
	}
	s.leases = append(live, l)
}

// Renew renews the session, and so every lease under it, once; the keepalive calls it. A
// refusal ends the session's context and every lease's, and matches ErrSessionLost.
func (s *Session) Renew(ctx context.Context) error {
	if err := context.Cause(s.ctx); err != nil {
		return fmt.Errorf("renew session %s: %w", s.ref, err)
	}
	sent := s.c.clock.Now()
	resp, err := s.c.api.RenewSessionWithResponse(ctx, s.ref, wire.SessionIDRequest{SessionId: s.id})
	if err != nil {
		return unanswered(ctx, fmt.Sprintf("renew session %s", s.ref), err)
	}
	if resp.JSON200 == nil {
		perr := problemOf(resp.HTTPResponse, resp.Body)
		if sessionGone(perr) {
			err := fmt.Errorf("%w: session %s: %w", ErrSessionLost, s.ref, perr)
			s.end(fmt.Errorf("%w: %w", ErrLeaseLost, err))
			return err
		}
		return fmt.Errorf("renew session %s: %w", s.ref, perr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sent.After(s.lastSent) {
		s.lastSent, s.deadline = sent, sent.Add(s.ttl-s.margin)
		s.timer.Stop()
		s.timer = s.c.clock.AfterFunc(s.deadline.Sub(s.c.clock.Now()), s.checkDeadline)
		for _, l := range s.leases {
			l.followSession(s.lastSent, s.deadline, resp.JSON200.ExpiresAt.Time)
		}
	}
	return nil
}

// checkDeadline ends the session's context, and its leases', once its deadline has passed.
func (s *Session) checkDeadline() {
	s.mu.Lock()
	late := !s.c.clock.Now().Before(s.deadline)
	if !late {
		s.timer = s.c.clock.AfterFunc(s.deadline.Sub(s.c.clock.Now()), s.checkDeadline)
	}
	s.mu.Unlock()
	if late {
		s.end(fmt.Errorf("%w: session %s: no renewal succeeded before the client-side deadline", ErrLeaseLost, s.ref))
	}
}

// end ends the session's context and every lease's with cause.
func (s *Session) end(cause error) {
	s.mu.Lock()
	leases := s.leases
	s.timer.Stop()
	s.mu.Unlock()
	s.cancel(cause)
	for _, l := range leases {
		l.lose(cause)
	}
}

// Close stops the keepalive and closes the session on the server, which releases every lease
// held under it in one transaction; their contexts end first. It is idempotent once answered.
func (s *Session) Close(ctx context.Context) error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return s.closeErr
	}
	s.stop(ErrReleased)
	_, answered, err := s.c.closeSession(ctx, s.id)
	if answered {
		s.closed, s.closeErr = true, err
	}
	return err
}

// ClosedSession is what closing a session ended.
type ClosedSession struct {
	Ref    string // the session's public name (ses_…)
	Leases int    // how many leases it held, released with it
}

// CloseSession closes the session whose secret ID is id, whichever process opened it or
// keeps it alive: every lease held under it is released in one transaction on the server,
// and the processes holding them learn it at their next renewal (ErrSessionLost).
func (c *Client) CloseSession(ctx context.Context, id string) (ClosedSession, error) {
	out, _, err := c.closeSession(ctx, id)
	return out, err
}

// closeSession closes the session id, and reports whether the server answered.
func (c *Client) closeSession(ctx context.Context, id string) (ClosedSession, bool, error) {
	ref := lease.SessionRef(lease.HashID(id))
	op := fmt.Sprintf("close session %s", ref)
	resp, err := c.api.CloseSessionWithResponse(ctx, ref, wire.SessionIDRequest{SessionId: id})
	if err != nil {
		return ClosedSession{}, false, unanswered(ctx, op, err)
	}
	if resp.JSON200 == nil {
		perr := problemOf(resp.HTTPResponse, resp.Body)
		if sessionGone(perr) {
			return ClosedSession{}, true, fmt.Errorf("%s: %w: %w", op, ErrSessionLost, perr)
		}
		return ClosedSession{}, true, fmt.Errorf("%s: %w", op, perr)
	}
	out := ClosedSession{Ref: resp.JSON200.Session}
	if resp.JSON200.Leases != nil {
		out.Leases = *resp.JSON200.Leases
	}
	return out, true, nil
}

// ErrDetached is the cause of a session's context, and of its leases', after Detach: this
// process no longer keeps the session alive, so it may no longer rely on them.
var ErrDetached = errors.New("session detached")

// Detach stops this process's keepalive of the session without closing it: the session, and
// every lease under it, lives on while another process renews it (or until it expires). The
// contexts of the session and of the leases acquired through it end with ErrDetached; release
// this process's leases first (Lease.Release) if others must not keep them. Detach is
// idempotent, and a no-op after Close.
func (s *Session) Detach() { s.stop(ErrDetached) }

// stop stops the keepalive and the deadline timer, and ends the contexts of the session's
// leases, then its own, with cause.
func (s *Session) stop(cause error) {
	s.mu.Lock()
	leases := s.leases
	s.timer.Stop()
	s.mu.Unlock()
	for _, l := range leases {
		l.end(cause)
	}
	s.cancel(cause)
	s.bg.Wait()
	s.stopClose()
}

// followSession moves the lease's reckoning with its session's renewal.
func (l *Lease) followSession(lastSent, deadline, expiresAt time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return
	}
	l.lastSent, l.deadline, l.expiresAt = lastSent, deadline, expiresAt
	l.armLocked()
}
