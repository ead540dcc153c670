package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/wire"
)

// Acquirer grants leases, waiting in line first-come first-served when asked to wait.
type Acquirer interface {
	Acquire(ctx context.Context, p store.AcquireParams, wait time.Duration) (lease.Lease, error)
	// AcquireAll grants every name of p or none, waiting in the line of each when asked to.
	AcquireAll(ctx context.Context, p store.AcquireAllParams, wait time.Duration) ([]lease.Lease, error)
	// Waiters returns how many requests wait in line for name.
	Waiters(name string) int
}

// AcquireLease grants a lease.
func (s *server) AcquireLease(ctx context.Context, req api.AcquireLeaseRequestObject) (api.AcquireLeaseResponseObject, error) {
	p, wait, err := s.acquireParams(req)
	if err == nil {
		who := principalOf(ctx)
		p.Owner, p.MaxHeld = who.KeyID, s.auth.gate.MaxHeld(who)
		p.IdempotencyKey, err = auth.IdempotencyKey(s.auth.cfg.Secret, who, p.Name, p.IdempotencyKey)
	}
	if err == nil {
		var l lease.Lease
		err = s.acquireWaiting(ctx, wait, func(ctx context.Context) (err error) {
			l, err = s.acquirer.Acquire(ctx, p, wait)
			return err
		})
		if err == nil {
			s.metrics.Op("acquire", nil)
			return wire.LeaseAnswer{Body: wire.Lease(l, &s.epoch)}, nil
		}
	}
	s.metrics.Op("acquire", err)
	pr := s.toProblem(ctx, err)
	switch pr.Code {
	case api.ProblemCodeLeaseHeld:
		return api.AcquireLease409ApplicationProblemPlusJSONResponse{Body: pr.Problem, Headers: api.AcquireLease409ResponseHeaders{RetryAfter: &pr.retryAfter}}, nil
	case api.ProblemCodeTooManyWaiters:
		return api.AcquireLease429ApplicationProblemPlusJSONResponse{Body: pr.Problem, Headers: api.AcquireLease429ResponseHeaders{RetryAfter: pr.retryAfter}}, nil
	}
	return api.AcquireLeasedefaultApplicationProblemPlusJSONResponse{Body: pr.Problem, StatusCode: pr.Status}, nil
}

// acquireWaiting runs acquire, which waits up to wait for its grant when wait is above 0: then
// only while the caller's key is not revoked, counted among the key's waits, traced and timed.
func (s *server) acquireWaiting(ctx context.Context, wait time.Duration, acquire func(context.Context) error) error {
	if wait > 0 {
		var done, stop func()
		ctx, stop = s.auth.untilRevoked(ctx)
		defer stop()
		var err error
		if done, err = s.auth.gate.Hold(principalOf(ctx), auth.HoldWait); err != nil {
			return err
		}
		defer done()
	}
	start := s.clock.Now()
	var waited func(error)
	if wait > 0 {
		waited = s.waitSpan(ctx, wait)
	}
	err := acquire(ctx)
	if wait > 0 {
		waited(err)
		markLong(ctx)
		s.metrics.ObserveAcquireWait(err, s.clock.Now().Sub(start))
	}
	return err
}

// acquireParams validates an acquire request against the domain rules and the server's limits.
func (s *server) acquireParams(req api.AcquireLeaseRequestObject) (store.AcquireParams, time.Duration, error) {
	b := req.Body
	if b == nil {
		return store.AcquireParams{}, 0, lease.Errorf(lease.CodeInvalid, "the body is required")
	}
	p, wait, err := s.grantParams(grantFields{b.Holder, b.TtlMs, b.SessionId, b.WaitMs, b.LockDelayMs, b.Metadata, string(deref(b.Mode))}, req.Name, deref(b.Limit))
	p.IdempotencyKey = deref(req.Params.IdempotencyKey)
	return p, wait, err
}

// grantFields are the fields of a request that every acquire has, of one name or several.
type grantFields struct {
	holder      string
	ttlMs       int64
	sessionID   *string
	waitMs      *int64
	lockDelayMs *int64
	metadata    *api.Metadata
	mode        string
}

// grantParams validates f, the fields of an acquire of name (a semaphore's with limit above 0),
// against the domain rules and the server's limits, and returns the acquire and its wait.
func (s *server) grantParams(f grantFields, name string, limit int) (store.AcquireParams, time.Duration, error) {
	var ttl time.Duration
	if f.sessionID != nil {
		if f.ttlMs != 0 {
			return store.AcquireParams{}, 0, lease.Errorf(lease.CodeInvalid, "ttl_ms must be 0 with session_id: a lease under a session lasts as long as the session")
		}
	} else {
		// Range-check the raw milliseconds before any arithmetic: a huge value would wrap
		// around into the allowed range once multiplied into a time.Duration.
		var err error
		if ttl, err = lease.Millis("ttl_ms", f.ttlMs); err != nil {
			return store.AcquireParams{}, 0, err
		}
	}
	wait, err := lease.Millis("wait_ms", deref(f.waitMs))
	if err != nil {
		return store.AcquireParams{}, 0, err
	}
	delay, err := lease.Millis("lock_delay_ms", deref(f.lockDelayMs))
	if err != nil {
		return store.AcquireParams{}, 0, err
	}
	p := store.AcquireParams{Name: name, Holder: f.holder, TTL: ttl, LockDelay: delay, SessionID: deref(f.sessionID), Limit: limit}
	md, err := metadataParam(f.metadata)
	if err != nil {
		return p, 0, err
	}
	p.Metadata = md
	if p.Mode, err = lease.ValidateMode(f.mode, p.Limit); err != nil {
		return p, 0, err
	}
	ttlErr := s.limits.ValidateTTL(p.TTL)
	if p.SessionID != "" {
		ttlErr = nil // the session's
	}
	for _, err := range []error{
		lease.ValidateName(p.Name), lease.ValidateHolder(p.Holder), ttlErr, lease.ValidateLimit(p.Limit),
		s.limits.ValidateWait(wait), s.limits.ValidateLockDelay(p.LockDelay),
	} {
		if err != nil {
			return p, 0, err
		}
	}
	return p, wait, nil
}

// metadataParam turns a request's metadata into its stored form; nil for none.
func metadataParam(m *api.Metadata) (json.RawMessage, error) {
	if m == nil {
		return nil, nil
	}
	// Kept as the client wrote it: no HTML escaping of <, > and & (pages escape on output).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(*m); err != nil {
		return nil, lease.Errorf(lease.CodeInvalid, "metadata: %v", err)
	}
	return lease.NormalizeMetadata(buf.Bytes())
}

// ttlParam converts an optional ttl_ms, 0 meaning "keep the lease's".
func (s *server) ttlParam(ms *int64) (time.Duration, error) {
	if ms == nil {
		return 0, nil
	}
	ttl, err := lease.Millis("ttl_ms", *ms)
	if err != nil {
		return 0, err
	}
	return ttl, s.limits.ValidateTTL(ttl)
}

// RenewLease extends a lease.
func (s *server) RenewLease(ctx context.Context, req api.RenewLeaseRequestObject) (api.RenewLeaseResponseObject, error) {
	l, err := s.renew(ctx, req)
	s.metrics.Op("renew", err)
	if err != nil {
		return problemAs[api.RenewLeasedefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	return wire.LeaseAnswer{Body: wire.Lease(l, &s.epoch)}, nil
}

func (s *server) renew(ctx context.Context, req api.RenewLeaseRequestObject) (lease.Lease, error) {
	if req.Body == nil {
		return lease.Lease{}, lease.Errorf(lease.CodeInvalid, "the body is required")
	}
	if err := lease.ValidateName(req.Name); err != nil {
		return lease.Lease{}, err
	}
	ttl, err := s.ttlParam(req.Body.TtlMs)
	if err != nil {
		return lease.Lease{}, err
	}
	md, err := metadataParam(req.Body.Metadata)
	if err != nil {
		return lease.Lease{}, err
	}
	return s.store.Renew(ctx, req.Name, req.Body.LeaseId, ttl, md)
}

// ReleaseLease releases a lease.
func (s *server) ReleaseLease(ctx context.Context, req api.ReleaseLeaseRequestObject) (api.ReleaseLeaseResponseObject, error) {
	err := lease.ValidateName(req.Name)
	if err == nil && req.Body == nil {
		err = lease.Errorf(lease.CodeInvalid, "the body is required")
	}
	if err == nil {
		err = s.store.Release(ctx, req.Name, req.Body.LeaseId)
	}
	s.metrics.Op("release", err)
	if err != nil {
		return problemAs[api.ReleaseLeasedefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	return api.ReleaseLease204Response{}, nil
}

// RevokeLease ends the current lease on a name.
func (s *server) RevokeLease(ctx context.Context, req api.RevokeLeaseRequestObject) (api.RevokeLeaseResponseObject, error) {
	err := lease.ValidateName(req.Name)
	if err == nil {
		err = s.store.Revoke(ctx, req.Name, deref(req.Params.Token), principalOf(ctx).Actor())
	}
	s.metrics.Op("revoke", err)
	if err != nil {
		return problemAs[api.RevokeLeasedefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	return api.RevokeLease204Response{}, nil
}

// GetLease returns a name's state.
func (s *server) GetLease(ctx context.Context, req api.GetLeaseRequestObject) (api.GetLeaseResponseObject, error) {
	err := lease.ValidateName(req.Name)
	var st lease.State
	if err == nil {
		st, err = s.store.Get(ctx, req.Name)
	}
	if err != nil {
		return problemAs[api.GetLeasedefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	st.Waiters = s.acquirer.Waiters(st.Name)
	return api.GetLease200JSONResponse(wire.State(st)), nil
}

// ListLeases lists leases by name.
func (s *server) ListLeases(ctx context.Context, req api.ListLeasesRequestObject) (api.ListLeasesResponseObject, error) {
	prefix, keep, none := principalOf(ctx).ListScope(deref(req.Params.Prefix))
	if none {
		return api.ListLeases200JSONResponse{Leases: []api.LeaseState{}}, nil
	}
	f := store.LeaseFilter{Prefix: prefix, Limit: deref(req.Params.Limit), Cursor: deref(req.Params.Cursor)}
	if req.Params.State != nil {
		f.State = string(*req.Params.State)
	}
	page, err := s.store.List(ctx, f)
	if err != nil {
		return problemAs[api.ListLeasesdefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	out := api.ListLeases200JSONResponse{Leases: make([]api.LeaseState, 0, len(page.Items)), NextCursor: page.Next}
	for _, st := range page.Items {
		if keep != nil && !keep(st.Name) {
			continue
		}
		st.Waiters = s.acquirer.Waiters(st.Name)
		out.Leases = append(out.Leases, wire.State(st))
	}
	return out, nil
}

// ListLeaseEvents returns a name's history, oldest first.
func (s *server) ListLeaseEvents(ctx context.Context, req api.ListLeaseEventsRequestObject) (api.ListLeaseEventsResponseObject, error) {
	err := lease.ValidateName(req.Name)
	var page store.Page[lease.Event]
	if err == nil {
		page, err = s.store.Events(ctx, store.EventFilter{Name: req.Name, Slots: true, Limit: deref(req.Params.Limit), Cursor: deref(req.Params.Cursor)})
	}
	if err != nil {
		return problemAs[api.ListLeaseEventsdefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	out := api.ListLeaseEvents200JSONResponse{Events: make([]api.Event, 0, len(page.Items)), NextCursor: page.Next}
	who := principalOf(ctx)
	for _, e := range page.Items {
		if !who.SeesEvent(e) {
			continue
		}
		out.Events = append(out.Events, wire.Event(e))
	}
	return out, nil
}

// errNoLine refuses a wait of a server without a waiting line.
func errNoLine() error {
	return lease.Errorf(lease.CodeWaitingUnsupported, "this server has no waiting line; send wait_ms 0 and ask again later")
}

// noLine is the Acquirer without a waiting line.
type noLine struct{ store store.Store }

func (n noLine) Acquire(ctx context.Context, p store.AcquireParams, wait time.Duration) (lease.Lease, error) {
	if wait > 0 {
		return lease.Lease{}, errNoLine()
	}
	return n.store.Acquire(ctx, p)
}

func (n noLine) AcquireAll(ctx context.Context, p store.AcquireAllParams, wait time.Duration) ([]lease.Lease, error) {
	if wait > 0 {
		return nil, errNoLine()
	}
	return n.store.AcquireAll(ctx, p)
}

func (noLine) Waiters(string) int { return 0 }

// RequestHandover asks the current holder of a lease to let it go.
func (s *server) RequestHandover(ctx context.Context, req api.RequestHandoverRequestObject) (api.RequestHandoverResponseObject, error) {
	err := lease.ValidateName(req.Name)
	if err == nil && req.Body == nil {
		err = lease.Errorf(lease.CodeInvalid, "the body is required")
	}
	var h lease.Handover
	if err == nil {
		h = lease.Handover{To: deref(req.Body.To), Reason: deref(req.Body.Reason), By: principalOf(ctx).Actor()}
		err = lease.ValidateHandover(h.To, h.Reason)
	}
	if err == nil {
		h, err = s.store.RequestHandover(ctx, req.Name, h)
	}
	s.metrics.Op("handover", err)
	if err != nil {
		return problemAs[api.RequestHandoverdefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	return api.RequestHandover202JSONResponse(wire.Handover(h)), nil
}
