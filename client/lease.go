package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/leasekeeper/leasekeeper/client/internal/wire"
)

// AcquireOptions describes the lease asked for.
type AcquireOptions struct {
	// Holder tells humans who holds the lease (required), e.g. "worker-3@host-a".
	Holder string
	// TTL is the lease duration, within the server's bounds (default 1 s to 1 h).
	TTL time.Duration
	// Wait is how long to wait for a lease somebody else holds. The server waits in line when
	// it can; a server without a waiting line is polled, honouring its Retry-After.
	Wait time.Duration
	// LockDelay keeps the name from being granted again for this long after this lease
	// expires (not after a release).
	LockDelay time.Duration
	// Metadata is any JSON object of at most 4 KiB shown with the lease.
	Metadata map[string]any
	// IdempotencyKey identifies this acquire across retries. Empty means a fresh random key.
	IdempotencyKey string
	// DisableKeepAlive leaves renewals to the caller (Lease.Renew): the lease context still
	// ends at its deadline. Command-line tools that exit after acquiring set it.
	DisableKeepAlive bool
}

// Lease is a held lease. Its Context ends before the server can consider it expired; do the
// lease's work under that context, and send Token with every write to a fenced resource.
type Lease struct {
	c        *Client
	name     string
	holder   string
	id       string
	token    int64
	ttl      time.Duration
	margin   time.Duration
	interval time.Duration // renew this long after the last successful renewal was sent

	ctx    context.Context
	cancel context.CancelCauseFunc
	kaDone chan struct{} // closed when the keepalive goroutine has returned

	mu        sync.Mutex
	lastSent  time.Time // client clock: when the acquire or last successful renewal was sent
	deadline  time.Time // client clock: lastSent + ttl - margin
	expiresAt time.Time // server clock, for humans
	timer     Timer     // ends ctx at deadline
	lost      error     // why the server refused us, once it did

	relMu   sync.Mutex
	relDone bool
	relErr  error
}

// Name returns the lease's name.
func (l *Lease) Name() string { return l.name }

// Holder returns the holder the lease was acquired for.
func (l *Lease) Holder() string { return l.holder }

// ID returns the lease_id, the secret that renews and releases the lease.
func (l *Lease) ID() string { return l.id }

// Token returns the fencing token. Send it with every write the lease protects: a resource
// that checks it refuses writes from holders that lost the lease without noticing.
func (l *Lease) Token() int64 { return l.token }

// TTL returns the lease duration.
func (l *Lease) TTL() time.Duration { return l.ttl }

// ExpiresAt returns the server's expiry after the last successful renewal, by the server's
// clock. It is for display: the client acts on Deadline, by its own clock.
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// Deadline returns when the lease context ends unless a renewal succeeds first, by the
// client's clock: the time the acquire or last successful renewal was sent, plus the ttl,
// minus the safety margin.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Context returns a context that ends when the lease may no longer be relied on: at the
// Deadline, at once when a renewal is refused, or on Release. context.Cause tells which: it
// matches ErrLeaseLost for the first two and is ErrReleased for the last. Its Deadline method
// reports none, because renewals move the deadline.
func (l *Lease) Context() context.Context { return l.ctx }

// Acquire asks for the lease on name. A lease somebody else holds is a *HeldError (after
// waiting up to o.Wait). Network failures and 5xx answers are retried with the same
// Idempotency-Key, so a grant whose answer was lost is returned rather than refused as held
// against ourselves. Unless o.DisableKeepAlive, the lease renews itself until released.
func (c *Client) Acquire(ctx context.Context, name string, o AcquireOptions) (*Lease, error) {
	margin := c.marginFor(o.TTL)
	if o.TTL <= margin {
		return nil, fmt.Errorf("acquire %q: ttl %v must be longer than the safety margin %v", name, o.TTL, margin)
	}
	body := wire.AcquireRequest{Holder: o.Holder, TtlMs: o.TTL.Milliseconds()}
	if o.LockDelay > 0 {
		ms := o.LockDelay.Milliseconds()
		body.LockDelayMs = &ms
	}
	if o.Metadata != nil {
		md := wire.Metadata(o.Metadata)
		body.Metadata = &md
	}
	var waitUntil time.Time
	if o.Wait > 0 {
		waitUntil = c.clock.Now().Add(o.Wait)
		if !c.noServerWait.Load() {
			ms := o.Wait.Milliseconds()
			body.WaitMs = &ms
		}
	}
	triedWithoutWait := false
	for {
		g, sent, err := c.acquireOnce(ctx, name, o.IdempotencyKey, body)
		var held *HeldError
		var ae *APIError
		switch {
		case err == nil:
			if triedWithoutWait {
				c.noServerWait.Store(true)
			}
			return c.hold(ctx, g, sent, o, margin)
		case errors.As(err, &ae) && ae.Status == http.StatusBadRequest && body.WaitMs != nil && !triedWithoutWait:
			// Perhaps a server without a waiting line: ask again without wait_ms, and wait here.
			triedWithoutWait = true
			body.WaitMs = nil
			continue
		case errors.As(err, &held) && !waitUntil.IsZero():
			if triedWithoutWait {
				c.noServerWait.Store(true)
			}
			left := waitUntil.Sub(c.clock.Now())
			if left <= 0 || body.WaitMs != nil {
				return nil, err // the server already waited in line for us
			}
			pause := min(max(held.RetryAfter, 50*time.Millisecond), left)
			c.log.DebugContext(ctx, "lease held; waiting", "name", name, "holder", held.Holder, "pause", pause)
			if serr := sleep(ctx, c.clock, pause); serr != nil {
				return nil, fmt.Errorf("acquire %q: waiting: %w (last answer: %w)", name, serr, err)
			}
			continue
		default:
			return nil, err
		}
	}
}

// acquireOnce sends one acquire, retrying network failures with one Idempotency-Key. sent is
// the client time the FIRST attempt was sent: a retry may be answered with the grant made for
// an earlier attempt, so only the earliest send time bounds when the grant can have started.
func (c *Client) acquireOnce(ctx context.Context, name, key string, body wire.AcquireRequest) (Grant, time.Time, error) {
	if key == "" {
		key = newKey()
	}
	params := &wire.AcquireLeaseParams{IdempotencyKey: &key}
	var sent time.Time
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		if sent.IsZero() {
			sent = c.clock.Now()
		}
		resp, err := c.api.AcquireLeaseWithResponse(ctx, name, params, body)
		if err == nil {
			switch {
			case resp.JSON200 != nil:
				g := grantOf(resp.JSON200)
				if g.LeaseID == "" {
					return Grant{}, sent, fmt.Errorf("acquire %q: the grant carries no lease_id", name)
				}
				return g, sent, nil
			case resp.StatusCode() == http.StatusConflict && resp.ApplicationproblemJSON409 != nil &&
				resp.ApplicationproblemJSON409.Code == wire.ProblemCodeLeaseHeld:
				p := resp.ApplicationproblemJSON409
				h := &HeldError{Name: name, Holder: deref(p.Holder), ExpiresAt: deref(p.ExpiresAt).Time, AvailableAt: deref(p.AvailableAt).Time}
				if resp.Headers409 != nil {
					h.RetryAfter = time.Duration(resp.Headers409.RetryAfter) * time.Second
				}
				return Grant{}, sent, h
			}
			err = problemOf(resp.StatusCode(), resp.Body)
		}
		err = fmt.Errorf("acquire %q (attempt %d): %w", name, attempt, err)
		if attempt >= c.attempts || !retryable(ctx, err) {
			return Grant{}, sent, err
		}
		c.log.WarnContext(ctx, "acquire failed; retrying with the same Idempotency-Key", "name", name, "err", err)
		if serr := sleep(ctx, c.clock, jitter(backoff)); serr != nil {
			return Grant{}, sent, fmt.Errorf("%w (gave up: %w)", err, serr)
		}
		backoff *= 2
	}
}

// hold turns a grant into a held Lease with its deadline and keepalive.
func (c *Client) hold(ctx context.Context, g Grant, sent time.Time, o AcquireOptions, margin time.Duration) (*Lease, error) {
	l := &Lease{c: c, name: g.Name, holder: g.Holder, id: g.LeaseID, token: g.Token, ttl: o.TTL, margin: margin,
		interval: time.Duration(float64(o.TTL) * c.renewFraction), kaDone: make(chan struct{}),
		lastSent: sent, expiresAt: g.ExpiresAt}
	// The lease context outlives the acquire's context (which often bounds only the asking),
	// keeping its values.
	l.ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(ctx))

	// An answer that came late (a server-side wait, a slow network) may leave nothing of the
	// ttl by the reckoning from the send time, though the grant itself is fresh: renew before
	// handing the lease out, which restarts the reckoning from a send time after the grant.
	if c.clock.Now().Sub(sent) >= l.interval {
		resent := c.clock.Now()
		r, err := c.Renew(ctx, g.Name, g.LeaseID, 0)
		if err != nil {
			l.cancel(err)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = c.Release(rctx, g.Name, g.LeaseID)
			return nil, fmt.Errorf("acquire %q: granted, but the answer came too late to rely on it and renewing failed: %w", g.Name, err)
		}
		l.lastSent, l.expiresAt = resent, r.ExpiresAt
	}
	l.mu.Lock()
	l.deadline = l.lastSent.Add(o.TTL - margin)
	l.armLocked()
	l.mu.Unlock()
	if o.DisableKeepAlive {
		close(l.kaDone)
	} else {
		go l.keepalive()
	}
	return l, nil
}

// armLocked (re)starts the timer that ends the context at the deadline. l.mu is held.
func (l *Lease) armLocked() {
	if l.timer != nil {
		l.timer.Stop()
	}
	l.timer = l.c.clock.AfterFunc(l.deadline.Sub(l.c.clock.Now()), l.checkDeadline)
}

// checkDeadline ends the context if the deadline has passed; a timer that fired for a
// deadline since moved is simply re-armed.
func (l *Lease) checkDeadline() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return
	}
	if l.c.clock.Now().Before(l.deadline) {
		l.armLocked()
		return
	}
	l.cancel(fmt.Errorf("%w: lease %q token %d: no renewal succeeded before the client-side deadline (%v after the last successful renewal was sent)",
		ErrLeaseLost, l.name, l.token, l.ttl-l.margin))
}

// Renew renews the lease once. On success the deadline moves to the time this renewal was
// sent plus the ttl minus the margin; a refusal ends the context at once and is ErrLeaseLost.
// The keepalive calls it; call it yourself only with DisableKeepAlive.
func (l *Lease) Renew(ctx context.Context) error {
	if err := context.Cause(l.ctx); err != nil {
		return fmt.Errorf("renew %q: %w", l.name, err)
	}
	sent := l.c.clock.Now()
	g, err := l.c.Renew(ctx, l.name, l.id, 0)
	if err != nil {
		// Only the server's refusal is a loss. A request cut short by the lease context
		// itself also matches ErrLeaseLost (through the context's cause) but says nothing
		// about the server, which may still hold the lease for Release to give back.
		var ae *APIError
		if errors.As(err, &ae) && errors.Is(ae, ErrLeaseLost) {
			l.lose(err)
		}
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return fmt.Errorf("renew %q: renewed, but the lease context had already ended: %w", l.name, context.Cause(l.ctx))
	}
	l.expiresAt = g.ExpiresAt
	if sent.After(l.lastSent) {
		l.lastSent = sent
		l.deadline = sent.Add(l.ttl - l.margin)
		l.armLocked()
	}
	return nil
}

// lose ends the context because the server refused the lease.
func (l *Lease) lose(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil {
		l.lost = err
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	l.cancel(err)
}

// keepalive renews at the renew fraction of the ttl; failed renewals are retried with
// jittered pauses until one succeeds, the server refuses, or the context ends at its deadline.
func (l *Lease) keepalive() {
	defer close(l.kaDone)
	clk := l.c.clock
	for {
		l.mu.Lock()
		next := l.lastSent.Add(l.interval)
		l.mu.Unlock()
		if sleep(l.ctx, clk, next.Sub(clk.Now())) != nil {
			return
		}
		for {
			// One attempt may not eat the time left for the next ones.
			actx, cancel := context.WithTimeout(l.ctx, max(l.interval, 100*time.Millisecond))
			err := l.Renew(actx)
			cancel()
			if err == nil || l.ctx.Err() != nil {
				break
			}
			pause := jitter(max(l.interval/4, 10*time.Millisecond))
			l.c.log.Warn("lease renewal failed; retrying", "name", l.name, "token", l.token, "err", err, "retry_in", pause)
			if sleep(l.ctx, clk, pause) != nil {
				return
			}
		}
		if l.ctx.Err() != nil {
			return
		}
	}
}

// Release stops the keepalive, ends the context and releases the lease on the server. It is
// idempotent: once it has had an answer, it returns that answer again. It returns an error
// matching ErrLeaseLost when the lease had already been lost (refused renewal, or the server
// says it expired or was revoked): the work done under it may have overlapped another holder's.
// A network failure is returned as is, and a later Release tries again.
func (l *Lease) Release(ctx context.Context) error {
	l.relMu.Lock()
	defer l.relMu.Unlock()
	if l.relDone {
		return l.relErr
	}
	// Stop using the lease before giving it back.
	l.mu.Lock()
	if l.timer != nil {
		l.timer.Stop()
	}
	l.cancel(ErrReleased)
	l.mu.Unlock()
	<-l.kaDone

	l.mu.Lock()
	lost := l.lost
	l.mu.Unlock()
	if lost != nil {
		l.relDone, l.relErr = true, fmt.Errorf("release %q: %w", l.name, lost)
		return l.relErr
	}
	err := l.c.Release(ctx, l.name, l.id)
	if err != nil && retryable(ctx, err) {
		return err
	}
	if err != nil && ctx.Err() != nil {
		return err
	}
	l.relDone, l.relErr = true, err
	return err
}

// Do acquires the lease on name, runs fn with the lease context and the fencing token, and
// releases the lease. fn's context also ends with ctx. The error joins fn's error and the
// release's: one matching ErrLeaseLost says the lease was lost while fn ran.
func Do(ctx context.Context, c *Client, name string, o AcquireOptions, fn func(ctx context.Context, token int64) error) error {
	l, err := c.Acquire(ctx, name, o)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancelCause(l.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	ferr := fn(runCtx, l.Token())
	stop()
	cancel(nil)
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), max(o.TTL, 5*time.Second))
	defer rcancel()
	rerr := l.Release(rctx)
	return errors.Join(ferr, rerr)
}
