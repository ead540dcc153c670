package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// CreateKey stores a key by its hash. See store.Store.
func (s *Store) CreateKey(ctx context.Context, k auth.Key, hash []byte, onlyIfNone bool) (bool, error) {
	if k.Prefixes == nil {
		k.Prefixes = []string{}
	}
	prefixes, err := json.Marshal(k.Prefixes)
	if err != nil {
		return false, fmt.Errorf("create key %s: %w", k.ID, err)
	}
	created := false
	err = s.write(ctx, func(ctx context.Context, t *txn) error {
		if onlyIfNone {
			var n int
			if err := t.tx.QueryRowContext(ctx, `SELECT count(*) FROM keys`).Scan(&n); err != nil {
				return fmt.Errorf("count keys: %w", w(err))
			}
			if n > 0 {
				return nil
			}
		}
		_, err := t.tx.ExecContext(ctx, `INSERT INTO keys (id, hash, label, role, prefixes, created_at, created_by)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, k.ID, hash, k.Label, string(k.Role), string(prefixes), t.now, k.CreatedBy)
		var se sqlite3.Error
		if errors.As(err, &se) && se.Code == sqlite3.ErrConstraint {
			return lease.Errorf(lease.CodeInvalid, "a key with this id or secret exists already")
		}
		if err != nil {
			return fmt.Errorf("insert key: %w", w(err))
		}
		created = true
		return t.record(ctx, store.KeyEvent(lease.EventKeyCreated, k, ms(t.now), k.CreatedBy))
	})
	if err != nil {
		return false, fmt.Errorf("create key %s: %w", k.ID, err)
	}
	return created, nil
}

// KeyByHash finds a key by the hash of its secret. See store.Store.
func (s *Store) KeyByHash(ctx context.Context, hash []byte) (auth.Key, error) {
	k, err := store.ScanKey(s.r.QueryRowContext(ctx, `SELECT `+store.KeyCols+` FROM keys k WHERE k.hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return k, lease.Errorf(lease.CodeNotFound, "no such key")
	}
	if err != nil {
		return k, fmt.Errorf("read key: %w", w(err))
	}
	return k, nil
}

// Keys lists every key. See store.Store.
func (s *Store) Keys(ctx context.Context) ([]auth.Key, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+store.KeyCols+` FROM keys k ORDER BY k.created_at, k.id`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", w(err))
	}
	defer rows.Close()
	var out []auth.Key
	for rows.Next() {
		k, err := store.ScanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list keys: %w", w(err))
	}
	return out, nil
}

// RevokeKey revokes a key and ends its sessions. See store.Store.
func (s *Store) RevokeKey(ctx context.Context, id, actor string) (auth.Key, error) {
	var k auth.Key
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		var err error
		k, err = store.ScanKey(t.tx.QueryRowContext(ctx, `SELECT `+store.KeyCols+` FROM keys k WHERE k.id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return lease.Errorf(lease.CodeNotFound, "no key with id %q", id)
		}
		if err != nil {
			return fmt.Errorf("read key: %w", w(err))
		}
		if k.Revoked() {
			return nil
		}
		var admins int
		if err := t.tx.QueryRowContext(ctx, `SELECT count(*) FROM keys WHERE role = 'admin' AND revoked_at IS NULL`).Scan(&admins); err != nil {
			return fmt.Errorf("count admin keys: %w", w(err))
		}
		if err := auth.CheckRevoke(k, admins); err != nil {
			return err
		}
		if _, err := t.tx.ExecContext(ctx, `UPDATE keys SET revoked_at = ?, revoked_by = ? WHERE id = ?`, t.now, actor, id); err != nil {
			return fmt.Errorf("revoke key: %w", w(err))
		}
		if _, err := t.tx.ExecContext(ctx, `DELETE FROM sessions WHERE key_id = ?`, id); err != nil {
			return fmt.Errorf("end the key's sessions: %w", w(err))
		}
		k.RevokedAt, k.RevokedBy = ms(t.now), actor
		return t.record(ctx, store.KeyEvent(lease.EventKeyRevoked, k, ms(t.now), actor))
	})
	if err != nil {
		return k, fmt.Errorf("revoke key %s: %w", id, err)
	}
	return k, nil
}

// CreateSignIn stores a dashboard sign-in. See store.Store.
func (s *Store) CreateSignIn(ctx context.Context, hash []byte, keyID string, expires time.Time, keep int) error {
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		_, err := t.tx.ExecContext(ctx, `INSERT INTO sessions (hash, key_id, created_at, last_seen_at, expires_at)
			VALUES (?, ?, ?, ?, ?)`, hash, keyID, t.now, t.now, expires.UnixMilli())
		if err != nil {
			return fmt.Errorf("insert session: %w", w(err))
		}
		t.dirty = true
		if keep <= 0 {
			return nil
		}
		// The new session stays whatever the clock says: it is kept first, then the newest.
		if _, err := t.tx.ExecContext(ctx, `DELETE FROM sessions WHERE key_id = ?1 AND hash <> ?2 AND hash NOT IN
			(SELECT hash FROM sessions WHERE key_id = ?1 AND hash <> ?2 ORDER BY created_at DESC, rowid DESC LIMIT ?3)`,
			keyID, hash, keep-1); err != nil {
			return fmt.Errorf("end the key's oldest sessions: %w", w(err))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create session for key %s: %w", keyID, err)
	}
	return nil
}

// SignIn reads a live dashboard sign-in with its key. See store.Store.
func (s *Store) SignIn(ctx context.Context, hash []byte) (store.SignIn, error) {
	var out store.SignIn
	var created, seen, expires int64
	now := s.clock.Now().UnixMilli()
	row := s.r.QueryRowContext(ctx, `SELECT s.created_at, s.last_seen_at, s.expires_at, `+store.KeyCols+`
		FROM sessions s JOIN keys k ON k.id = s.key_id WHERE s.hash = ? AND s.expires_at > ?`, hash, now)
	k, err := store.ScanKey(row, &created, &seen, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return out, lease.Errorf(lease.CodeNotFound, "no such session")
	}
	if err != nil {
		return out, fmt.Errorf("read session: %w", w(err))
	}
	return store.SignIn{Key: k, CreatedAt: ms(created), LastSeen: ms(seen), ExpiresAt: ms(expires)}, nil
}

// TouchSignIn records a dashboard sign-in's use. See store.Store.
func (s *Store) TouchSignIn(ctx context.Context, hash []byte) error {
	return s.write(ctx, func(ctx context.Context, t *txn) error {
		if _, err := t.tx.ExecContext(ctx, `UPDATE sessions SET last_seen_at = ? WHERE hash = ?`, t.now, hash); err != nil {
			return fmt.Errorf("touch session: %w", w(err))
		}
		t.dirty = true
		return nil
	})
}

// TouchKey records a key's use. See store.Store.
func (s *Store) TouchKey(ctx context.Context, id string) error {
	return s.write(ctx, func(ctx context.Context, t *txn) error {
		if _, err := t.tx.ExecContext(ctx, `UPDATE keys SET last_used = ?1 WHERE id = ?2 AND last_used < ?1`, t.now, id); err != nil {
			return fmt.Errorf("touch key %s: %w", id, w(err))
		}
		t.dirty = true
		return nil
	})
}

// DeleteSignIn ends a dashboard sign-in. See store.Store.
func (s *Store) DeleteSignIn(ctx context.Context, hash []byte) error {
	return s.write(ctx, func(ctx context.Context, t *txn) error {
		if _, err := t.tx.ExecContext(ctx, `DELETE FROM sessions WHERE hash = ?`, hash); err != nil {
			return fmt.Errorf("delete session: %w", w(err))
		}
		t.dirty = true
		return nil
	})
}
