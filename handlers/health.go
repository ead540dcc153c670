package handlers

import (
	"context"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/lease"
)

// Healthz answers while the process serves requests.
func (s *server) Healthz(context.Context, api.HealthzRequestObject) (api.HealthzResponseObject, error) {
	return api.Healthz200JSONResponse{Status: "ok"}, nil
}

// Readyz answers 200 when the database answers within a second.
func (s *server) Readyz(ctx context.Context, _ api.ReadyzRequestObject) (api.ReadyzResponseObject, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		s.log.WarnContext(ctx, "not ready", "err", err)
		pr := s.toProblem(ctx, lease.Errorf(lease.CodeUnavailable, "the database does not answer"))
		return api.Readyz503ApplicationProblemPlusJSONResponse(pr.Problem), nil
	}
	return api.Readyz200JSONResponse{Status: "ok"}, nil
}
