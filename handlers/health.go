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

// Readyz answers 200 when the database answers within a second and writes to it do not fail.
func (s *server) Readyz(ctx context.Context, _ api.ReadyzRequestObject) (api.ReadyzResponseObject, error) {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.store.Ping(pctx); err != nil {
		// A store that says why it is unavailable has logged it already (failing writes).
		if !lease.IsCode(err, lease.CodeUnavailable) {
			s.log.WarnContext(ctx, "not ready", "err", err)
			err = lease.Errorf(lease.CodeUnavailable, "the database does not answer")
		}
		pr := s.toProblem(ctx, err)
		return api.Readyz503ApplicationProblemPlusJSONResponse{UnavailableApplicationProblemPlusJSONResponse: api.UnavailableApplicationProblemPlusJSONResponse{
			Body: pr.Problem, Headers: api.UnavailableResponseHeaders{RetryAfter: pr.retryAfter}}}, nil
	}
	return api.Readyz200JSONResponse{Status: "ok"}, nil
}
