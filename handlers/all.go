package handlers

import (
	"context"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
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
	if b.Mode != nil {
		if err := lease.ValidateAllMode(string(*b.Mode)); err != nil {
			return store.AcquireAllParams{}, 0, err
		}
	}
	one, wait, err := s.grantParams(grantFields{b.Holder, b.TtlMs, b.SessionId, b.WaitMs, b.LockDelayMs, b.Metadata, ""}, b.Names[0], 0)
	if err != nil {
		return store.AcquireAllParams{}, 0, err
	}
	return store.AcquireAllParams{Names: b.Names, Holder: one.Holder, TTL: one.TTL, LockDelay: one.LockDelay, Metadata: one.Metadata,
		SessionID: one.SessionID, Mode: lease.ModeExclusive}, wait, nil
}
