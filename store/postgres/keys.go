package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// CreateKey stores a key by its hash. The bootstrap (onlyIfNone) takes an advisory lock, so
// replicas starting together on an empty database make one admin key. See store.Store.
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
		created = false
		if onlyIfNone {
			if err := advisory(ctx, t, "bootstrap", nil); err != nil {
				return err
			}
			var any bool
			if err := t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM keys)`).Scan(&any); err != nil {
				return fmt.Errorf("count keys: %w", err)
			}
			if any {
				return nil
			}
		}
		now, err := t.now(ctx)
		if err != nil {
			return err
		}
		tag, err := t.tx.Exec(ctx, `INSERT INTO keys (id, hash, label, role, prefixes, created_at, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`, k.ID, hash, k.Label, string(k.Role), string(prefixes), now, k.CreatedBy)
		if err != nil {
			return fmt.Errorf("insert key: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return lease.Errorf(lease.CodeInvalid, "a key with this id or secret exists already")
		}
		created = true
		t.record(store.KeyEvent(lease.EventKeyCreated, k, ms(now), k.CreatedBy))
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("create key %s: %w", k.ID, err)
	}
	return created, nil
}

// KeyByHash finds a key by the hash of its secret. See store.Store.
func (s *Store) KeyByHash(ctx context.Context, hash []byte) (auth.Key, error) {
	k, err := store.ScanKey(s.pool.QueryRow(ctx, `SELECT `+store.KeyCols+` FROM keys k WHERE k.hash = $1`, hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return k, lease.Errorf(lease.CodeNotFound, "no such key")
	}
	if err != nil {
		return k, fmt.Errorf("read key: %w", translate(err))
	}
	return k, nil
}

// Keys lists every key. See store.Store.
func (s *Store) Keys(ctx context.Context) ([]auth.Key, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+store.KeyCols+` FROM keys k ORDER BY k.created_at, k.id`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (auth.Key, error) { return store.ScanKey(r) })
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", translate(err))
	}
	return out, nil
}

// RevokeKey revokes a key and ends its sessions. See store.Store.
func (s *Store) RevokeKey(ctx context.Context, id, actor string) (auth.Key, error) {
	var k auth.Key
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		// Lock the live admin keys first, always in id order: two revocations racing to leave
		// no admin wait for each other here instead of both counting two admins.
		rows, err := t.tx.Query(ctx, `SELECT id FROM keys WHERE role = 'admin' AND revoked_at IS NULL ORDER BY id FOR UPDATE`)
		if err != nil {
			return fmt.Errorf("lock admin keys: %w", err)
		}
		admins := 0
		for rows.Next() {
			admins++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("lock admin keys: %w", err)
		}
		k, err = store.ScanKey(t.tx.QueryRow(ctx, `SELECT `+store.KeyCols+` FROM keys k WHERE k.id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return lease.Errorf(lease.CodeNotFound, "no key with id %q", id)
		}
		if err != nil {
			return fmt.Errorf("read key: %w", err)
		}
		if k.Revoked() {
			return nil
		}
		if err := auth.CheckRevoke(k, admins); err != nil {
			return err
		}
		now, err := t.now(ctx)
		if err != nil {
			return err
		}
		if _, err := t.tx.Exec(ctx, `UPDATE keys SET revoked_at = $1, revoked_by = $2 WHERE id = $3`, now, actor, id); err != nil {
			return fmt.Errorf("revoke key: %w", err)
		}
		if _, err := t.tx.Exec(ctx, `DELETE FROM sessions WHERE key_id = $1`, id); err != nil {
			return fmt.Errorf("end the key's sessions: %w", err)
		}
		k.RevokedAt, k.RevokedBy = ms(now), actor
		t.record(store.KeyEvent(lease.EventKeyRevoked, k, ms(now), actor))
		return nil
	})
	if err != nil {
		return k, fmt.Errorf("revoke key %s: %w", id, err)
	}
	return k, nil
}

// CreateSignIn stores a dashboard sign-in. See store.Store.
func (s *Store) CreateSignIn(ctx context.Context, hash []byte, keyID string, expires time.Time, keep int) error {
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		if keep > 0 {
			// Sign-ins of one key, on any replica, trim its sessions one at a time.
			if _, err := t.tx.Exec(ctx, `SELECT 1 FROM keys WHERE id = $1 FOR UPDATE`, keyID); err != nil {
				return fmt.Errorf("lock key: %w", err)
			}
		}
		now, err := t.now(ctx)
		if err != nil {
			return err
		}
		if _, err := t.tx.Exec(ctx, `INSERT INTO sessions (hash, key_id, created_at, last_seen_at, expires_at)
			VALUES ($1, $2, $3, $3, $4)`, hash, keyID, now, expires.UnixMilli()); err != nil {
			return fmt.Errorf("insert session: %w", err)
		}
		if keep <= 0 {
			return nil
		}
		// The new session stays whatever the clock says: it is kept first, then the newest.
		if _, err := t.tx.Exec(ctx, `DELETE FROM sessions WHERE key_id = $1 AND hash <> $2 AND hash NOT IN
			(SELECT hash FROM sessions WHERE key_id = $1 AND hash <> $2 ORDER BY created_at DESC, hash DESC LIMIT $3)`,
			keyID, hash, keep-1); err != nil {
			return fmt.Errorf("end the key's oldest sessions: %w", err)
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
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return out, err
	}
	row := s.pool.QueryRow(ctx, `SELECT s.created_at, s.last_seen_at, s.expires_at, `+store.KeyCols+`
		FROM sessions s JOIN keys k ON k.id = s.key_id WHERE s.hash = $1 AND s.expires_at > $2`, hash, now)
	k, err := store.ScanKey(row, &created, &seen, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, lease.Errorf(lease.CodeNotFound, "no such session")
	}
	if err != nil {
		return out, fmt.Errorf("read session: %w", translate(err))
	}
	return store.SignIn{Key: k, CreatedAt: ms(created), LastSeen: ms(seen), ExpiresAt: ms(expires)}, nil
}

// TouchSignIn records a dashboard sign-in's use. See store.Store.
func (s *Store) TouchSignIn(ctx context.Context, hash []byte) error {
	return s.write(ctx, func(ctx context.Context, t *txn) error {
		now, err := t.now(ctx)
		if err != nil {
			return err
		}
		if _, err := t.tx.Exec(ctx, `UPDATE sessions SET last_seen_at = $1 WHERE hash = $2`, now, hash); err != nil {
			return fmt.Errorf("touch session: %w", err)
		}
		return nil
	})
}

// TouchKey records a key's use. See store.Store.
func (s *Store) TouchKey(ctx context.Context, id string) error {
	return s.write(ctx, func(ctx context.Context, t *txn) error {
		now, err := t.now(ctx)
		if err != nil {
			return err
		}
		if _, err := t.tx.Exec(ctx, `UPDATE keys SET last_used = $1 WHERE id = $2 AND last_used < $1`, now, id); err != nil {
			return fmt.Errorf("touch key %s: %w", id, err)
		}
		return nil
	})
}

// DeleteSignIn ends a dashboard sign-in. See store.Store.
func (s *Store) DeleteSignIn(ctx context.Context, hash []byte) error {
	return s.write(ctx, func(ctx context.Context, t *txn) error {
		if _, err := t.tx.Exec(ctx, `DELETE FROM sessions WHERE hash = $1`, hash); err != nil {
			return fmt.Errorf("delete session: %w", err)
		}
		return nil
	})
}
