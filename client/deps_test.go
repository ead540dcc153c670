package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsStayLight keeps the server's dependencies (router, spec validation, YAML, the
// generated server in api/) out of every program that uses the client.
func TestImportsStayLight(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/leasekeeper/leasekeeper/client").Output()
	if err != nil {
		t.Skipf("go list is not available here: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{
			"github.com/leasekeeper/leasekeeper/api",
			"github.com/go-chi/",
			"github.com/getkin/",
			"github.com/oasdiff/",
			"gopkg.in/yaml",
			"go.yaml.in/",
		} {
			if dep == banned || strings.HasPrefix(dep, banned) && strings.HasSuffix(banned, "/") {
				t.Errorf("client depends on %s", dep)
			}
		}
	}
}
