package dashboard_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
)

// TestSecretsAtRest reads the database files and finds no API key, lease_id, idempotency key
// dashboard session or lease session ID in plain text (nor their plain SHA-256 for idempotency keys).
func TestSecretsAtRest(t *testing.T) {
	dir := t.TempDir()
	s := newDashServerAt(t, filepath.Join(dir, "lk.db"))
	reader := servicetest.Key(t, s.store, auth.Reader)
	idem := "idem-0123456789-abcdef-secret"
	resp, body := s.do("POST", "/v1/leases/job/acquire", strings.NewReader(`{"holder":"w","ttl_ms":60000}`),
		map[string]string{"Content-Type": "application/json", "Idempotency-Key": idem})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("acquire = %d %s", resp.StatusCode, body)
	}
	var l api.Lease
	json.Unmarshal([]byte(body), &l)
	other := s.acquire("other", "w", time.Minute, "")
	resp, body = s.do("POST", "/v1/sessions", strings.NewReader(`{"holder":"w","ttl_ms":60000}`),
		map[string]string{"Content-Type": "application/json"})
	var held api.Session
	if err := json.Unmarshal([]byte(body), &held); resp.StatusCode != http.StatusCreated || err != nil || held.SessionId == nil {
		t.Fatalf("open session = %d %s", resp.StatusCode, body)
	}
	b := newBrowser(t, s)
	b.signIn(reader, "/")
	if b.cookie == nil {
		t.Fatal("no session")
	}
	secrets := map[string]string{"admin key": s.key, "reader key": reader, "lease_id": *l.LeaseId,
		"second lease_id": other.LeaseID, "idempotency key": idem, "session": b.cookie.Value,
		"lease session ID": *held.SessionId}
	var all []byte
	for _, suffix := range []string{"", "-wal", "-shm"} {
		f, err := os.ReadFile(filepath.Join(dir, "lk.db"+suffix))
		if err == nil {
			all = append(all, f...)
		}
	}
	if len(all) == 0 {
		t.Fatal("read no database file")
	}
	for what, v := range secrets {
		if bytes.Contains(all, []byte(v)) {
			t.Errorf("the database holds the %s in plain text", what)
		}
	}
	// The idempotency key is kept under the server's secret, not as a plain hash anyone could
	// compute from a guess.
	if bytes.Contains(all, auth.Hash(idem)) {
		t.Error("the database holds the idempotency key's plain SHA-256")
	}
}
