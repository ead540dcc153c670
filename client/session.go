package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasekeeper/leasekeeper/client/internal/wire"
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
	s := &Session{c: c, id: *resp.JSON201.SessionId, ref: resp.JSON201.Session, holder: lo.Holder, ttl: lo.TTL, margin: margin,
		interval: time.Duration(float64(lo.TTL) * c.renewFraction), lastSent: sent, deadline: sent.Add(lo.TTL - margin)}
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
	return s, nil
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
		var ae *APIError
		if errors.As(perr, &ae) && (ae.Code == string(wire.ProblemCodeSessionLost) || ae.Code == string(wire.ProblemCodeNotFound)) {
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
	s.mu.Lock()
	leases := s.leases
	s.timer.Stop()
	s.mu.Unlock()
	for _, l := range leases {
		l.end(ErrReleased)
	}
	s.cancel(ErrReleased)
	s.bg.Wait()
	s.stopClose()
	resp, err := s.c.api.CloseSessionWithResponse(ctx, s.ref, wire.SessionIDRequest{SessionId: s.id})
	if err != nil {
		return unanswered(ctx, fmt.Sprintf("close session %s", s.ref), err)
	}
	s.closed = true
	if resp.JSON200 == nil {
		s.closeErr = fmt.Errorf("close session %s: %w", s.ref, problemOf(resp.HTTPResponse, resp.Body))
	}
	return s.closeErr
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
