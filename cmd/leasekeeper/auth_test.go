package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/service/servicetest"
)

// TestAuthOffOnLoopback serves without keys on a loopback address, with a warning.
func TestAuthOffOnLoopback(t *testing.T) {
	s := serveInProcess(t, nil, "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "lk.db"), "--auth", "off")
	resp, err := http.Get(s.url + "/v1/leases")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/leases without a key, auth off = %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	if !strings.Contains(s.stderr.String(), "authentication is OFF") {
		t.Errorf("no warning in the log:\n%s", s.stderr)
	}
}

// TestBootstrapAdminKey: the first start of an empty database writes an admin key to a file
// readable by its owner alone and names the file, never the key, in the log; that key works;
// later starts leave the file alone and need no new key.
func TestBootstrapAdminKey(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "lk.db")
	s := serveInProcess(t, map[string]string{"LEASEKEEPER_ADMIN_KEY": ""}, "--addr", "127.0.0.1:0", "--db", db)
	file := db + ".admin-key"
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatalf("no admin key file: %v\n%s", err, s.stderr)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s mode = %v, want 0600", file, fi.Mode().Perm())
	}
	b, _ := os.ReadFile(file)
	key := strings.TrimSpace(string(b))
	if !strings.HasPrefix(key, "lkk_") || len(key) < 43 {
		t.Fatalf("admin key file holds %q, want a 256-bit lkk_ key", key)
	}
	log := s.stderr.String()
	if !strings.Contains(log, file) || strings.Contains(log, key) {
		t.Errorf("the log must name the file and never the key:\n%s", log)
	}
	hc := servicetest.Bearer(key)
	resp, err := hc.Get(s.url + "/v1/keys")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/keys with the bootstrap key = %v, %v", resp, err)
	}
	resp.Body.Close()
	if resp, _ := http.Get(s.url + "/v1/keys"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/keys without a key = %d, want 401", resp.StatusCode)
	}
	if err := s.shutdown(t); err != nil {
		t.Fatal(err)
	}
	// A restart neither writes a new key nor takes LEASEKEEPER_ADMIN_KEY: the database has keys.
	os.Remove(file)
	s2 := serveInProcess(t, map[string]string{"LEASEKEEPER_ADMIN_KEY": testAdminKey}, "--addr", "127.0.0.1:0", "--db", db)
	if _, err := os.Stat(file); err == nil {
		t.Error("a restart wrote a new admin key file")
	}
	if resp, _ := servicetest.Bearer(testAdminKey).Get(s2.url + "/v1/keys"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("LEASEKEEPER_ADMIN_KEY on a database with keys = %d, want it ignored (401)", resp.StatusCode)
	}
	if resp, _ := servicetest.Bearer(key).Get(s2.url + "/v1/keys"); resp.StatusCode != http.StatusOK {
		t.Errorf("the bootstrap key after a restart = %d, want 200", resp.StatusCode)
	}
}

// TestBadAdminKey: a LEASEKEEPER_ADMIN_KEY too weak to be a key stops the start.
func TestBadAdminKey(t *testing.T) {
	var out, errOut strings.Builder
	getenv := func(k string) string {
		if k == "LEASEKEEPER_ADMIN_KEY" {
			return "secret"
		}
		return ""
	}
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "lk.db")}, getenv, &out, &errOut)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "LEASEKEEPER_ADMIN_KEY") {
		t.Errorf("serve with a 6-character admin key = %v (exit %d), want exit 2 naming LEASEKEEPER_ADMIN_KEY", err, exitCode(err))
	}
}

// TestKeysCommand creates, lists and revokes a key with the CLI; the new key acts within its
// scope and stops at once when revoked.
func TestKeysCommand(t *testing.T) { onBackends(t, testKeysCommand) }

func testKeysCommand(t *testing.T, srv string) {
	out, errOut, code := cli(t, srv, "keys", "create", "--label", "billing", "--role", "writer", "--prefix", "billing-", "--json")
	if code != 0 {
		t.Fatalf("keys create: exit %d: %s", code, errOut)
	}
	var created struct {
		Key    string `json:"key"`
		Record struct {
			ID       string   `json:"id"`
			Prefixes []string `json:"prefixes"`
		} `json:"record"`
	}
	if err := jsonDecode(out, &created); err != nil || created.Key == "" || created.Record.Prefixes[0] != "billing-" {
		t.Fatalf("keys create --json = %q (%v)", out, err)
	}
	withKey := func(args ...string) (string, string, int) {
		return cliEnv(t, map[string]string{"LEASEKEEPER_SERVER": srv, "LEASEKEEPER_API_KEY": created.Key}, args...)
	}
	if _, errOut, code := withKey("acquire", "--ttl", "1m", "billing-nightly"); code != 0 {
		t.Errorf("acquire in scope with the new key: exit %d: %s", code, errOut)
	}
	if _, errOut, code := withKey("acquire", "--ttl", "1m", "payroll"); code != 1 || !strings.Contains(errOut, "forbidden") {
		t.Errorf("acquire out of scope: exit %d %q, want 1 and forbidden", code, errOut)
	}
	if out, _, code := cli(t, srv, "keys", "list"); code != 0 || !strings.Contains(out, created.Record.ID) || strings.Contains(out, created.Key) {
		t.Errorf("keys list = exit %d\n%s\nwant the key's id and never its secret", code, out)
	}
	if _, errOut, code := cli(t, srv, "keys", "revoke", created.Record.ID); code != 0 {
		t.Fatalf("keys revoke: exit %d: %s", code, errOut)
	}
	if _, errOut, code := withKey("get", "billing-nightly"); code != 1 || !strings.Contains(errOut, "unauthenticated") {
		t.Errorf("get with the revoked key: exit %d %q, want 1 and unauthenticated", code, errOut)
	}
	// The key can come from a file too.
	file := filepath.Join(t.TempDir(), "key")
	os.WriteFile(file, []byte(adminKeyOf(srv)+"\n"), 0o600)
	if _, errOut, code := cliEnv(t, map[string]string{"LEASEKEEPER_SERVER": srv}, "get", "--api-key-file", file, "billing-nightly"); code != 0 {
		t.Errorf("get --api-key-file: exit %d: %s", code, errOut)
	}
	if _, _, code := cli(t, srv, "keys", "create", "--label", "x"); code != 2 {
		t.Errorf("keys create without --role: exit %d, want 2", code)
	}
}
