package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/go-chi/chi/v5"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/queue"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/web"
)

// dashboard serves the server-rendered pages. Every page reads the store once per request and
// renders pure templ components; a request with "LK-Fragment: 1" gets only the live region.
type dashboard struct {
	s       *server
	site    web.Site
	csrfKey []byte
	host    string
}

func (d *dashboard) routes(r chi.Router) {
	static := http.StripPrefix("/static/", http.FileServerFS(web.Static()))
	r.Get("/static/*", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			// A folder: the file server would list what it holds.
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=86400")
		static.ServeHTTP(w, r)
	})
	r.Get("/", d.overview)
	r.Get("/leases/{name}", d.lease)
	r.Get("/sessions", d.sessions)
	r.Get("/sessions/{ref}", d.session)
	r.Get("/rejections", d.rejections)
	r.Get("/resources", d.resources)
	r.Get("/resources/{name}", d.resource)
	r.Get("/signin", d.signInPage)
	// Revoking, signing in and signing out are the state changes the pages make: they must
	// come from a page of this server (Go's cross-origin protection checks Sec-Fetch-Site and
	// Origin), and a revoke must carry the form's token.
	protect := http.NewCrossOriginProtection()
	protect.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.page(w, r, http.StatusForbidden, nil, web.ErrorInfo{Status: http.StatusForbidden, Title: "Cross-site request refused",
			Detail: "This form must be sent from leasekeeper's own pages."})
	}))
	r.With(protect.Handler).Post("/leases/{name}/revoke", d.revoke)
	r.Get("/keys", d.keys)
	r.With(protect.Handler).Post("/keys", d.createKey)
	r.With(protect.Handler).Post("/keys/{id}/revoke", d.revokeKey)
	r.With(protect.Handler).Post("/signin", d.signIn)
	r.With(protect.Handler).Post("/signout", d.signOut)
}

// siteFor is the site of one request: who is signed in.
func (d *dashboard) siteFor(r *http.Request) web.Site {
	site := d.site
	if !site.AuthOff {
		if p := d.principalOf(r.Context()); p.Role != "" {
			site.User = p.Actor() + " · " + string(p.Role)
			site.SignedIn = d.sessionOf(r.Context()) != nil
			site.Admin = p.IsAdmin()
		}
	}
	return site
}

// pageCSP is the policy of dashboard pages: their scripts, styles and images come from /static
// (no inline script or style anywhere), they fetch fragments and the watch stream from here,
// post only the revoke form here, and no site may frame them.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// page renders the full page or, for a fragment request, the live region alone. A nil live
// component renders the error page for both.
func (d *dashboard) page(w http.ResponseWriter, r *http.Request, status int, live templ.Component, e web.ErrorInfo, full ...templ.Component) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Vary", web.FragmentHeader)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", pageCSP)
	c := live
	if live == nil {
		e.RequestID = d.s.edge.RequestID(r.Context())
		c = web.ErrorPage(d.siteFor(r), e)
	} else if !web.IsFragment(r) && len(full) > 0 {
		c = full[0]
	}
	w.WriteHeader(status)
	if err := c.Render(r.Context(), w); err != nil {
		d.s.log.DebugContext(r.Context(), "render page", "err", err)
	}
}

// fail renders a store error as the error page.
func (d *dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, detail := d.s.edge.Problem(r.Context(), err)
	d.page(w, r, status, nil, web.ErrorInfo{Status: status, Detail: detail})
}

func (d *dashboard) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	o := web.Overview{Now: d.s.clock.Now(), Host: d.hostOf(r), Prefix: q.Get("prefix"), Cursor: q.Get("cursor"),
		Contains: q.Get("q"), Holder: q.Get("holder"), Sort: q.Get("sort"), State: q.Get("state")}
	if heldOrder[o.Sort] == "" {
		o.Sort = web.SortName
	}
	if o.State != web.StateExpiring && o.State != web.StateLate {
		o.State = ""
	}
	who := d.principalOf(ctx)
	prefix, keep, none := d.principalOf(ctx).ListScope(o.Prefix)
	var err error
	if !none {
		var held []lease.State
		held, err = d.held(ctx, &o, who, prefix, keep != nil)
		if err == nil {
			held, err = d.semaphoreRows(ctx, held)
		}
		var writers map[string]bool
		if err == nil {
			writers, err = d.writers(ctx, held)
		}
		for _, st := range held {
			st.Waiters = d.s.acquirer.Waiters(st.Name)
			v := viewLease(st)
			v.Writer = writers[st.Name]
			o.Held = append(o.Held, v)
		}
	}
	var freed []lease.State
	if err == nil && !none {
		freed, err = d.s.store.RecentlyFreed(ctx, prefix, 10)
	}
	// The newest rejections the store keeps, for the table and for each held lease's count.
	var rej store.Page[lease.Rejection]
	if err == nil {
		rej, err = d.s.store.Rejections(ctx, store.RejectionFilter{Limit: store.MaxLimit})
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	for _, st := range freed {
		if keep == nil || keep(st.Name) {
			o.Freed = append(o.Freed, viewLease(st))
		}
	}
	perLease := map[string]int{}
	var shown []lease.Rejection
	for _, x := range rej.Items {
		if !who.SeesRejection(x) {
			continue
		}
		perLease[x.Lease]++
		if len(shown) < 10 {
			shown = append(shown, x)
		}
	}
	for i := range o.Held {
		o.Held[i].Rejections = perLease[o.Held[i].Name]
	}
	o.Rejections = d.rejectionViews(ctx, shown)
	if !none {
		var visible []lease.Rejection
		for _, x := range rej.Items {
			if who.SeesRejection(x) {
				visible = append(visible, x)
			}
		}
		if err := d.triage(ctx, &o, prefix, keep != nil, visible, rej.Next != ""); err != nil {
			d.fail(w, r, err)
			return
		}
	}
	d.page(w, r, http.StatusOK, web.OverviewLive(o), web.ErrorInfo{}, web.OverviewPage(d.siteFor(r), o))
}

// semaphoreRows turns the slot that stands for its semaphore (the store answers one per
// semaphore) into the semaphore's row: its state, with its limit and every slot.
func (d *dashboard) semaphoreRows(ctx context.Context, held []lease.State) ([]lease.State, error) {
	out := held[:0:0]
	for _, st := range held {
		name, _, ok := lease.SlotOf(st.Name)
		if !ok {
			out = append(out, st)
			continue
		}
		sem, err := d.s.store.Get(ctx, name)
		if err != nil {
			return nil, err
		}
		out = append(out, sem)
	}
	return out, nil
}

// writers returns which of the plain leases in held hold names that readers take too: their
// holders are those names' writers. One lookup for the page.
func (d *dashboard) writers(ctx context.Context, held []lease.State) (map[string]bool, error) {
	var names []string
	for _, st := range held {
		if _, _, slot := lease.SlotOf(st.Name); !slot && st.Limit == 0 && st.Mode != lease.ModeShared {
			names = append(names, st.Name)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	return d.s.store.SharedNames(ctx, names)
}

// overviewRows is the overview's page of held leases.
const overviewRows = 50

// heldOrder is the store's order of each of the overview's sorts.
var heldOrder = map[string]string{web.SortName: store.OrderName, web.SortExpiry: store.OrderExpiry,
	web.SortLate: store.OrderLate, web.SortNewest: store.OrderNewest}

// held reads the overview's page of held leases under prefix (the principal's own prefixes
// under it when within), filtered and ordered by the store over all of them, and sets o's
// counts: HeldCount, every held lease under the prefix; Matched, those the filters keep. A
// semaphore is one row and counts once in both.
func (d *dashboard) held(ctx context.Context, o *web.Overview, who auth.Principal, prefix string, within bool) ([]lease.State, error) {
	f := store.HeldFilter{Prefix: prefix, Limit: overviewRows}
	if within {
		for _, kp := range who.Prefixes {
			if strings.HasPrefix(kp, prefix) {
				f.Within = append(f.Within, kp)
			}
		}
	}
	all := f
	f.Contains, f.Holder, f.State, f.Order, f.Cursor = o.Contains, o.Holder, o.State, heldOrder[o.Sort], o.Cursor
	page, err := d.s.store.Held(ctx, f)
	if err != nil {
		return nil, err
	}
	o.NextCursor, o.Matched, o.HeldCount = page.Next, page.Total, page.Total
	if f.Contains != "" || f.Holder != "" || f.State != "" {
		all.Limit = 1
		p, err := d.s.store.Held(ctx, all)
		if err != nil {
			return nil, err
		}
		o.HeldCount = p.Total
	}
	return page.Items, nil
}

func (d *dashboard) lease(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	if err := lease.ValidateName(name); err != nil {
		d.fail(w, r, lease.Errorf(lease.CodeNotFound, "%q is not a lease name", name))
		return
	}
	if err := d.principalOf(r.Context()).Allow(auth.Read, name); err != nil {
		d.fail(w, r, err)
		return
	}
	detail, err := d.leaseDetail(r.Context(), name, r.URL.Query().Get("cursor"), r.URL.Query().Get("range"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if r.URL.Query().Get("notice") == "revoked" {
		detail.Notice = "Lease revoked."
	}
	d.page(w, r, http.StatusOK, web.LeaseLive(detail), web.ErrorInfo{}, web.LeasePage(d.siteFor(r), detail))
}

func (d *dashboard) leaseDetail(ctx context.Context, name, cursor, rng string) (web.LeaseDetail, error) {
	now := d.s.clock.Now()
	st, err := d.s.store.Get(ctx, name)
	if err != nil {
		return web.LeaseDetail{}, err
	}
	st.Waiters = d.s.acquirer.Waiters(name)
	span, ok := web.RangeSpan(rng)
	if !ok {
		rng = ""
	}
	reach := web.TimelineSpan
	if span > 0 {
		reach = span
	}
	// The recent end of the history: the newest events of the window, shown oldest first; the
	// next page goes further back. A semaphore's events are its slots'.
	f := store.EventFilter{Name: name, Since: now.Add(-reach), Limit: store.MaxLimit, Cursor: cursor, Newest: true}
	if st.Limit > 0 {
		f.Name, f.Prefix = "", name+"#"
	}
	evs, err := d.s.store.Events(ctx, f)
	if err != nil {
		return web.LeaseDetail{}, err
	}
	rej, err := d.s.store.Rejections(ctx, store.RejectionFilter{Lease: name, Limit: store.MaxLimit})
	if err != nil {
		return web.LeaseDetail{}, err
	}
	detail := web.LeaseDetail{Now: now, Lease: viewLease(st), NextCursor: evs.Next, Range: rng,
		CSRFToken: d.csrfToken(ctx, name, st.Token), CanRevoke: d.principalOf(ctx).IsAdmin(), Slots: viewSlots(st)}
	who := d.principalOf(ctx)
	for _, x := range rej.Items {
		if who.SeesRejection(x) {
			detail.Lease.Rejections++
		}
	}
	if detail.Lease.Handover, err = d.leaseHandover(ctx, name); err != nil {
		return web.LeaseDetail{}, err
	}
	if l, ok := d.s.acquirer.(waitingLine); ok {
		for _, w := range l.Line(name) {
			detail.Waiters = append(detail.Waiters, web.Waiter{Holder: w.Holder, Since: w.Since})
		}
	}
	oldest := make([]lease.Event, 0, len(evs.Items))
	for i := len(evs.Items) - 1; i >= 0; i-- {
		if !who.SeesEvent(evs.Items[i]) {
			continue
		}
		oldest = append(oldest, evs.Items[i])
		detail.Events = append(detail.Events, viewEvent(evs.Items[i]))
	}
	var first time.Time
	if len(oldest) > 0 {
		first = oldest[0].At
	}
	start, end := web.TimelineWindow(detail.Lease, first, span, now)
	detail.Timeline = timelineOf(st, oldest, start, end, now)
	if rng == "" {
		detail.Timeline = detail.Timeline.FitRecent()
	}
	if detail.Resources, err = d.leaseResources(ctx, name); err != nil {
		return web.LeaseDetail{}, err
	}
	return detail, nil
}

// leaseResources are the resources last written under name's tokens that the viewer may
// read, with the write's lease and holder as it may see them.
func (d *dashboard) leaseResources(ctx context.Context, name string) ([]web.Resource, error) {
	rs, err := d.s.store.LeaseResources(ctx, name, web.LeaseResourcesShown)
	if err != nil {
		return nil, err
	}
	who := d.principalOf(ctx)
	var out []web.Resource
	for _, x := range rs {
		if who.InScope(x.Name) {
			out = append(out, viewResource(who, x))
		}
	}
	return out, nil
}

// session is the page of a holder's session (not a dashboard sign-in): its holder, ttl and
// expiry, and the leases held under it that the viewer may read.
func (d *dashboard) session(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ref := chi.URLParam(r, "ref")
	if !strings.HasPrefix(ref, lease.SessionRefPrefix) || len(ref) > 64 {
		d.fail(w, r, lease.Errorf(lease.CodeNotFound, "%q is not the name of a session", ref))
		return
	}
	ss, sts, err := d.s.store.SessionByRef(ctx, ref)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	v := web.SessionDetail{Now: d.s.clock.Now(), Session: viewSession(ss)}
	who := d.principalOf(ctx)
	for _, st := range sts {
		l := viewLease(st)
		if who.Allow(auth.Read, l.Name) == nil {
			v.Leases = append(v.Leases, l)
		}
	}
	// A key sees a session it opened, or one with a lease in its scope; a scoped key learns
	// nothing of the others, not even that they exist.
	if who.Allow(auth.Read) != nil || !who.IsAdmin() && ss.Owner != who.KeyID && len(v.Leases) == 0 {
		d.fail(w, r, lease.Errorf(lease.CodeNotFound, "no session named %s", ref))
		return
	}
	if who.Scoped() {
		// Count only what the key may see.
		v.Session.Held = 0
		for _, l := range v.Leases {
			if l.Held {
				v.Session.Held++
			}
		}
	}
	d.page(w, r, http.StatusOK, web.SessionLive(v), web.ErrorInfo{}, web.SessionPage(d.siteFor(r), v))
}

// waitingLine is an Acquirer that can say who waits for a name (the server's queue.Line).
type waitingLine interface {
	Line(name string) []queue.Waiting
}

func (d *dashboard) revoke(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	if err := lease.ValidateName(name); err != nil {
		d.fail(w, r, lease.Errorf(lease.CodeNotFound, "%q is not a lease name", name))
		return
	}
	who := d.principalOf(r.Context())
	if err := who.Allow(auth.Manage); err != nil {
		d.fail(w, r, err)
		return
	}
	var token int64
	err := r.ParseForm()
	if err == nil {
		token, err = strconv.ParseInt(r.PostForm.Get(web.RevokeTokenField), 10, 64)
	}
	if err != nil || !hmac.Equal([]byte(r.PostForm.Get(web.CSRFField)), []byte(d.csrfToken(r.Context(), name, token))) {
		d.page(w, r, http.StatusForbidden, nil, web.ErrorInfo{Status: http.StatusForbidden, Title: "Form expired",
			Detail: "The revoke form's token does not match. Reload the lease page and try again."})
		return
	}
	// The form names the grant the operator confirmed revoking; the store revokes it only if it
	// is still the current one, in the same transaction, so a later holder's lease is never hit.
	err = d.s.store.Revoke(r.Context(), name, token, who.Actor())
	d.s.metrics.Op("revoke", err)
	if lease.IsCode(err, lease.CodeLost) {
		var le *lease.Error
		errors.As(err, &le)
		d.page(w, r, http.StatusConflict, nil, web.ErrorInfo{Status: http.StatusConflict, Title: "The lease changed",
			Detail: le.Message + ". Reload the lease page to see who holds it now."})
		return
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.s.log.InfoContext(r.Context(), "lease revoked from the dashboard", "name", name, "by", who.Actor(), "remote", r.RemoteAddr)
	http.Redirect(w, r, string(web.LeaseURL(name))+"?notice=revoked", http.StatusSeeOther)
}

// csrfToken binds the revoke form to its lease and grant (by fencing token) and to the viewer
// (session, or key), with a key derived from the server's secret.
func (d *dashboard) csrfToken(ctx context.Context, name string, token int64) string {
	who := d.principalOf(ctx).KeyID + "\x00" + string(d.sessionOf(ctx))
	m := hmac.New(sha256.New, d.csrfKey)
	m.Write([]byte("revoke\x00" + name + "\x00" + strconv.FormatInt(token, 10) + "\x00" + who))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (d *dashboard) rejections(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	l := web.RejectionList{Now: d.s.clock.Now(), Resource: q.Get("resource"), Lease: q.Get("lease"), Holder: q.Get("holder"),
		Source: q.Get("source"), Range: q.Get("range"), Cursor: q.Get("cursor")}
	if l.Source != lease.RejectionSourceServer && l.Source != lease.RejectionSourceExternal {
		l.Source = ""
	}
	f := store.RejectionFilter{Resource: l.Resource, Lease: l.Lease, Limit: 50, Cursor: l.Cursor}
	if span, ok := web.RangeSpan(l.Range); ok {
		f.Since = l.Now.Add(-span)
	} else {
		l.Range = ""
	}
	who := d.principalOf(r.Context())
	keep := func(x lease.Rejection) bool {
		return who.SeesRejection(x) && strings.Contains(x.Holder, l.Holder) && (l.Source == "" || x.Source == l.Source)
	}
	// Holder and source are filtered here, so a page may take several of the store's: read on
	// until it is full or a few pages were read, and go on from there next time.
	var items []lease.Rejection
	for range 20 {
		page, err := d.s.store.Rejections(r.Context(), f)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		for _, x := range page.Items {
			if keep(x) {
				items = append(items, x)
			}
		}
		l.NextCursor = page.Next
		if page.Next == "" || len(items) >= f.Limit || l.Holder == "" && l.Source == "" {
			break
		}
		f.Cursor = page.Next
	}
	l.Rejections = d.rejectionViews(r.Context(), items)
	d.page(w, r, http.StatusOK, web.RejectionsLive(l), web.ErrorInfo{}, web.RejectionsPage(d.siteFor(r), l))
}

func (d *dashboard) resources(w http.ResponseWriter, r *http.Request) {
	l := web.ResourceList{Now: d.s.clock.Now(), Cursor: r.URL.Query().Get("cursor")}
	prefix, keep, none := d.principalOf(r.Context()).ListScope("")
	var page store.Page[lease.Resource]
	var rej store.Page[lease.Rejection]
	if !none {
		var err error
		page, err = d.s.store.ListResources(r.Context(), store.ResourceFilter{Prefix: prefix, Limit: 50, Cursor: l.Cursor})
		if err == nil {
			rej, err = d.s.store.Rejections(r.Context(), store.RejectionFilter{Limit: store.MaxLimit})
		}
		if err != nil {
			d.fail(w, r, err)
			return
		}
	}
	who := d.principalOf(r.Context())
	perResource := map[string]int{}
	for _, x := range rej.Items {
		if who.SeesRejection(x) {
			perResource[x.Resource]++
		}
	}
	l.NextCursor = page.Next
	for _, x := range page.Items {
		if keep != nil && !keep(x.Name) {
			continue
		}
		v := viewResource(who, x)
		v.Rejections = perResource[x.Name]
		l.Resources = append(l.Resources, v)
	}
	d.page(w, r, http.StatusOK, web.ResourcesLive(l), web.ErrorInfo{}, web.ResourcesPage(d.siteFor(r), l))
}

func (d *dashboard) resource(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	name := chi.URLParam(r, "name")
	if err := d.principalOf(ctx).Allow(auth.Read, name); err != nil {
		d.fail(w, r, err)
		return
	}
	x, err := d.s.store.GetResource(ctx, name)
	var rej store.Page[lease.Rejection]
	var writes []lease.Write
	if err == nil {
		rej, err = d.s.store.Rejections(ctx, store.RejectionFilter{Resource: name, Limit: store.MaxLimit})
	}
	if err == nil {
		writes, err = d.s.store.ResourceWriters(ctx, name)
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	who := d.principalOf(ctx)
	shown := slices.DeleteFunc(rej.Items, func(x lease.Rejection) bool { return !who.SeesRejection(x) })
	v := web.ResourceDetail{Now: d.s.clock.Now(), Resource: viewResource(who, x), Writers: viewWrites(who, writes, d.writeGrants(ctx, writes))}
	v.Resource.Rejections = len(shown)
	v.Rejections = d.rejectionViews(ctx, shown[:min(len(shown), 20)])
	d.page(w, r, http.StatusOK, web.ResourceLive(v), web.ErrorInfo{}, web.ResourcePage(d.siteFor(r), v))
}

// hostOf is the address shown in the empty state's curl example.
func (d *dashboard) hostOf(r *http.Request) string {
	if d.host != "" {
		return d.host
	}
	if h := r.Host; h != "" && !strings.ContainsAny(h, " \"'<>") {
		return h
	}
	return "localhost:8080"
}

func (d *dashboard) signInPage(w http.ResponseWriter, r *http.Request) {
	if d.site.AuthOff {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	d.page(w, r, http.StatusOK, web.SignInPage(d.site, web.SignIn{Next: localPath(r.URL.Query().Get("next"))}), web.ErrorInfo{})
}

// signIn checks a key and opens a dashboard session: a random secret in an HttpOnly,
// SameSite=Strict cookie (Secure under TLS, or behind a trusted proxy serving TLS), kept by the store only as a hash.
func (d *dashboard) signIn(w http.ResponseWriter, r *http.Request) {
	if d.site.AuthOff {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if err := r.ParseForm(); err != nil {
		d.fail(w, r, lease.Errorf(lease.CodeInvalid, "the sign-in form could not be read"))
		return
	}
	a := d.s.auth
	// Every attempt counts against its address before the key is looked at: guessing keys
	// from one address is as slow as the rate.
	if err := a.signIns.allow(r.RemoteAddr); err != nil {
		d.tooMany(w, r, err, a.signIns.retryAfter())
		return
	}
	next := localPath(r.PostForm.Get("next"))
	k, err := a.key(r.Context(), strings.TrimSpace(r.PostForm.Get(web.KeyField)))
	if err != nil {
		msg := "That key is not valid: it is unknown or was revoked."
		status := http.StatusUnauthorized
		if !lease.IsCode(err, lease.CodeUnauthenticated) {
			d.fail(w, r, err)
			return
		}
		if ok, dropped := a.signIns.logRefused(); ok {
			d.s.log.WarnContext(r.Context(), "dashboard sign-in refused", "remote", r.RemoteAddr, "not_logged_before", dropped)
		}
		d.page(w, r, status, web.SignInPage(d.site, web.SignIn{Next: next, Error: msg}), web.ErrorInfo{})
		return
	}
	if err := a.allowRate(k.Principal()); err != nil {
		d.tooMany(w, r, err, a.retryAfterRate())
		return
	}
	secret := auth.NewSessionID()
	maxAge := a.cfg.SessionMax
	if err := d.s.store.CreateSignIn(r.Context(), auth.Hash(secret), k.ID, d.s.clock.Now().Add(maxAge), a.cfg.MaxDashboardSessionsPerKey); err != nil {
		d.fail(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: secret, Path: "/", MaxAge: int(maxAge / time.Second),
		HttpOnly: true, Secure: d.s.overTLS(r), SameSite: http.SameSiteStrictMode})
	d.s.log.InfoContext(r.Context(), "dashboard sign-in", "key_id", k.ID, "label", k.Label, "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signOut ends the session of the request, if any, and clears its cookie.
func (d *dashboard) signOut(w http.ResponseWriter, r *http.Request) {
	if h := d.sessionOf(r.Context()); h != nil {
		if err := d.s.store.DeleteSignIn(r.Context(), h); err != nil {
			d.fail(w, r, err)
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: d.s.overTLS(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// localPath keeps a redirect target on this server: a path starting with one slash, else "/".
func localPath(p string) string {
	u, err := url.Parse(p)
	if err != nil || p == "" || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") ||
		u.Scheme != "" || u.Host != "" {
		return "/"
	}
	return p
}
