package authz_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/authz"
	"github.com/leasekeeper/leasekeeper/lease"
)

// TestMiddleware checks the middleware against a few rules: a public operation needs no
// principal, a named one needs the names in scope, a HEAD follows its GET, and an operation
// without a rule is refused to everyone.
func TestMiddleware(t *testing.T) {
	writer := auth.Principal{KeyID: "k1", Role: auth.Writer, Prefixes: []string{"billing-"}}
	for _, c := range []struct {
		name      string
		who       auth.Principal
		op        string
		req       any
		wantCode  lease.Code // "" for allowed
		wantCalls int
	}{
		{"OK/Public", auth.Principal{}, "Healthz", api.HealthzRequestObject{}, "", 1},
		{"OK/InScope", writer, "AcquireLease", api.AcquireLeaseRequestObject{Name: "billing-a"}, "", 1},
		{"ErrForbidden/OutOfScope", writer, "AcquireLease", api.AcquireLeaseRequestObject{Name: "hr-a"}, lease.CodeForbidden, 0},
		{"ErrForbidden/LeaseNameOutOfScope", writer, "PutResource",
			api.PutResourceRequestObject{Resource: "billing-r", Params: api.PutResourceParams{LeaseName: ptr("hr-a")}}, lease.CodeForbidden, 0},
		{"ErrForbidden/Role", writer, "RevokeLease", api.RevokeLeaseRequestObject{Name: "billing-a"}, lease.CodeForbidden, 0},
		{"ErrForbidden/NoPrincipal", auth.Principal{}, "ListLeases", api.ListLeasesRequestObject{}, lease.CodeForbidden, 0},
		{"ErrForbidden/NoRule", auth.Anonymous, "MadeUp", nil, lease.CodeForbidden, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			next := func(context.Context, http.ResponseWriter, *http.Request, any) (any, error) { calls++; return nil, nil }
			mw := authz.Middleware(func(context.Context) auth.Principal { return c.who })
			_, err := mw(next, c.op)(context.Background(), nil, nil, c.req)
			if c.wantCode == "" && err != nil || c.wantCode != "" && !lease.IsCode(err, c.wantCode) || calls != c.wantCalls {
				t.Errorf("%s as %+v = %v with %d calls, want %q with %d", c.op, c.who, err, calls, c.wantCode, c.wantCalls)
			}
		})
	}
}

// TestRulesOfHead checks that every HEAD operation of the table follows a GET that has a rule.
func TestRulesOfHead(t *testing.T) {
	rules := authz.Rules()
	heads := 0
	for id, get := range rules {
		if get == "" {
			continue
		}
		heads++
		if next, ok := rules[get]; !ok || next != "" {
			t.Errorf("%s follows %q, which is not an operation with a rule of its own", id, get)
		}
	}
	if heads == 0 {
		t.Error("the table has no HEAD operation")
	}
}

func ptr[T any](v T) *T { return &v }
