package handlers

import (
	"context"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/wire"
)

// AcquireAll grants several names, all or none.
func (s *server) AcquireAll(ctx context.Context, req api.AcquireAllRequestObject) (api.AcquireAllResponseObject, error) {
	p, wait, err := s.acquireAllParams(req)
	if err == nil {
		who := principalOf(ctx)
		p.Owner, p.MaxHeld = who.KeyID, s.auth.gate.MaxHeld(who)
		// Scoped to the caller's key alone: the names are part of the request it identifies,
		// so the same key with other names is a different request, refused.
		p.IdempotencyKey, err = auth.IdempotencyKey(s.auth.cfg.Secret, who, "", p.IdempotencyKey)
	}
	if err == nil {
		var ls []lease.Lease
		err = s.acquireWaiting(ctx, wait, func(ctx context.Context) (err error) {
			ls, err = s.acquirer.AcquireAll(ctx, p, wait)
			return err
		})
		if err == nil {
			s.metrics.Op("acquire_all", nil)
			out := api.AcquireAll200JSONResponse{Leases: make([]api.Lease, len(ls))}
			for i, l := range ls {
				out.Leases[i] = wire.Lease(l, &s.epoch)
			}
			return out, nil
		}
	}
	s.metrics.Op("acquire_all", err)
	pr := s.toProblem(ctx, err)
	switch pr.Code {
	case api.ProblemCodeLeaseHeld:
		return api.AcquireAll409ApplicationProblemPlusJSONResponse{Body: pr.Problem, Headers: api.AcquireAll409ResponseHeaders{RetryAfter: &pr.retryAfter}}, nil
	case api.ProblemCodeTooManyWaiters:
		return api.AcquireAll429ApplicationProblemPlusJSONResponse{Body: pr.Problem, Headers: api.AcquireAll429ResponseHeaders{RetryAfter: pr.retryAfter}}, nil
	}
	return api.AcquireAlldefaultApplicationProblemPlusJSONResponse{Body: pr.Problem, StatusCode: pr.Status}, nil
}

// acquireAllParams validates an acquire of several names against the domain rules and the
// server's limits.
func (s *server) acquireAllParams(req api.AcquireAllRequestObject) (store.AcquireAllParams, time.Duration, error) {
	b := req.Body
	if b == nil {
		return store.AcquireAllParams{}, 0, lease.Errorf(lease.CodeInvalid, "the body is required")
	}
	if err := lease.ValidateNames(b.Names); err != nil {
		return store.AcquireAllParams{}, 0, err
	}
	one, wait, err := s.grantParams(grantFields{b.Holder, b.TtlMs, b.SessionId, b.WaitMs, b.LockDelayMs, b.Metadata, string(deref(b.Mode))}, b.Names[0], 0)
	if err != nil {
		return store.AcquireAllParams{}, 0, err
	}
	return store.AcquireAllParams{Names: b.Names, Holder: one.Holder, TTL: one.TTL, LockDelay: one.LockDelay, Metadata: one.Metadata,
		SessionID: one.SessionID, Mode: one.Mode, IdempotencyKey: deref(req.Params.IdempotencyKey)}, wait, nil
}
