package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/dashboard"
)

// dashEdge is what the dashboard mounted on the server's router takes from it.
type dashEdge struct{ s *server }

var _ dashboard.Edge = dashEdge{}

func (e dashEdge) Principal(ctx context.Context) auth.Principal { return principalOf(ctx) }
func (e dashEdge) SignIn(ctx context.Context) []byte            { return sessionOf(ctx) }
func (e dashEdge) RequestID(ctx context.Context) string         { return requestID(ctx) }
func (e dashEdge) OverTLS(r *http.Request) bool                 { return e.s.overTLS(r) }

func (e dashEdge) Problem(ctx context.Context, err error) (int, string) {
	p := e.s.toProblem(ctx, err)
	return p.Status, deref(p.Detail)
}

func (e dashEdge) Key(ctx context.Context, secret string) (auth.Key, error) {
	return e.s.auth.key(ctx, secret)
}

func (e dashEdge) NewKey(ctx context.Context, label string, role auth.Role, prefixes []string) (string, auth.Key, error) {
	return e.s.newKey(ctx, label, role, prefixes)
}

func (e dashEdge) RevokeKey(ctx context.Context, id string) error { return e.s.revokeKey(ctx, id) }

func (e dashEdge) KeyLastUsed(id string, stored time.Time) time.Time {
	return e.s.auth.uses.Last(id, stored)
}
