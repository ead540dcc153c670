package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
)

// dashForm reads a form of the page at path, found by its data-testid (the first one, or the
// one inside the key row with id): where it posts and its fields.
func dashForm(t *testing.T, s *dashServer, path, testid, keyID string) (action string, form url.Values) {
	t.Helper()
	_, doc := s.page(path, http.StatusOK, nil)
	root := doc
	if keyID != "" {
		rows := dashFind(doc, func(n *html.Node) bool { return dashAttr(n, "data-key-id") == keyID })
		if len(rows) != 1 {
			t.Fatalf("no key row for %s", keyID)
		}
		root = rows[0]
	}
	f := dashOne(t, root, testid)
	form = url.Values{}
	for _, in := range dashFind(f, func(n *html.Node) bool { return n.Data == "input" }) {
		form.Set(dashAttr(in, "name"), dashAttr(in, "value"))
	}
	return dashAttr(f, "action"), form
}

// TestDashboardKeys: an admin's keys page lists the keys, creates one (the secret shown once,
// and it works), and revokes one (it stops working); its forms need the page's token and a
// same-origin request; anyone else gets 403 and no link to it; bad input is a 400 page.
func TestDashboardKeys(t *testing.T) {
	s := newDashServer(t)
	_, doc := s.page("/keys", http.StatusOK, nil)
	if n := len(dashByTestID(doc, "key-row")); n != 1 {
		t.Errorf("keys page lists %d keys, want the admin key", n)
	}
	if !strings.Contains(dashHTML(dashOne(t, doc, "whoami").Parent), `href="/keys"`) {
		t.Errorf("an admin's header has no link to the keys page")
	}

	action, form := dashForm(t, s, "/keys", "create-key-form", "")
	form.Set("label", "ci deploys")
	form.Set("role", "reader")
	form.Set("prefixes", "jobs- web-")
	resp, body := s.revoke(action, form, nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create a key = %d\n%s", resp.StatusCode, body)
	}
	secret := dashText(dashOne(t, dashParse(t, body), "created-secret"))
	if r, b := s.do(http.MethodGet, "/v1/leases", nil, dashBearer(secret)); r.StatusCode != http.StatusOK {
		t.Fatalf("the created key lists leases = %d %s", r.StatusCode, b)
	}
	if r, _ := s.do(http.MethodGet, "/v1/leases/other", nil, dashBearer(secret)); r.StatusCode != http.StatusForbidden {
		t.Errorf("the created key reads other = %d, want 403: its prefixes are jobs- and web-", r.StatusCode)
	}
	_, body = s.do(http.MethodGet, "/keys", nil, map[string]string{"Accept": "text/html"})
	if strings.Contains(body, secret) {
		t.Errorf("the keys page shows the secret again")
	}
	doc = dashParse(t, body)
	var id string
	for _, row := range dashByTestID(doc, "key-row") {
		if strings.Contains(dashText(row), "ci deploys") {
			id = dashAttr(row, "data-key-id")
			if txt := dashText(row); !strings.Contains(txt, "reader") || !strings.Contains(txt, "jobs- web-") || !strings.Contains(txt, "by test admin") {
				t.Errorf("the new key's row = %q, want its role, prefixes and creator", txt)
			}
		}
	}

	for _, c := range []struct {
		name   string
		form   url.Values
		header map[string]string
		want   int
	}{
		{"ErrNoToken", dashWith(form, "csrf_token", ""), nil, http.StatusForbidden},
		{"ErrOtherToken", dashWith(form, "csrf_token", otherToken(form.Get("csrf_token"))), nil, http.StatusForbidden},
		{"ErrCrossSite", form, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"ErrBadRole", dashWith(form, "role", "root"), nil, http.StatusBadRequest},
		{"ErrBadPrefix", dashWith(form, "prefixes", "a/b"), nil, http.StatusBadRequest},
		{"ErrAdminWithPrefixes", dashWith(form, "role", "admin"), nil, http.StatusBadRequest},
		{"ErrNoLabel", dashWith(form, "label", ""), nil, http.StatusBadRequest},
		{"ErrLongPrefixes", dashWith(form, "prefixes", strings.Repeat("a ", 5000)), nil, http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := s.revoke(action, c.form, c.header)
			if resp.StatusCode != c.want || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Errorf("create = %d %s, want %d and a page", resp.StatusCode, resp.Header.Get("Content-Type"), c.want)
			}
			if c.want == http.StatusBadRequest && len(dashByTestID(dashParse(t, body), "key-error")) != 1 {
				t.Errorf("a refused create's page does not say why")
			}
		})
	}

	// Revoke: the key stops working.
	action, rform := dashForm(t, s, "/keys", "revoke-key-form", id)
	if resp, body := s.revoke(action, dashWith(rform, "csrf_token", form.Get("csrf_token")), nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("revoke with the create form's token = %d, want 403\n%s", resp.StatusCode, body)
	}
	if resp, body := s.revoke(action, rform, nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/keys?notice=revoked" {
		t.Fatalf("revoke = %d %s\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	if r, _ := s.do(http.MethodGet, "/v1/leases", nil, dashBearer(secret)); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("the revoked key lists leases = %d, want 401", r.StatusCode)
	}
	// The last admin key stays.
	_, doc = s.page("/keys", http.StatusOK, nil)
	var admin string
	for _, row := range dashByTestID(doc, "key-row") {
		if dashText(dashOne(t, row, "key-role")) == "admin" {
			admin = dashAttr(row, "data-key-id")
		}
	}
	action, rform = dashForm(t, s, "/keys", "revoke-key-form", admin)
	if resp, body := s.revoke(action, rform, nil); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "last admin key") {
		t.Errorf("revoke the last admin key = %d, want 409 saying why\n%s", resp.StatusCode, body)
	}

	// A reader: no link, no page, no create.
	reader := dashBearer(servicetest.Key(t, s.store, auth.Reader))
	_, doc = s.page("/", http.StatusOK, reader)
	if strings.Contains(dashHTML(doc), `href="/keys"`) {
		t.Errorf("a reader's pages link the keys page")
	}
	s.page("/keys", http.StatusForbidden, reader)
	h := map[string]string{"Authorization": reader["Authorization"]}
	if resp, _ := s.revoke("/keys", form, h); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a reader's create = %d, want 403", resp.StatusCode)
	}
}

// otherToken is tok, a form's CSRF token, with its first character changed: another token of the
// same length. (Set to "x" alone, it was the same token whenever tok began with "x": one run in
// 64 failed.)
func otherToken(tok string) string {
	c := "x"
	if strings.HasPrefix(tok, c) {
		c = "y"
	}
	return c + tok[1:]
}
