package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/web"
)

// The keys page (/keys) is an admin's: it lists every key, creates one (showing its secret
// once) and revokes one. Its forms follow the revoke form's rules: sent from this server's own
// pages (cross-origin protection), carrying a token bound to the viewer and the action.

// formToken binds a keys page form to its action (and key) and to the viewer (session, or key),
// with a key derived from the server's secret.
func (d *dashboard) formToken(ctx context.Context, action string) string {
	who := d.principalOf(ctx).KeyID + "\x00" + string(d.sessionOf(ctx))
	m := hmac.New(sha256.New, d.csrfKey)
	m.Write([]byte("keys\x00" + action + "\x00" + who))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// keyList is the keys page's props for the viewer, with what the last form did.
func (d *dashboard) keyList(ctx context.Context, l web.KeyList) (web.KeyList, error) {
	keys, err := d.s.store.Keys(ctx)
	if err != nil {
		return web.KeyList{}, err
	}
	l.Now, l.CreateToken = d.s.clock.Now(), d.formToken(ctx, "create")
	for _, k := range keys {
		l.Keys = append(l.Keys, web.KeyInfo{ID: k.ID, Label: k.Label, Role: string(k.Role), Prefixes: k.Prefixes, CreatedAt: k.CreatedAt,
			CreatedBy: k.CreatedBy, RevokedAt: k.RevokedAt, RevokedBy: k.RevokedBy, RevokeToken: d.formToken(ctx, "revoke\x00"+k.ID),
			LastUsed: d.s.edge.KeyLastUsed(k.ID, k.LastUsed)})
	}
	return l, nil
}

// showKeys renders the keys page with status.
func (d *dashboard) showKeys(w http.ResponseWriter, r *http.Request, status int, l web.KeyList) {
	l, err := d.keyList(r.Context(), l)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.page(w, r, status, web.KeysPage(d.siteFor(r), l), web.ErrorInfo{})
}

func (d *dashboard) keys(w http.ResponseWriter, r *http.Request) {
	if err := d.principalOf(r.Context()).Allow(auth.Manage); err != nil {
		d.fail(w, r, err)
		return
	}
	var l web.KeyList
	if r.URL.Query().Get("notice") == "revoked" {
		l.Notice = "Key revoked."
	}
	d.showKeys(w, r, http.StatusOK, l)
}

// keyForm checks that the viewer is an admin and that the form carries the token of action;
// otherwise it answers and returns false.
func (d *dashboard) keyForm(w http.ResponseWriter, r *http.Request, action string) bool {
	if err := d.principalOf(r.Context()).Allow(auth.Manage); err != nil {
		d.fail(w, r, err)
		return false
	}
	if err := r.ParseForm(); err != nil || !hmac.Equal([]byte(r.PostForm.Get(web.CSRFField)), []byte(d.formToken(r.Context(), action))) {
		d.page(w, r, http.StatusForbidden, nil, web.ErrorInfo{Status: http.StatusForbidden, Title: "Form expired",
			Detail: "The form's token does not match. Reload the keys page and try again."})
		return false
	}
	return true
}

func (d *dashboard) createKey(w http.ResponseWriter, r *http.Request) {
	if !d.keyForm(w, r, "create") {
		return
	}
	f := web.KeyForm{Label: strings.TrimSpace(r.PostForm.Get(web.KeyLabelField)), Role: r.PostForm.Get(web.KeyRoleField),
		Prefixes: r.PostForm.Get(web.KeyPrefixesField)}
	if len(f.Prefixes) > 64*auth.MaxPrefixes {
		d.showKeys(w, r, http.StatusBadRequest, web.KeyList{Error: "Too many prefixes.", Form: f})
		return
	}
	secret, k, err := d.s.newKey(r.Context(), f.Label, auth.Role(f.Role), strings.Fields(f.Prefixes))
	if le := (*lease.Error)(nil); lease.IsCode(err, lease.CodeInvalid) && errors.As(err, &le) {
		d.showKeys(w, r, http.StatusBadRequest, web.KeyList{Error: "The key was not created: " + le.Message + ".", Form: f})
		return
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.showKeys(w, r, http.StatusCreated, web.KeyList{Created: &web.CreatedKey{ID: k.ID, Label: k.Label, Secret: secret}})
}

func (d *dashboard) revokeKey(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if !d.keyForm(w, r, "revoke\x00"+id) {
		return
	}
	err := d.s.revokeKey(r.Context(), id)
	if le := (*lease.Error)(nil); lease.IsCode(err, lease.CodeInvalid) && errors.As(err, &le) {
		d.showKeys(w, r, http.StatusConflict, web.KeyList{Error: "The key was not revoked: " + le.Message + "."})
		return
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/keys?notice=revoked", http.StatusSeeOther)
}
