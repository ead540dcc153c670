package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// sessionByID reads the session whose ID is id, for the API key by ("" for an admin). Codes:
// not_found, forbidden (a session of another key).
func sessionByID(ctx context.Context, tx *sql.Tx, id, by string) (lease.Session, error) {
	s, err := readSession(tx.QueryRowContext(ctx, sessionSelect+`WHERE hash = ?`, lease.HashID(id)))
	if err != nil {
		return s, err
	}
	return s, lease.CheckSessionOwner(s, by)
}

// The statements that find a session's grants through grants_session: all of them, each the
// current grant of its name, for its page; its open ones, to renew with it; and to end with it.
const (
	sessionLeases = `SELECT ` + grantCols + ` FROM grants g JOIN names n ON n.token = g.token
		WHERE g.session = ? AND g.session <> '' ORDER BY g.name`
	sessionRenewLeases = `UPDATE grants SET ttl_ms = ?, renewed_at = ?, expires_at = ?
		WHERE session = ? AND session <> '' AND ended_at IS NULL RETURNING name, token`
	sessionOpenLeases = `SELECT ` + grantCols + ` FROM grants g WHERE g.session = ? AND g.session <> '' AND g.ended_at IS NULL`
)

// sessionsOpenOwned counts a key's open sessions through lease_sessions_owner_open.
const sessionsOpenOwned = `SELECT count(*) FROM lease_sessions WHERE owner = ? AND closed_at IS NULL AND expires_at > ?`

const sessionSelect = `SELECT ref, holder, ttl_ms, metadata, created_at, renewed_at, expires_at, closed_at, owner
	FROM lease_sessions `

// readSession scans a row of sessionSelect. Codes: not_found.
func readSession(row scanner) (lease.Session, error) {
	var s lease.Session
	var ttl, created, renewed, expires int64
	var md sql.NullString
	var closed sql.NullInt64
	err := row.Scan(&s.Ref, &s.Holder, &ttl, &md, &created, &renewed, &expires, &closed, &s.Owner)
	if errors.Is(err, sql.ErrNoRows) {
		return s, lease.Errorf(lease.CodeNotFound, "no such session (unknown, or pruned after it ended)")
	}
	if err != nil {
		return s, fmt.Errorf("read session: %w", w(err))
	}
	s.TTL, s.Metadata = time.Duration(ttl)*time.Millisecond, raw(md)
	s.CreatedAt, s.RenewedAt, s.ExpiresAt = ms(created), ms(renewed), ms(expires)
	if closed.Valid {
		s.ClosedAt = ms(closed.Int64)
	}
	return s, nil
}

// SessionByRef returns a session by its public name with its leases. See store.Store.
func (s *Store) SessionByRef(ctx context.Context, ref string) (lease.Session, []lease.State, error) {
	now := s.clock.Now().UnixMilli()
	ss, err := readSession(s.r.QueryRowContext(ctx, sessionSelect+`WHERE ref = ?`, ref))
	if err != nil {
		return ss, nil, err
	}
	rows, err := s.r.QueryContext(ctx, sessionLeases, ref)
	if err != nil {
		return ss, nil, fmt.Errorf("leases of session %s: %w", ref, w(err))
	}
	page, err := collect(rows, store.MaxLimit, func(r scanner) (lease.State, error) {
		g, err := scanGrant(r)
		return g.state(now), err
	}, func(st lease.State) string { return st.Name })
	if err != nil {
		return ss, nil, fmt.Errorf("leases of session %s: %w", ref, err)
	}
	for _, st := range page.Items {
		if st.Held {
			ss.Leases++
		}
	}
	return ss, page.Items, nil
}

// OpenSession opens a session. See store.Store.
func (s *Store) OpenSession(ctx context.Context, p store.SessionParams) (lease.Session, error) {
	var out lease.Session
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		if p.MaxOpen > 0 {
			var n int
			if err := t.tx.QueryRowContext(ctx, sessionsOpenOwned, p.Owner, t.now).Scan(&n); err != nil {
				return fmt.Errorf("count the key's sessions: %w", w(err))
			}
			if err := lease.CheckSessionCap(n, p.MaxOpen); err != nil {
				return err
			}
		}
		id := lease.NewSessionID()
		hash := lease.HashID(id)
		out = lease.Session{ID: id, Ref: lease.SessionRef(hash), Holder: p.Holder, TTL: p.TTL, Metadata: p.Metadata,
			CreatedAt: ms(t.now), RenewedAt: ms(t.now), ExpiresAt: ms(t.now + p.TTL.Milliseconds())}
		if _, err := t.tx.ExecContext(ctx, `INSERT INTO lease_sessions (ref, hash, holder, ttl_ms, metadata, owner, created_at,
			renewed_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, out.Ref, hash, p.Holder, p.TTL.Milliseconds(),
			nullText(p.Metadata), p.Owner, t.now, t.now, out.ExpiresAt.UnixMilli()); err != nil {
			return fmt.Errorf("insert session: %w", w(err))
		}
		t.dirty = true
		return nil
	})
	if err != nil {
		return lease.Session{}, fmt.Errorf("open session: %w", err)
	}
	return out, nil
}

// RenewSession extends a session and its leases together. See store.Store.
func (s *Store) RenewSession(ctx context.Context, id, by string, ttl time.Duration) (lease.Session, error) {
	var out lease.Session
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		cur, err := sessionByID(ctx, t.tx, id, by)
		if err != nil {
			return err
		}
		if out, err = lease.DecideSessionRenew(cur, ttl, ms(t.now)); err != nil {
			return err
		}
		ttlMs, exp := out.TTL.Milliseconds(), out.ExpiresAt.UnixMilli()
		if _, err := t.tx.ExecContext(ctx, `UPDATE lease_sessions SET ttl_ms = ?, renewed_at = ?, expires_at = ? WHERE ref = ?`,
			ttlMs, t.now, exp, out.Ref); err != nil {
			return fmt.Errorf("renew session %s: %w", out.Ref, w(err))
		}
		// The session is open, so its leases have not expired: they share its expiry.
		rows, err := t.tx.QueryContext(ctx, sessionRenewLeases, ttlMs, t.now, exp, out.Ref)
		if err != nil {
			return fmt.Errorf("renew the leases of session %s: %w", out.Ref, w(err))
		}
		type nt struct {
			name  string
			token int64
		}
		var held []nt
		for rows.Next() {
			var r nt
			if err := rows.Scan(&r.name, &r.token); err != nil {
				rows.Close()
				return fmt.Errorf("renew the leases of session %s: %w", out.Ref, err)
			}
			held = append(held, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("renew the leases of session %s: %w", out.Ref, w(err))
		}
		for _, r := range held {
			if c, ok := t.s.mem.names[r.name]; ok && c.token == r.token {
				c.ttl, c.renewed, c.expires = ttlMs, t.now, exp
				t.setName(r.name, c)
			}
		}
		out.Leases = len(held)
		t.dirty = true
		return nil
	})
	if err != nil {
		return lease.Session{}, fmt.Errorf("renew session: %w", err)
	}
	return out, nil
}

// CloseSession closes a session and releases its leases. See store.Store.
func (s *Store) CloseSession(ctx context.Context, id, by string) (lease.Session, error) {
	var out lease.Session
	err := s.free(ctx, func(ctx context.Context, t *txn) error {
		var err error
		if out, err = sessionByID(ctx, t.tx, id, by); err != nil {
			return err
		}
		if ended, err := lease.DecideSessionClose(out, ms(t.now)); !ended {
			return err
		}
		if _, err := t.tx.ExecContext(ctx, `UPDATE lease_sessions SET closed_at = ? WHERE ref = ?`, t.now, out.Ref); err != nil {
			return fmt.Errorf("close session %s: %w", out.Ref, w(err))
		}
		out.ClosedAt = ms(t.now)
		rows, err := t.tx.QueryContext(ctx, sessionOpenLeases, out.Ref)
		if err != nil {
			return fmt.Errorf("find the leases of session %s: %w", out.Ref, w(err))
		}
		var open []grant
		for rows.Next() {
			g, err := scanGrant(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("find the leases of session %s: %w", out.Ref, err)
			}
			open = append(open, g)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("find the leases of session %s: %w", out.Ref, w(err))
		}
		// All in this one transaction: no one sees some of the session's leases released
		// and others still held (invariant S1).
		for _, g := range open {
			if err := end(ctx, t, g, lease.EndReleased, t.now); err != nil {
				return err
			}
		}
		out.Leases = len(open)
		t.dirty = true
		return nil
	})
	if err != nil {
		return lease.Session{}, fmt.Errorf("close session: %w", err)
	}
	return out, nil
}

// loadSessionOf reads the session of each open grant held under one.
func (s *Store) loadSessionOf(ctx context.Context) (map[int64]string, error) {
	rows, err := s.w.QueryContext(ctx, `SELECT token, session FROM grants WHERE ended_at IS NULL AND session <> ''`)
	if err != nil {
		return nil, fmt.Errorf("load lease sessions: %w", err)
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var token int64
		var ref string
		if err := rows.Scan(&token, &ref); err != nil {
			return nil, fmt.Errorf("load lease sessions: %w", err)
		}
		out[token] = ref
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load lease sessions: %w", err)
	}
	return out, nil
}
