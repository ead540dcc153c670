package handlers_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/internal/logtest"
)

// A request's id is one in its answer's header, its problem and its access log line: the
// client's when it sent a sane one, else one the server makes. A problem names the path asked,
// and the log line the answer's status and size.
func TestRequestIDEverywhere(t *testing.T) {
	var log logtest.Sink
	e := newEnvWith(t, func(cfg *handlers.Config) { cfg.Logger = log.Logger() })
	made := regexp.MustCompile(`^[0-9a-f]{16}$`)
	for _, tc := range []struct{ name, sent string }{{"Sent", "req-7.a_B"}, {"Made", ""}, {"Insane", "a b"}} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := e.do("POST", "/v1/leases/job/renew", strings.NewReader(`{"lease_id":"nope"}`),
				map[string]string{"X-Request-Id": tc.sent})
			p := wantProblem(t, "renew of an unknown lease", resp, b, http.StatusConflict, api.ProblemCodeLeaseLost)
			id := resp.Header.Get("X-Request-Id")
			if tc.sent == "req-7.a_B" && id != tc.sent || tc.sent != "req-7.a_B" && !made.MatchString(id) {
				t.Errorf("X-Request-Id = %q after sending %q", id, tc.sent)
			}
			if got, path := str(p.RequestId), str(p.Instance); got != id || path != "/v1/leases/job/renew" {
				t.Errorf("problem request_id %q, instance %q; want %q, /v1/leases/job/renew", got, path, id)
			}
			// The line, with the answer's status and size, is written once the answer is sent.
			waitFor(t, fmt.Sprintf("an access log line with request_id %s, status 409, %d bytes", id, len(b)), func() bool {
				for _, r := range log.Records(t, "INFO") {
					if r["msg"] == "request" && r["request_id"] == id && r["status"] == 409.0 && r["bytes"] == float64(len(b)) {
						return true
					}
				}
				return false
			})
		})
	}
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}
