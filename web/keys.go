package web

import (
	"net/url"
	"time"
)

// KeyInfo is one API key on the keys page; its secret is never kept, so never shown.
type KeyInfo struct {
	ID, Label string
	// Role is "reader", "writer" or "admin"; Prefixes the names it reaches (none: all).
	Role     string
	Prefixes []string
	// CreatedAt and CreatedBy say when and by whom it was made ("" for the first key).
	CreatedAt time.Time
	CreatedBy string
	// LastUsed is when the key was last used (written at most once a minute, newer from this
	// server's memory); zero if never.
	LastUsed time.Time
	// RevokedAt is zero while the key works.
	RevokedAt time.Time
	RevokedBy string
	// RevokeToken is the value of its revoke form's [CSRFField].
	RevokeToken string
}

// KeyList is the props of the admin's keys page (/keys).
type KeyList struct {
	// Now is the time the page is rendered for.
	Now time.Time
	// Keys are every key, in the store's order.
	Keys []KeyInfo
	// CreateToken is the value of the create form's [CSRFField].
	CreateToken string
	// Created is the key just created, with its secret, shown this once; nil otherwise.
	Created *CreatedKey
	// Error says why the create or revoke just sent failed; Notice what it did. Empty for none.
	Error, Notice string
	// Form is what the create form held when it failed, to fill it again.
	Form KeyForm
}

// CreatedKey is a key just created and its secret.
type CreatedKey struct {
	ID, Label, Secret string
}

// KeyForm is the create form's fields.
type KeyForm struct {
	Label, Role, Prefixes string
}

// The keys page's form fields.
const (
	KeyLabelField    = "label"
	KeyRoleField     = "role"
	KeyPrefixesField = "prefixes"
)

// KeyRevokeURL is where a key's revoke form posts.
func KeyRevokeURL(id string) string { return "/keys/" + url.PathEscape(id) + "/revoke" }
