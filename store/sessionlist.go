package store

// SessionFilter selects a page of sessions (Store.Sessions).
type SessionFilter struct {
	// Open keeps only sessions neither closed nor expired.
	Open bool
	// Owner keeps only the sessions opened by this key id; empty for every key's.
	Owner  string
	Limit  int
	Cursor string
}
