package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"

	"github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/authz"
)

// TestHeadDeclaredWhereServed checks openapi.yaml against the server: every API path the
// router answers GET on declares HEAD (the server answers HEAD wherever it answers GET, see
// headAsGet), every declared HEAD is answered as its GET (same status and headers, no body),
// and the rule table names each HEAD operation with the GET it is checked as.
func TestHeadDeclaredWhereServed(t *testing.T) {
	spec, err := openapi3.NewLoader().LoadFromData(leasekeeper.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	rules := authz.Rules()
	for path, item := range spec.Paths.Map() {
		switch {
		case item.Get != nil && item.Head == nil:
			t.Errorf("GET %s is declared without HEAD, which the server serves too", path)
		case item.Head != nil && item.Get == nil:
			t.Errorf("HEAD %s is declared without the GET it is served as", path)
		case item.Head != nil:
			if got, ok := rules[item.Head.OperationID]; !ok || got != item.Get.OperationID {
				t.Errorf("the rule of HEAD %s (%s) follows %q, want the GET's %s", path, item.Head.OperationID, got, item.Get.OperationID)
			}
		}
	}
	for id, get := range rules {
		if get != "" && spec.Paths.Find(pathOf(spec, id)) == nil {
			t.Errorf("the rule table names %s (as %s), which the spec does not declare", id, get)
		}
	}

	e := newEnv(t)
	e.acquire("job", "w", 60e9)
	e.do("PUT", "/v1/resources/res", strings.NewReader("v"), map[string]string{"Fencing-Token": "1"})
	// Every API route answering GET, as the router has it.
	err = chi.Walk(e.handler.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if method != http.MethodGet || !strings.HasPrefix(route, "/v1/") && spec.Paths.Find(route) == nil {
			return nil
		}
		if item := spec.Paths.Find(route); item == nil || item.Head == nil {
			t.Errorf("the server answers HEAD %s (as its GET), which openapi.yaml does not declare", route)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	params := strings.NewReplacer("{name}", "job", "{resource}", "res")
	for path, item := range spec.Paths.Map() {
		if item.Head == nil {
			continue
		}
		url := params.Replace(path)
		// (This server has no watch hub: /v1/watch answers 503 and ends, to GET as to HEAD.)
		head, headBody := e.do(http.MethodHead, url, nil, nil)
		get, body := e.do(http.MethodGet, url, nil, nil)
		if head.StatusCode != get.StatusCode || head.StatusCode == http.StatusMethodNotAllowed || len(headBody) != 0 {
			t.Errorf("HEAD %s = %d with %d bytes, want GET's %d without a body", url, head.StatusCode, len(headBody), get.StatusCode)
			continue
		}
		for _, h := range []string{"Content-Type", "Content-Length", "ETag", "Fencing-Token", "Cache-Control"} {
			if head.Header.Get(h) != get.Header.Get(h) {
				t.Errorf("HEAD %s: %s %q, GET's %q", url, h, head.Header.Get(h), get.Header.Get(h))
			}
		}
		if len(body) == 0 {
			t.Errorf("GET %s answered no body to compare", url)
		}
	}
}

// pathOf is the path of the spec's operation id, "" when it has none.
func pathOf(spec *openapi3.T, id string) string {
	for path, item := range spec.Paths.Map() {
		for _, op := range item.Operations() {
			if op.OperationID == id {
				return path
			}
		}
	}
	return ""
}
