package dashboard

import (
	"net/http"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/web"
)

// sessions lists holders' sessions: every one for an admin or a key that reads every name;
// for a scoped key, the ones it opened (a session's leases may lie outside its prefixes; its
// page still shows those with a lease in its scope).
func (d *dashboard) sessions(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	who := d.principalOf(ctx)
	if err := who.Allow(auth.Read); err != nil {
		d.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	l := web.SessionList{Now: d.s.clock.Now(), All: q.Get("all") == "1", Cursor: q.Get("cursor"), Mine: who.Scoped()}
	f := store.SessionFilter{Open: !l.All, Limit: 50, Cursor: l.Cursor}
	if l.Mine {
		f.Owner = who.KeyID
	}
	page, err := d.s.store.Sessions(ctx, f)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	for _, ss := range page.Items {
		l.Sessions = append(l.Sessions, viewSession(ss))
	}
	l.NextCursor = page.Next
	d.page(w, r, http.StatusOK, web.SessionsPage(d.siteFor(r), l), web.ErrorInfo{})
}
