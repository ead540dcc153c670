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
	markLong(ctx)
	who := principalOf(ctx)
	done, err := s.auth.hold(who, holdWatch)
	if err != nil {
		return problemAs[api.WatchdefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	prefix, _, _ := principalOf(ctx).ListScope(deref(req.Params.Prefix))
	sctx, cancel := s.auth.untilRevoked(ctx)
	st, err := s.hub.OpenAs(sctx, prefix, deref(req.Params.LastEventID), who.IsAdmin())
	if err != nil {
		cancel()
		done()
		return problemAs[api.WatchdefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	if clientOf(ctx).method == http.MethodHead {
		// A HEAD gets the stream's headers and its end: the stream stops at its first wait.
		cancel()
	}
	st.Keep = func(e lease.Event) bool { return who.SeesEvent(e) }
	return stream{st: st, log: s, done: func() { cancel(); done() }}, nil
}

// stream is the strict server's response for a watch: it writes until the client leaves.
type stream struct {
	st   *watch.Stream
	log  *server
	done func()
}

func (r stream) VisitWatchResponse(w http.ResponseWriter) error {
	defer r.done()
	if err := r.st.Serve(w, nil); err != nil { // the hub's EncodeEvent, shared by every watcher
		r.log.log.Debug("watcher dropped", "err", err)
	}
	return nil
}

// EncodeEvent is an event as watch streams send it: give it to the hub as watch.Options.Encode.
func EncodeEvent(e lease.Event) any { return wireEvent(e) }
