package handlers

import (
	"context"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/lease"
)

// Watch streams events as Server-Sent Events.
func (s *server) Watch(ctx context.Context, req api.WatchRequestObject) (api.WatchResponseObject, error) {
	pr := s.toProblem(ctx, lease.Errorf(lease.CodeUnavailable, "watch is not available yet"))
	return api.WatchdefaultApplicationProblemPlusJSONResponse{Body: pr.Problem, StatusCode: pr.Status}, nil
}
