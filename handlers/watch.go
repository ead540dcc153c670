package handlers

import (
	"context"
	"net/http"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/watch"
)

// Watch streams events as Server-Sent Events.
func (s *server) Watch(ctx context.Context, req api.WatchRequestObject) (api.WatchResponseObject, error) {
	if s.hub == nil {
		return problemAs[api.WatchdefaultApplicationProblemPlusJSONResponse](s, ctx, lease.Errorf(lease.CodeUnavailable, "this server does not stream events")), nil
	}
	st, err := s.hub.Open(ctx, deref(req.Params.Prefix), deref(req.Params.LastEventID))
	if err != nil {
		return problemAs[api.WatchdefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	return stream{st: st, log: s}, nil
}

// stream is the strict server's response for a watch: it writes until the client leaves.
type stream struct {
	st  *watch.Stream
	log *server
}

func (r stream) VisitWatchResponse(w http.ResponseWriter) error {
	if err := r.st.Serve(w, func(e lease.Event) any { return wireEvent(e) }); err != nil {
		r.log.log.Debug("watcher dropped", "err", err)
	}
	return nil
}
