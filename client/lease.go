package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasekeeper/leasekeeper/client/internal/wire"
	"github.com/leasekeeper/leasekeeper/lease"
)

// AcquireOptions describes the lease asked for. The zero value asks for a lease of
// DefaultTTL held by this process, without waiting.
type AcquireOptions struct {
	// Holder tells humans who holds the lease, e.g. "worker-3@host-a"; empty means this
	// host and process ID.
	Holder string
	// TTL is the lease duration, within the server's bounds (default 1 s to 1 h); zero means
	// DefaultTTL. It must be longer than the safety margin.
	TTL time.Duration
	// Wait is how long to wait for a lease somebody else holds. The server waits in line,
	// first come first served, in turns of at most its bound on one wait (5 min by default);
	// only a server that answers waiting_unsupported is polled instead, honouring its
	// Retry-After.
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
	// OnHandover, when set, is called in a goroutine of its own each time the server asks
	// the holder to let the lease go (a cooperative handover: see Lease.HandoverRequested),
	// learnt from a renewal or the watch stream. Release when the work is at a good place to
	// stop; nothing is forced.
	OnHandover func(*Lease, HandoverRequest)
	// Limit, when above 0, acquires one of Limit slots of the semaphore name (like consul
	// lock -n): up to Limit holders at once, each with its own token. The limit is fixed while
	// anyone holds the name (another one is an *APIError with code limit_mismatch). A
	// semaphore's lease does not follow the watch stream (its slots' events are named name#i):
	// renewals guard it.
	Limit int
	// Shared acquires a shared (read) lease: shared leases of a name coexist, and exclude
	// every exclusive (the default) one. Once an exclusive acquire waits in line, later shared
	// ones wait behind it. Readers do not write: a fenced write with a shared lease's token is
	// refused (an *APIError with code shared_token). Like a semaphore's, a shared lease does
	// not follow the watch stream (its events are named name#i): renewals guard it. Not with
	// Limit.
	Shared bool
	// session, set by Session.Acquire, acquires under that session.
	session *Session
	// DisableWatch leaves noticing that somebody else ended the lease (a revoke, say) to the
	// next renewal, instead of following its name on the watch stream that all the
	// kept-alive leases of a Client share (one stream per Client, however many leases).
	DisableWatch bool
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

	ctx       context.Context
	cancel    context.CancelCauseFunc
	stopClose func() bool    // unhooks the lease from Client.Close
	bg        sync.WaitGroup // the keepalive and the watch

	mu        sync.Mutex
	lastSent  time.Time     // client clock: when the acquire or last successful renewal was sent
	deadline  time.Time     // client clock: lastSent + ttl - margin
	expiresAt time.Time     // server clock, for humans
	timer     Timer         // ends ctx at deadline
	lost      error         // why the server refused us, once it did
	epoch     string        // server_epoch of the last answer
	extended  time.Duration // extended_by_restart of the last answer
	handover  *HandoverRequest
	asked     chan struct{} // closed at the first handover request
	onAsk     func(*Lease, HandoverRequest)

	relMu   sync.Mutex
	relDone bool
	relErr  error

	slot   int  // for a slot of a semaphore, or a shared lease
	shared bool // a shared (read) lease

	sess *Session // the session it is held under, if any: renewing it renews the lease
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

// Slot returns, for a lease acquired with a Limit, the index of its slot of the semaphore;
// for a shared lease, the index of its shared slot.
func (l *Lease) Slot() int { return l.slot }

// Shared reports whether the lease is a shared (read) one.
func (l *Lease) Shared() bool { return l.shared }

// TTL returns the lease duration.
func (l *Lease) TTL() time.Duration { return l.ttl }

// ExpiresAt returns the server's expiry after the last successful renewal, by the server's
// clock. It is for display: the client acts on Deadline, by its own clock.
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// ServerEpoch returns the server_epoch of the last grant or renewal answer: it changes when
// the server restarts (with PostgreSQL, also when another replica answers). Empty from a
// server that does not send it.
func (l *Lease) ServerEpoch() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// ExtendedByRestart returns how much the server's restarts added to the lease's expiry
// beyond what this client was told (zero if none did), as of the last renewal: a restarted
// server treats the lease as held until at least the restart plus its ttl. The client logs
// each change of it, and of ServerEpoch.
func (l *Lease) ExtendedByRestart() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.extended
}

// noteServerLocked records what an answer says of the server's restarts, logging what is
// new. l.mu is held.
func (l *Lease) noteServerLocked(g Grant) {
	if g.ServerEpoch != "" && l.epoch != "" && g.ServerEpoch != l.epoch {
		l.c.log.Info("the server restarted (or another replica answered) while the lease was held", "name", l.name, "token", l.token,
			"server_epoch", g.ServerEpoch, "previous_server_epoch", l.epoch)
	}
	if g.ExtendedByRestart > l.extended {
		l.c.log.Warn("a server restart stretched the lease beyond what this client was told", "name", l.name, "token", l.token,
			"extended_by_restart", g.ExtendedByRestart, "server_epoch", g.ServerEpoch)
	}
	if g.ServerEpoch != "" {
		l.epoch = g.ServerEpoch
	}
	l.extended = g.ExtendedByRestart
}

// HandoverRequested returns a channel closed when the server first asks the holder to let
// the lease go (a cooperative handover, learnt from a renewal or the watch stream): finish or
// checkpoint the work and Release, so that the one the request names, if it waits in line, is
// granted next. Nothing is forced: the lease stays held until released or lost. Handover
// returns the request.
func (l *Lease) HandoverRequested() <-chan struct{} { return l.asked }

// Handover returns the latest request that the holder let the lease go, nil while none came.
func (l *Lease) Handover() *HandoverRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.handover
}

// noteHandover records a handover request for this grant, telling HandoverRequested and
// OnHandover about each new one.
func (l *Lease) noteHandover(h *HandoverRequest) {
	if h == nil || h.Token != l.token {
		return
	}
	l.mu.Lock()
	seen := l.handover != nil && l.handover.At.Equal(h.At) && l.handover.To == h.To && l.handover.Reason == h.Reason
	first := l.handover == nil
	if !seen {
		l.handover = h
	}
	l.mu.Unlock()
	if seen {
		return
	}
	l.c.log.Info("the server asks to hand the lease over", "name", l.name, "token", l.token, "to", h.To, "reason", h.Reason, "by", h.By)
	if first {
		close(l.asked)
	}
	if l.onAsk != nil {
		go l.onAsk(l, *h)
	}
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
// Deadline, at once when a renewal is refused or the watch stream shows the lease ending,
// on Release, or on Client.Close. context.Cause tells which: it matches ErrLeaseLost for the
// first three, and is ErrReleased or ErrClosed for the others. Its Deadline method reports
// none, because renewals move the deadline.
func (l *Lease) Context() context.Context { return l.ctx }

// Acquire asks for the lease on name. A lease somebody else holds is a *HeldError (after
// waiting up to o.Wait). Network failures and 5xx answers are retried with the same
// Idempotency-Key, so a grant whose answer was lost is returned rather than refused as held
// against ourselves; when they persist the error matches ErrUnavailable. A request that breaks
// the contract (a bad name or holder, a ttl outside the server's bounds) matches ErrInvalid
// and is never retried. Unless o.DisableKeepAlive, the lease renews itself, and follows its
// name on the watch stream, until released.
func (c *Client) Acquire(ctx context.Context, name string, o AcquireOptions) (*Lease, error) {
	op := fmt.Sprintf("acquire %q", name)
	if c.isClosed() {
		return nil, fmt.Errorf("%s: %w", op, ErrClosed)
	}
	if o.session != nil {
		o.TTL, o.DisableKeepAlive = o.session.ttl, true
	}
	o, body, err := c.acquireRequest(name, o)
	if err != nil {
		return nil, invalid(op, err)
	}
	if o.session != nil {
		body.TtlMs, body.SessionId = 0, &o.session.id
	}
	if o.Limit < 0 {
		return nil, fmt.Errorf("%s: %w: limit %d is negative", op, ErrInvalid, o.Limit)
	}
	if o.Limit > 0 {
		body.Limit, o.DisableWatch = &o.Limit, true
	}
	if o.Shared {
		if o.Limit > 0 {
			return nil, fmt.Errorf("%s: %w: a shared lease has no limit", op, ErrInvalid)
		}
		mode := wire.AcquireRequestModeShared
		body.Mode, o.DisableWatch = &mode, true
	}
	margin := c.marginFor(o.TTL)
	if o.TTL <= margin {
		return nil, fmt.Errorf("%s: %w: ttl %v must be longer than the safety margin %v", op, ErrInvalid, o.TTL, margin)
	}
	key := o.IdempotencyKey
	if key == "" {
		key = newKey()
	}
	var g Grant
	var sent time.Time
	err = c.untilGranted(ctx, op, name, o.Wait, func(waitMs *int64) (err error) {
		body.WaitMs = waitMs
		g, sent, err = c.acquireOnce(ctx, name, key, body)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.hold(ctx, g, sent, o, margin)
}

// untilGranted asks (send) for what op acquires, waiting up to wait for it: in the server's
// line (waitMs, each turn at most the server's bound on one wait) or, from a server without
// one, by asking again after each Retry-After.
func (c *Client) untilGranted(ctx context.Context, op, name string, wait time.Duration, send func(waitMs *int64) error) error {
	var waitUntil time.Time
	if wait > 0 {
		waitUntil = c.clock.Now().Add(wait)
	}
	line := true // the server waits in line, until it answers that it has no line
	for {
		var waitMs *int64
		if left := waitUntil.Sub(c.clock.Now()); line && left >= time.Millisecond {
			// Rounded up, so that the server's turn takes all that is left: rounded down, a
			// turn that runs out would leave a sliver of the wait for one more request.
			d := min(left, time.Duration(c.maxWait.Load()))
			ms := (d + time.Millisecond - 1).Milliseconds()
			waitMs = &ms
		}
		err := send(waitMs)
		if err == nil {
			return nil
		}
		var held *HeldError
		var ae *APIError
		left := waitUntil.Sub(c.clock.Now())
		switch {
		case waitUntil.IsZero():
			return err
		case errors.As(err, &ae) && ae.Code == CodeWaitingUnsupported && waitMs != nil:
			line = false // this server has no line: this acquire waits here, by polling
			continue
		case errors.As(err, &ae) && ae.Code == CodeInvalidRequest && ae.names("wait_ms") && waitMs != nil:
			// A server whose bound on one wait is below the one asked for: ask again for
			// shorter turns in line, and remember the shorter bound.
			if !c.lowerMaxWait(time.Duration(*waitMs) * time.Millisecond) {
				return err
			}
			continue
		case errors.As(err, &held) && waitMs != nil && left > 0:
			continue // one turn in line ran out: queue again for the rest of the wait
		case errors.As(err, &held) && left > 0:
			pause := min(max(held.RetryAfter, 50*time.Millisecond), left)
			c.log.DebugContext(ctx, "lease held; waiting", "name", name, "holder", held.Holder, "pause", pause)
			if serr := sleep(ctx, c.clock, pause); serr != nil {
				return fmt.Errorf("%s: waiting: %w (last answer: %w)", op, serr, err)
			}
			continue
		case errors.As(err, &ae) && ae.Code == CodeTooManyWaiters && left > 0:
			pause := min(max(ae.RetryAfter, 100*time.Millisecond), left)
			c.log.DebugContext(ctx, "waiting line full; trying again", "name", name, "pause", pause)
			if serr := sleep(ctx, c.clock, pause); serr != nil {
				return fmt.Errorf("%s: waiting: %w (last answer: %w)", op, serr, err)
			}
			continue
		}
		return err
	}
}

// minWaitTurn is the shortest turn in line the client asks for when a server refuses longer
// ones.
const minWaitTurn = time.Second

// lowerMaxWait records that the server refused a wait of refused as above its bound, and
// reports whether a shorter one is left to try.
func (c *Client) lowerMaxWait(refused time.Duration) bool {
	if refused <= minWaitTurn {
		return false
	}
	next := max(refused/2, minWaitTurn)
	for {
		cur := c.maxWait.Load()
		if int64(next) >= cur || c.maxWait.CompareAndSwap(cur, int64(next)) {
			return true
		}
	}
}

// acquireRequest fills in o's defaults and checks it by the contract's fixed rules (the
// server's configurable bounds are for the server to check), returning the request body.
func (c *Client) acquireRequest(name string, o AcquireOptions) (AcquireOptions, wire.AcquireRequest, error) {
	if o.Holder == "" {
		o.Holder = c.holder
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	ttlMs := o.TTL.Milliseconds()
	body := wire.AcquireRequest{Holder: o.Holder, TtlMs: ttlMs}
	switch {
	case o.TTL < time.Millisecond:
		return o, body, fmt.Errorf("ttl %v is not a positive number of milliseconds", o.TTL)
	case o.Wait < 0:
		return o, body, fmt.Errorf("wait %v is negative", o.Wait)
	case o.LockDelay < 0:
		return o, body, fmt.Errorf("lock delay %v is negative", o.LockDelay)
	}
	if err := lease.ValidateName(name); err != nil {
		return o, body, err
	}
	if err := lease.ValidateHolder(o.Holder); err != nil {
		return o, body, err
	}
	if o.LockDelay > 0 {
		ms := o.LockDelay.Milliseconds()
		body.LockDelayMs = &ms
	}
	if o.Metadata != nil {
		raw, err := json.Marshal(o.Metadata)
		if err != nil {
			return o, body, fmt.Errorf("metadata: %w", err)
		}
		if _, err := lease.NormalizeMetadata(raw); err != nil {
			return o, body, err
		}
		md := wire.Metadata(o.Metadata)
		body.Metadata = &md
	}
	return o, body, nil
}

// acquireOnce sends one acquire, retrying network failures with one Idempotency-Key. sent is
// the client time the FIRST attempt was sent: a retry may be answered with the grant made for
// an earlier attempt, so only the earliest send time bounds when the grant can have started.
func (c *Client) acquireOnce(ctx context.Context, name, key string, body wire.AcquireRequest) (Grant, time.Time, error) {
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
			case resp.ApplicationproblemJSON409 != nil && resp.ApplicationproblemJSON409.Code == wire.ProblemCodeLeaseHeld:
				p := resp.ApplicationproblemJSON409
				h := &HeldError{Name: name, Holder: deref(p.Holder), ExpiresAt: deref(p.ExpiresAt).Time, AvailableAt: deref(p.AvailableAt).Time}
				if resp.Headers409 != nil {
					h.RetryAfter = time.Duration(deref(resp.Headers409.RetryAfter)) * time.Second
				}
				return Grant{}, sent, h
			}
			err = problemOf(resp.HTTPResponse, resp.Body)
		} else if ctx.Err() == nil {
			err = unreachable(err)
		}
		op := fmt.Sprintf("acquire %q", name)
		if attempt > 1 {
			op += fmt.Sprintf(" (after %d attempts)", attempt)
		}
		err = fmt.Errorf("%s: %w", op, err)
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

// hold turns a grant into a held Lease with its deadline, keepalive and watch.
func (c *Client) hold(ctx context.Context, g Grant, sent time.Time, o AcquireOptions, margin time.Duration) (*Lease, error) {
	l := &Lease{c: c, name: g.Name, holder: g.Holder, id: g.LeaseID, token: g.Token, ttl: o.TTL, margin: margin,
		interval: time.Duration(float64(o.TTL) * c.renewFraction), lastSent: sent, expiresAt: g.ExpiresAt,
		asked: make(chan struct{}), onAsk: o.OnHandover, slot: g.Slot, shared: g.Shared}
	// The lease context outlives the acquire's context (which often bounds only the asking),
	// keeping its values.
	l.ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	giveBack := func(cause error) {
		l.cancel(cause)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = c.Release(rctx, g.Name, g.LeaseID)
	}

	// An answer that came late (a server-side wait, a slow network) may leave nothing of the
	// ttl by the reckoning from the send time, though the grant itself is fresh: renew before
	// handing the lease out, which restarts the reckoning from a send time after the grant.
	if c.clock.Now().Sub(sent) >= l.interval {
		resent := c.clock.Now()
		r, err := c.Renew(ctx, g.Name, g.LeaseID, 0)
		if err != nil {
			giveBack(err)
			return nil, fmt.Errorf("acquire %q: granted, but the answer came too late to rely on it and renewing failed: %w", g.Name, err)
		}
		l.lastSent, l.expiresAt = resent, r.ExpiresAt
		g.ServerEpoch, g.ExtendedByRestart = r.ServerEpoch, r.ExtendedByRestart
	}
	var sessSent, sessDeadline time.Time
	if s := o.session; s != nil {
		sessSent, sessDeadline = s.reckoning() // before l.mu: a session's renewal takes its lock, then its leases'
	}
	l.mu.Lock()
	l.noteServerLocked(g)
	l.deadline = l.lastSent.Add(o.TTL - margin)
	if o.session != nil {
		// The lease expires with its session: it may be relied on only as long as the session.
		l.sess, l.lastSent, l.deadline = o.session, sessSent, sessDeadline
	}
	l.armLocked()
	l.mu.Unlock()
	// No work runs under a lease nobody has received yet: one granted as the client closes is
	// given back at once.
	if c.isClosed() {
		giveBack(ErrClosed)
		return nil, fmt.Errorf("acquire %q: %w", g.Name, ErrClosed)
	}
	l.stopClose = context.AfterFunc(c.closeCtx, func() { l.end(ErrClosed) })
	follow := !o.DisableWatch && o.session != nil // its session keeps it alive
	if !o.DisableKeepAlive {
		// Closed meanwhile: the lease context has ended with ErrClosed, and nothing runs.
		follow = l.spawn(l.keepalive) == nil && !o.DisableWatch
	}
	if follow {
		_ = l.spawn(l.follow)
	}
	if o.session != nil {
		o.session.add(l)
	}
	return l, nil
}

// spawn runs f in the background, counted for Release and for Client.Close.
func (l *Lease) spawn(f func()) error {
	l.bg.Add(1)
	err := l.c.goBackground(func() {
		defer l.bg.Done()
		f()
	})
	if err != nil {
		l.bg.Done()
	}
	return err
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
// The keepalive calls it; call it yourself only with DisableKeepAlive. A lease held under a
// Session renews its session (and so every lease under it).
func (l *Lease) Renew(ctx context.Context) error {
	if err := context.Cause(l.ctx); err != nil {
		return fmt.Errorf("renew %q: %w", l.name, err)
	}
	if l.sess != nil {
		return l.sess.Renew(ctx)
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
	if err := l.renewed(g, sent); err != nil {
		return err
	}
	l.noteHandover(g.Handover)
	return nil
}

// renewed moves the deadline after a renewal sent at sent was answered g.
func (l *Lease) renewed(g Grant, sent time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return fmt.Errorf("renew %q: renewed, but the lease context had already ended: %w", l.name, context.Cause(l.ctx))
	}
	l.expiresAt = g.ExpiresAt
	l.noteServerLocked(g)
	if sent.After(l.lastSent) {
		l.lastSent = sent
		l.deadline = sent.Add(l.ttl - l.margin)
		l.armLocked()
	}
	return nil
}

// lose ends the context because the server refused the lease or showed it ending. A lease
// its holder already stopped using (released, abandoned, closed) is not lost by what follows.
func (l *Lease) lose(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cause := context.Cause(l.ctx); cause != nil && !errors.Is(cause, ErrLeaseLost) {
		return
	}
	if l.lost == nil {
		l.lost = err
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	l.cancel(err)
}

// end stops using the lease: the deadline timer stops and the context ends with cause.
func (l *Lease) end(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
	l.cancel(cause)
}

// keepalive renews at the renew fraction of the ttl; failed renewals are retried with
// jittered pauses until one succeeds, the server refuses, or the context ends at its deadline.
func (l *Lease) keepalive() {
	renewLoop(l.ctx, l.c.clock, l.interval, func() time.Time {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.lastSent
	}, l.Renew, func(err error, pause time.Duration) {
		l.c.log.Warn("lease renewal failed; retrying", "name", l.name, "token", l.token, "err", err, "retry_in", pause)
	})
}

// renewLoop renews, by renew, interval after each last successful renewal was sent (last);
// failed renewals are retried with jittered pauses (reported to warn) until one succeeds or
// ctx ends.
func renewLoop(ctx context.Context, clk Clock, interval time.Duration, last func() time.Time, renew func(context.Context) error,
	warn func(error, time.Duration)) {
	for {
		if sleep(ctx, clk, last().Add(interval).Sub(clk.Now())) != nil {
			return
		}
		for {
			// One attempt may not eat the time left for the next ones.
			actx, cancel := context.WithTimeout(ctx, max(interval, 100*time.Millisecond))
			err := renew(actx)
			cancel()
			if err == nil || ctx.Err() != nil {
				break
			}
			pause := jitter(max(interval/4, 10*time.Millisecond))
			warn(err, pause)
			if sleep(ctx, clk, pause) != nil {
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// follow makes the lease one of the client's shared watch stream's followers until its
// context ends: the stream ends the context as soon as it shows the lease ending by anybody
// else's hand (a revoke, an expiry the server recorded, a release with its lease_id, a
// successor's grant), instead of at the next renewal. Without a stream (a server that has
// none, a network that cuts it) renewals still guard the lease alone.
func (l *Lease) follow() {
	if l.c.followers.join(l) {
		l.checkState() // the stream was open already: what happened before joining is in the state
	}
	<-l.ctx.Done()
	l.c.followers.leave(l)
}

// checkState reads the name's state and ends the context when it shows the lease ended.
func (l *Lease) checkState() {
	st, err := l.c.Get(l.ctx, l.name)
	switch {
	case err != nil:
		// unknown: the renewals decide
	case !st.Held && st.Token == l.token && st.End != "":
		l.lostBecause(fmt.Sprintf("was %s (seen on reading its state)", st.End))
	case st.Token > l.token:
		l.lostBecause(fmt.Sprintf("was superseded by token %d (seen on reading its state)", st.Token))
	}
}

// see acts on an event of the lease's name from the watch stream.
func (l *Lease) see(e Event) {
	switch {
	case e.Token == l.token && (e.Type == EventReleased || e.Type == EventExpired || e.Type == EventRevoked):
		l.lostBecause(fmt.Sprintf("was %s (seen on the watch stream)", e.Type))
	case e.Type == EventAcquired && e.Token > l.token:
		l.lostBecause(fmt.Sprintf("was superseded by token %d (seen on the watch stream)", e.Token))
	case e.Type == EventHandoverRequested:
		l.noteHandover(e.Handover)
	}
}

func (l *Lease) lostBecause(how string) {
	l.lose(fmt.Errorf("%w: lease %q token %d %s", ErrLeaseLost, l.name, l.token, how))
}

// Release stops the keepalive and the watch, ends the context and releases the lease on the
// server. It is idempotent: once it has had an answer, it returns that answer again. It
// returns an error matching ErrLeaseLost when the lease had already been lost (refused
// renewal, an end seen on the watch stream, or the server says it expired or was revoked):
// the work done under it may have overlapped another holder's. A network failure is
// returned as is, and a later Release tries again.
func (l *Lease) Release(ctx context.Context) error {
	l.relMu.Lock()
	defer l.relMu.Unlock()
	if l.relDone {
		return l.relErr
	}
	// Stop using the lease before giving it back.
	l.end(ErrReleased)
	l.bg.Wait()
	l.stopClose()

	l.mu.Lock()
	lost := l.lost
	l.mu.Unlock()
	if lost != nil {
		l.relDone, l.relErr = true, fmt.Errorf("release %q: %w", l.name, lost)
		return l.relErr
	}
	err := l.c.Release(ctx, l.name, l.id)
	if err != nil && (retryable(ctx, err) || ctx.Err() != nil) {
		return err
	}
	l.relDone, l.relErr = true, err
	return err
}

// Do acquires the lease on name, runs fn with the lease context and the fencing token, and
// releases the lease, on every path: when fn returns, and when it panics (the panic then
// goes on, after the release). fn's context also ends with ctx.
//
// The error joins fn's error and the release's, and matches ErrLeaseLost whenever the lease
// was lost before fn returned, whatever fn returned (a plain ctx.Err(), or nil): the work may
// then have overlapped another holder's.
func Do(ctx context.Context, c *Client, name string, o AcquireOptions, fn func(ctx context.Context, token int64) error) (err error) {
	l, err := c.Acquire(ctx, name, o)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancelCause(l.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	var ferr error
	// Deferred, so that a panicking fn does not keep the lease: the release runs while the
	// panic unwinds, and the panic carries on with its own stack.
	defer func() {
		stop()
		cancel(nil)
		// Read before Release, whose own cause (ErrReleased) would hide how the lease ended.
		ended := context.Cause(l.Context())
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), max(l.TTL(), 5*time.Second))
		defer rcancel()
		rerr := l.Release(rctx)
		errs := []error{ferr}
		if ended != nil && !errors.Is(ferr, ended) {
			errs = append(errs, fmt.Errorf("the lease context ended before the work returned: %w", ended))
		}
		if rerr != nil && !(errors.Is(rerr, ErrLeaseLost) && errors.Is(ended, ErrLeaseLost)) {
			errs = append(errs, rerr)
		}
		err = errors.Join(errs...)
	}()
	ferr = fn(runCtx, l.Token())
	return nil
}
