package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
)

// KeyCols are the columns of a key, of keys k, that both backends read with ScanKey.
const KeyCols = `k.id, k.label, k.role, k.prefixes, k.created_at, k.created_by, k.revoked_at, k.revoked_by, k.last_used`

// Scanner is a row of either backend.
type Scanner interface {
	Scan(dest ...any) error
}

// ScanKey reads KeyCols from r, after the columns that before points into.
func ScanKey(r Scanner, before ...any) (auth.Key, error) {
	var k auth.Key
	var role, prefixes string
	var created, used int64
	var revoked *int64
	if err := r.Scan(append(before, &k.ID, &k.Label, &role, &prefixes, &created, &k.CreatedBy, &revoked, &k.RevokedBy, &used)...); err != nil {
		return k, err
	}
	k.Role, k.CreatedAt = auth.Role(role), time.UnixMilli(created).UTC()
	if used > 0 {
		k.LastUsed = time.UnixMilli(used).UTC()
	}
	if revoked != nil {
		k.RevokedAt = time.UnixMilli(*revoked).UTC()
	}
	if err := json.Unmarshal([]byte(prefixes), &k.Prefixes); err != nil {
		return k, fmt.Errorf("key %s prefixes: %w", k.ID, err)
	}
	if len(k.Prefixes) == 0 {
		k.Prefixes = nil
	}
	return k, nil
}

// KeyEvent is the event of key k's creation or revocation (typ) at, by actor.
func KeyEvent(typ lease.EventType, k auth.Key, at time.Time, actor string) lease.Event {
	return lease.Event{Type: typ, Holder: k.Label + " (" + k.ID + ", " + string(k.Role) + ")", At: at, Actor: actor}
}
