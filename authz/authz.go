// Package authz is who may call each operation of openapi.yaml: the access rule of every
// operation (the right it needs and the names it acts on), and the strict server's middleware
// that checks the caller against it before the handler runs. An operation without a rule is
// refused to everyone.
package authz

import (
	"context"
	"net/http"
	"strings"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
)

// rule is who may call an operation: the right it needs and the names it acts on; or, for a
// HEAD operation, the GET operation it is served as (headAsGet), whose rule it follows.
type rule struct {
	public bool
	right  auth.Right
	names  func(req any) []string
	asGet  string
}

func named[T any](f func(T) []string) func(any) []string {
	return func(req any) []string { return f(req.(T)) }
}

// rules is every operation of openapi.yaml with its access rule. An operation missing here is
// refused to everyone (and fails the authorization matrix test).
var rules = map[string]rule{
	"healthz":         {public: true},
	"readyz":          {public: true},
	"listLeases":      {right: auth.Read},
	"getLease":        {right: auth.Read, names: named(func(r api.GetLeaseRequestObject) []string { return []string{r.Name} })},
	"listLeaseEvents": {right: auth.Read, names: named(func(r api.ListLeaseEventsRequestObject) []string { return []string{r.Name} })},
	"acquireLease":    {right: auth.Write, names: named(func(r api.AcquireLeaseRequestObject) []string { return []string{r.Name} })},
	"acquireAll": {right: auth.Write, names: named(func(r api.AcquireAllRequestObject) []string {
		if r.Body == nil {
			return nil
		}
		return r.Body.Names
	})},
	"renewLease":      {right: auth.Write, names: named(func(r api.RenewLeaseRequestObject) []string { return []string{r.Name} })},
	"releaseLease":    {right: auth.Write, names: named(func(r api.ReleaseLeaseRequestObject) []string { return []string{r.Name} })},
	"revokeLease":     {right: auth.Manage},
	"openSession":     {right: auth.Write},
	"renewSession":    {right: auth.Write},
	"closeSession":    {right: auth.Write},
	"requestHandover": {right: auth.Write, names: named(func(r api.RequestHandoverRequestObject) []string { return []string{r.Name} })},
	"listResources":   {right: auth.Read},
	"getResource":     {right: auth.Read, names: named(func(r api.GetResourceRequestObject) []string { return []string{r.Resource} })},
	"listResourceWriters": {right: auth.Read, names: named(func(r api.ListResourceWritersRequestObject) []string {
		return []string{r.Resource}
	})},
	"putResource": {right: auth.Write, names: named(func(r api.PutResourceRequestObject) []string {
		return []string{r.Resource, str(r.Params.LeaseName)}
	})},
	"listRejections": {right: auth.Read},
	// The token's name is known only once it is looked up: the handler answers not_found for
	// one outside the caller's scope.
	"getToken": {right: auth.Read},
	"reportRejection": {right: auth.Write, names: named(func(r api.ReportRejectionRequestObject) []string {
		if r.Body == nil {
			return nil
		}
		return []string{r.Body.Resource, str(r.Body.Lease)}
	})},
	"deleteResource": {right: auth.Manage},
	"watch":          {right: auth.Read},
	"createKey":      {right: auth.Manage},
	"listKeys":       {right: auth.Manage},
	"revokeKey":      {right: auth.Manage},
	// The HEAD operations: the request goes on as its GET, checked by the GET's rule.
	"headLeases":          {asGet: "listLeases"},
	"headLease":           {asGet: "getLease"},
	"headLeaseEvents":     {asGet: "listLeaseEvents"},
	"headResources":       {asGet: "listResources"},
	"headResource":        {asGet: "getResource"},
	"headResourceWriters": {asGet: "listResourceWriters"},
	"headRejections":      {asGet: "listRejections"},
	"headToken":           {asGet: "getToken"},
	"headWatch":           {asGet: "watch"},
	"headKeys":            {asGet: "listKeys"},
	"headHealthz":         {asGet: "healthz"},
	"headReadyz":          {asGet: "readyz"},
}

// Rules lists the operation ids that have an access rule (for tests that check every
// operation of the spec has one), each HEAD operation with the GET it is served as; the
// others with "".
func Rules() map[string]string {
	out := make(map[string]string, len(rules))
	for id, rl := range rules {
		out[id] = rl.asGet
	}
	return out
}

// authorizer is rules by the names the generated code gives operations, in Go's style
// (AcquireLease; the spec and rules say acquireLease). The strict server names the operation
// to its middleware on every request: looked up as given, it costs no new string.
type authorizer map[string]rule

func newAuthorizer() authorizer {
	a := make(authorizer, len(rules))
	for id, rl := range rules {
		if rl.asGet != "" {
			rl = rules[rl.asGet] // were it ever routed as itself, it is still the GET
		}
		a[strings.ToUpper(id[:1])+id[1:]] = rl
	}
	return a
}

// Middleware is the strict server's middleware that checks each operation's rule for the
// caller of the request, as principal finds it in the request's context.
func Middleware(principal func(context.Context) auth.Principal) api.StrictMiddlewareFunc {
	a := newAuthorizer()
	return func(f api.StrictHandlerFunc, operationID string) api.StrictHandlerFunc {
		rl, ok := a[operationID]
		return func(ctx context.Context, w http.ResponseWriter, r *http.Request, req any) (any, error) {
			if !ok {
				return nil, lease.Errorf(lease.CodeForbidden, "operation %s has no access rule", operationID)
			}
			if !rl.public {
				var names []string
				if rl.names != nil {
					names = rl.names(req)
				}
				if err := principal(ctx).Allow(rl.right, names...); err != nil {
					return nil, err
				}
			}
			return f(ctx, w, r, req)
		}
	}
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
