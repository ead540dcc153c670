// Package web is the dashboard's view layer: templ components, the small view structs they
// render, pure formatting helpers, and the embedded static assets (CSS and a few dozen lines of
// JavaScript).
//
// The package imports no project package. The handlers fill its view structs from the store
// and render them; every component is a pure function of its props. Nothing here queries,
// reads the clock or keeps state: the time a page is rendered for is the Now field of its
// props, and all relative times ("in 12 s", "3 min ago") are computed from it.
//
// # Pages
//
// Each page comes as two components: XxxPage, the full HTML document, and XxxLive, only the
// inner HTML of the page's live region (the element with id "live"):
//
//	page       props          full document                  live region only
//	/          Overview       OverviewPage(site, o)          OverviewLive(o)
//	/leases/x  LeaseDetail    LeasePage(site, d)             LeaseLive(d)
//	/rejections RejectionList RejectionsPage(site, l)        RejectionsLive(l)
//	/resources ResourceList   ResourcesPage(site, l)         ResourcesLive(l)
//	/resources/x ResourceDetail ResourcePage(site, d)        ResourceLive(d)
//	errors     ErrorInfo      ErrorPage(site, e)             —
//
// Site carries what every full page needs besides its content (the asset version for cache
// busting and the build version shown in the footer); build it once at start-up.
//
// # Live updates: the fragment contract
//
// static/app.js keeps pages current without a reload:
//
//  1. Every second it rewrites the text of elements with a data-expires-at attribute
//     (countdowns: the time left, then the text of their data-done attribute, "expired" by
//     default) and of <time data-rel> elements (relative times), using the same rules as
//     [RelativeTime] and [Countdown]. It corrects for the browser's clock by comparing it with
//     the server's render time, found in the data-now attribute of the live region's content.
//     A countdown with data-ttl-ms sets data-soon="true" on its nearest [data-soon] ancestor
//     while less than a fifth of the ttl is left. Elements with data-abs (an RFC 3339 time)
//     show it absolute, in UTC as rendered or in the browser's zone when the reader chose
//     so with the #tz-toggle button (kept in localStorage "lk-tz").
//  2. It keeps the header's #conn line: "live · updated N s ago" while the data is known to
//     be current (the watch stream is open, or the last poll answered), else "disconnected —
//     data may be stale", with body.is-stale set and every countdown stopped. A disconnected
//     page retries a fragment request every 3 seconds (and the stream reconnects); the first
//     that succeeds makes it live again. Changes of state, and of the live region's
//     data-summary sentence after a refresh, are announced in the polite #announce region;
//     #conn itself is not a live region (it changes every second).
//  3. Buttons of class copy copy their data-copy text (they are hidden without the script).
//  4. If the live region (<div id="live">) has a data-watch-prefix attribute, it opens
//     EventSource("/v1/watch?prefix=" + that prefix), refreshes once when the stream opens
//     (the stream starts at its opening, not at the render), and closes it when the page is
//     left (pagehide), reopening it if the page comes back from the back-forward cache:
//     otherwise cached pages hold their streams and, past six, exhaust the browser's
//     connections to the server. On any event it lists in
//     data-watch-events (all of acquired, renewed, released, expired, revoked, rejected when
//     absent), debounced by 300 ms, it fetches the current URL (location.href) with the
//     request header "LK-Fragment: 1" and replaces the live region's inner HTML with the
//     answer, keeping the scroll position, the focused element (by id or data-testid) and
//     which <details> are open. A data-poll-ms attribute refreshes the same way on a timer,
//     for pages without events (resources).
//
// So a handler answers a request for which [IsFragment] is true with the XxxLive component
// of the same props instead of XxxPage, with the same status code, and sets
// "Vary: LK-Fragment" (and preferably "Cache-Control: no-store") on both answers:
//
//	if web.IsFragment(r) {
//		err = web.OverviewLive(o).Render(ctx, w)
//	} else {
//		err = web.OverviewPage(site, o).Render(ctx, w)
//	}
//
// A fragment answer that is not 200 is ignored by the script, which retries on the next event.
//
// # Forms
//
// Search and filter forms are GET forms over the query parameters prefix, cursor (overview),
// resource, lease, cursor (rejections) and cursor (resources, lease events). The revoke form
// posts to /leases/{name}/revoke with the hidden fields [CSRFField] and [RevokeTokenField] (the
// token of the grant the page shows, so that a stale form cannot revoke a later holder's
// lease); it sits behind a <details>
// disclosure (and, with JavaScript, a confirm()). Paths are built with [LeaseURL], which
// escapes the name as one path segment.
//
// # Static assets
//
// [Static] returns the embedded files of the static folder (app.css, app.js, favicon.svg),
// to be served under /static/. Pages link them as /static/NAME?v=VERSION, with VERSION from
// [AssetVersion].
package web
