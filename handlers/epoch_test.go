package handlers_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/handlers"
)

// TestServerEpoch: every grant and renewal answer names the server's epoch; a grant no restart
// stretched has no extended_by_restart_ms (restarts themselves are tested in the store's
// conformance suite and, over HTTP, by the client's TestRestartVisible).
func TestServerEpoch(t *testing.T) {
	e := newEnvWith(t, func(cfg *handlers.Config) { cfg.Epoch = "ep_test" })
	g := e.acquire("job", "w1", 10*time.Second)
	if g.ServerEpoch == nil || *g.ServerEpoch != "ep_test" || g.ExtendedByRestartMs != nil {
		t.Errorf("acquire answer: server_epoch %v, extended_by_restart_ms %v; want ep_test and none", g.ServerEpoch, g.ExtendedByRestartMs)
	}
	resp, body := e.do("POST", "/v1/leases/job/renew", strings.NewReader(`{"lease_id":"`+*g.LeaseId+`"}`), nil)
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil || resp.StatusCode != 200 {
		t.Fatalf("renew = %d %s, %v", resp.StatusCode, body, err)
	}
	if raw["server_epoch"] != "ep_test" {
		t.Errorf("renew answer server_epoch = %v, want ep_test", raw["server_epoch"])
	}
	if _, ok := raw["extended_by_restart_ms"]; ok {
		t.Errorf("renew answer = %s, want no extended_by_restart_ms for a grant no restart stretched", body)
	}
	// Without one configured, each server takes a fresh epoch.
	a := newEnv(t).acquire("job", "w1", 10*time.Second)
	b := newEnv(t).acquire("job", "w1", 10*time.Second)
	if a.ServerEpoch == nil || b.ServerEpoch == nil || *a.ServerEpoch == *b.ServerEpoch {
		t.Errorf("two servers' epochs = %v, %v; want two different ones", a.ServerEpoch, b.ServerEpoch)
	}
}
