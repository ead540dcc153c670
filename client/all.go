package client

import (
	"context"
	"fmt"
	"time"

	"github.com/leasekeeper/leasekeeper/client/internal/wire"
	"github.com/leasekeeper/leasekeeper/lease"
)

// AcquireAll asks for the leases on every one of names at once, all or none (POST
// /v1/acquire): the server grants them in one transaction or refuses them all, and while it
// waits (o.Wait) it holds none of them, so two such acquires never deadlock. With o.Shared
// every lease is a shared (read) lease, all or none. The leases come in the order asked, each
// kept alive like a lease of Acquire and renewed and released by itself; their contexts end
// together: when any of them ends (lost, released, its deadline passed, the client closed), the
// context of every other ends too, with a cause that names it. Some names held is a
// *HeldError whose Held lists them. Network failures and 5xx answers are retried with the same
// Idempotency-Key (o.IdempotencyKey, or a fresh one), so grants whose answer was lost are
// answered again rather than refused as held against ourselves; when they persist the error
// matches ErrUnavailable. o.Limit does not apply.
func (c *Client) AcquireAll(ctx context.Context, names []string, o AcquireOptions) ([]*Lease, error) {
	op := fmt.Sprintf("acquire %q", names)
	if c.isClosed() {
		return nil, fmt.Errorf("%s: %w", op, ErrClosed)
	}
	if err := lease.ValidateNames(names); err != nil {
		return nil, invalid(op, err)
	}
	if o.Limit != 0 {
		return nil, fmt.Errorf("%s: %w: Limit does not apply to several names", op, ErrInvalid)
	}
	if o.session != nil {
		o.TTL, o.DisableKeepAlive = o.session.ttl, true
	}
	o, one, err := c.acquireRequest(names[0], o)
	if err != nil {
		return nil, invalid(op, err)
	}
	body := wire.AcquireAllRequest{Names: names, Holder: one.Holder, TtlMs: one.TtlMs, LockDelayMs: one.LockDelayMs, Metadata: one.Metadata}
	if o.session != nil {
		body.TtlMs, body.SessionId = 0, &o.session.id
	}
	if o.Shared {
		mode := wire.AcquireAllRequestModeShared
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
	var gs []Grant
	var sent time.Time
	err = c.untilGranted(ctx, op, names[0], o.Wait, func(waitMs *int64) (err error) {
		body.WaitMs = waitMs
		gs, sent, err = c.acquireAllOnce(ctx, op, key, body)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.holdAll(ctx, gs, sent, o, margin)
}

// acquireAllOnce sends one acquire of several names, retrying network failures with one
// Idempotency-Key. sent is when the first attempt was sent, by the client's clock: a retry may
// be answered with the grants made for an earlier attempt.
func (c *Client) acquireAllOnce(ctx context.Context, op, key string, body wire.AcquireAllRequest) ([]Grant, time.Time, error) {
	params := &wire.AcquireAllParams{IdempotencyKey: &key}
	sent := c.clock.Now()
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		resp, err := c.api.AcquireAllWithResponse(ctx, params, body)
		if err == nil {
			switch {
			case resp.JSON200 != nil:
				gs := make([]Grant, len(resp.JSON200.Leases))
				for i := range resp.JSON200.Leases {
					if gs[i] = grantOf(&resp.JSON200.Leases[i]); gs[i].LeaseID == "" {
						return nil, sent, fmt.Errorf("%s: the grant of %q carries no lease_id", op, gs[i].Name)
					}
				}
				return gs, sent, nil
			case resp.ApplicationproblemJSON409 != nil && resp.ApplicationproblemJSON409.Code == wire.ProblemCodeLeaseHeld:
				p := resp.ApplicationproblemJSON409
				h := &HeldError{Holder: deref(p.Holder), ExpiresAt: deref(p.ExpiresAt).Time, AvailableAt: deref(p.AvailableAt).Time}
				if p.Held != nil && len(*p.Held) > 0 {
					h.Held, h.Name = *p.Held, (*p.Held)[0]
				}
				if resp.Headers409 != nil {
					h.RetryAfter = time.Duration(deref(resp.Headers409.RetryAfter)) * time.Second
				}
				return nil, sent, h
			}
			err = problemOf(resp.HTTPResponse, resp.Body)
		} else if ctx.Err() == nil {
			err = unreachable(err)
		}
		what := op
		if attempt > 1 {
			what += fmt.Sprintf(" (after %d attempts)", attempt)
		}
		err = fmt.Errorf("%s: %w", what, err)
		if attempt >= c.attempts || !retryable(ctx, err) {
			return nil, sent, err
		}
		c.log.WarnContext(ctx, "acquire failed; retrying with the same Idempotency-Key", "names", body.Names, "err", err)
		if serr := sleep(ctx, c.clock, jitter(backoff)); serr != nil {
			return nil, sent, fmt.Errorf("%w (gave up: %w)", err, serr)
		}
		backoff *= 2
	}
}

// holdAll holds every grant of a set, as hold does one, and ties their contexts: when one
// ends, every other ends too. If one cannot be held, every one is given back.
func (c *Client) holdAll(ctx context.Context, gs []Grant, sent time.Time, o AcquireOptions, margin time.Duration) ([]*Lease, error) {
	ls := make([]*Lease, 0, len(gs))
	for i, g := range gs {
		l, err := c.hold(ctx, g, sent, o, margin)
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			for _, held := range ls {
				_ = held.Release(rctx)
			}
			for _, rest := range gs[i+1:] {
				_ = c.Release(rctx, rest.Name, rest.LeaseID)
			}
			return nil, err
		}
		ls = append(ls, l)
	}
	for _, l := range ls {
		context.AfterFunc(l.ctx, func() {
			cause := fmt.Errorf("%w: lease %q of the same acquire ended: %w", ErrLeaseLost, l.name, context.Cause(l.ctx))
			for _, other := range ls {
				if other != l {
					other.cancel(cause)
				}
			}
		})
	}
	return ls, nil
}
