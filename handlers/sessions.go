package handlers

import (
	"context"
	"net/url"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/wire"
)

// OpenSession opens a session of a holder.
func (s *server) OpenSession(ctx context.Context, req api.OpenSessionRequestObject) (api.OpenSessionResponseObject, error) {
	ss, err := s.openSession(ctx, req)
	s.metrics.Op("session_open", err)
	if err != nil {
		return problemAs[api.OpenSessiondefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	w := wireSession(ss)
	return api.OpenSession201JSONResponse{Body: w, Headers: api.OpenSession201ResponseHeaders{Location: "/v1/sessions/" + url.PathEscape(w.Session)}}, nil
}

func (s *server) openSession(ctx context.Context, req api.OpenSessionRequestObject) (lease.Session, error) {
	b := req.Body
	if b == nil {
		return lease.Session{}, lease.Errorf(lease.CodeInvalid, "the body is required")
	}
	ttl, err := lease.Millis("ttl_ms", b.TtlMs)
	if err != nil {
		return lease.Session{}, err
	}
	md, err := metadataParam(b.Metadata)
	if err != nil {
		return lease.Session{}, err
	}
	for _, err := range []error{lease.ValidateHolder(b.Holder), s.limits.ValidateTTL(ttl)} {
		if err != nil {
			return lease.Session{}, err
		}
	}
	who := principalOf(ctx)
	return s.store.OpenSession(ctx, store.SessionParams{Holder: b.Holder, TTL: ttl, Metadata: md, Owner: who.KeyID, MaxOpen: s.auth.gate.MaxSessions(who)})
}

// RenewSession renews a session and its leases.
func (s *server) RenewSession(ctx context.Context, req api.RenewSessionRequestObject) (api.RenewSessionResponseObject, error) {
	id, err := sessionIDParam(req.Session, req.Body)
	var ss lease.Session
	if err == nil {
		var ttl = req.Body.TtlMs
		d, terr := s.ttlParam(ttl)
		if err = terr; err == nil {
			ss, err = s.store.RenewSession(ctx, id, sessionActor(ctx), d)
		}
	}
	s.metrics.Op("session_renew", err)
	if err != nil {
		return problemAs[api.RenewSessiondefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	return api.RenewSession200JSONResponse(wireSession(ss)), nil
}

// CloseSession closes a session, releasing its leases.
func (s *server) CloseSession(ctx context.Context, req api.CloseSessionRequestObject) (api.CloseSessionResponseObject, error) {
	id, err := sessionIDParam(req.Session, req.Body)
	var ss lease.Session
	if err == nil {
		ss, err = s.store.CloseSession(ctx, id, sessionActor(ctx))
	}
	s.metrics.Op("session_close", err)
	if err != nil {
		return problemAs[api.CloseSessiondefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	return api.CloseSession200JSONResponse(wireSession(ss)), nil
}

// sessionActor is who acts on a session: the key's ID, or "" for an admin, who may act on any.
func sessionActor(ctx context.Context) string {
	if p := principalOf(ctx); !p.IsAdmin() {
		return p.KeyID
	}
	return ""
}

// sessionIDParam returns the session ID of a request on the session named ref: an ID that is
// not that session's is not_found, as an unknown one.
func sessionIDParam(ref string, b *api.SessionIDRequest) (string, error) {
	if b == nil {
		return "", lease.Errorf(lease.CodeInvalid, "the body is required")
	}
	if lease.SessionRef(lease.HashID(b.SessionId)) != ref {
		return "", lease.Errorf(lease.CodeNotFound, "session_id is not the ID of session %s", ref)
	}
	return b.SessionId, nil
}

func wireSession(ss lease.Session) api.Session {
	out := api.Session{Session: ss.Ref, Holder: ss.Holder, TtlMs: ss.TTL.Milliseconds(), CreatedAt: wire.Time(ss.CreatedAt),
		RenewedAt: wire.Time(ss.RenewedAt), ExpiresAt: wire.Time(ss.ExpiresAt), ClosedAt: wire.OptTime(ss.ClosedAt),
		Metadata: wire.Metadata(ss.Metadata), Leases: ptr(ss.Leases)}
	if ss.ID != "" {
		out.SessionId = ptr(ss.ID)
	}
	return out
}
