package web

import "time"

// SessionList is the props of the sessions page (/sessions).
type SessionList struct {
	// Now is the time the page is rendered for.
	Now time.Time
	// All shows closed and expired sessions too (query parameter all=1).
	All bool
	// Cursor is the cursor of this page; empty on the first page.
	Cursor string
	// Sessions is this page, ordered by ref.
	Sessions []SessionInfo
	// NextCursor is the cursor of the next page; empty on the last page.
	NextCursor string
	// Mine says the list holds only the sessions the viewer's key opened (a scoped key).
	Mine bool
}

// sessionsURL is the sessions page, all of them or the open ones.
func sessionsURL(all bool, cursor string) string {
	a := ""
	if all {
		a = "1"
	}
	return string(pageURL("/sessions", "all", a, "cursor", cursor))
}
