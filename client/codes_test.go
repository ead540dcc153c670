package client_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/client"
)

// TestConstantsCoverTheContract checks that the client exports a constant for every problem
// code and every event type the contract defines (read from the generated wire types, so a
// code added to openapi.yaml fails here until the client names it), with the contract's value.
func TestConstantsCoverTheContract(t *testing.T) {
	codes := []string{client.CodeForbidden, client.CodeHeaderTooLarge, client.CodeInternal, client.CodeInvalidRequest, client.CodeLeaseHeld,
		client.CodeLeaseLost, client.CodeLimitMismatch, client.CodeMethodNotAllowed, client.CodeNotFound, client.CodeNotHeld,
		client.CodePayloadTooLarge, client.CodePreconditionFailed, client.CodePreconditionRequired, client.CodeQuotaExceeded, client.CodeRateLimited,
		client.CodeRequestTimeout, client.CodeSessionLost, client.CodeSharedToken, client.CodeStaleToken, client.CodeTokenNotIssued,
		client.CodeTooManyLeases, client.CodeTooManySessions, client.CodeTooManyWaiters, client.CodeTooManyWatchers,
		client.CodeUnauthenticated, client.CodeUnavailable, client.CodeUnsupportedMediaType, client.CodeWaitingUnsupported}
	events := []string{client.EventAcquired, client.EventRenewed, client.EventReleased, client.EventExpired,
		client.EventRevoked, client.EventRejected, client.EventHandoverRequested, client.EventResourceDeleted,
		client.EventKeyCreated, client.EventKeyRevoked}
	want := contractEnums(t, "internal/wire/wire.gen.go")
	for typ, got := range map[string][]string{"ProblemCode": codes, "EventType": events} {
		if diff := cmp.Diff(want[typ], set(got)); diff != "" {
			t.Errorf("client constants for %s differ from the contract's (-contract +client):\n%s", typ, diff)
		}
	}
}

// contractEnums returns the values of the typed string constants declared in a Go file, by type.
func contractEnums(t *testing.T, path string) map[string]map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			typ, ok := vs.Type.(*ast.Ident)
			if !ok || len(vs.Values) != 1 {
				continue
			}
			lit, ok := vs.Values[0].(*ast.BasicLit)
			if !ok {
				continue
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			if out[typ.Name] == nil {
				out[typ.Name] = map[string]bool{}
			}
			out[typ.Name][v] = true
		}
	}
	return out
}

func set(vs []string) map[string]bool {
	out := map[string]bool{}
	for _, v := range vs {
		out[v] = true
	}
	return out
}
