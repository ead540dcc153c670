package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// sessionByID reads, and locks with lock ("FOR UPDATE", "FOR SHARE"), the session whose ID is
// id, for the API key by ("" for an admin). Codes: not_found, forbidden (another key's).
func sessionByID(ctx context.Context, t *txn, id, by, lock string) (lease.Session, error) {
	s, err := readSession(t.tx.QueryRow(ctx, sessionSelect+`WHERE hash = $1 `+lock, lease.HashID(id)))
	if err != nil {
		return s, err
	}
	return s, lease.CheckSessionOwner(s, by)
}

const sessionSelect = `SELECT ref, holder, ttl_ms, metadata, created_at, renewed_at, expires_at, closed_at, owner
	FROM lease_sessions `

// readSession scans a row of sessionSelect. Codes: not_found.
func readSession(row pgx.Row) (lease.Session, error) {
	var s lease.Session
	var ttl, created, renewed, expires int64
	var md *string
	var closed *int64
	err := row.Scan(&s.Ref, &s.Holder, &ttl, &md, &created, &renewed, &expires, &closed, &s.Owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, lease.Errorf(lease.CodeNotFound, "no such session (unknown, or pruned after it ended)")
	}
	if err != nil {
		return s, fmt.Errorf("read session: %w", err)
	}
	s.TTL, s.Metadata = time.Duration(ttl)*time.Millisecond, raw(md)
	s.CreatedAt, s.RenewedAt, s.ExpiresAt = ms(created), ms(renewed), ms(expires)
	if closed != nil {
		s.ClosedAt = ms(*closed)
	}
	return s, nil
}

// SessionByRef returns a session by its public name with its leases. See store.Store.
func (s *Store) SessionByRef(ctx context.Context, ref string) (lease.Session, []lease.State, error) {
	ss, err := readSession(s.pool.QueryRow(ctx, sessionSelect+`WHERE ref = $1`, ref))
	if err != nil {
		return ss, nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+grantCols+` FROM grants g JOIN names n ON n.token = g.token
		WHERE g.session = $1 AND g.session <> '' ORDER BY g.name`, ref)
	if err != nil {
		return ss, nil, fmt.Errorf("leases of session %s: %w", ref, translate(err))
	}
	gs, err := collect(rows, store.MaxLimit, scanGrant, func(g grant) string { return g.name })
	if err != nil {
		return ss, nil, fmt.Errorf("leases of session %s: %w", ref, err)
	}
	// The clock is read after the rows, as Get does.
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return ss, nil, err
	}
	var page store.Page[lease.State]
	for _, g := range gs.Items {
		page.Items = append(page.Items, g.state(now))
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
			// One open at a time per key, so that two cannot both see room for one.
			if err := advisory(ctx, t, "owner sessions", []byte(p.Owner)); err != nil {
				return err
			}
		}
		now, err := t.now(ctx)
		if err != nil {
			return err
		}
		if p.MaxOpen > 0 {
			if err := checkOwnerCap(ctx, t, "sessions", `SELECT count(*) FROM lease_sessions WHERE owner = $1 AND closed_at IS NULL AND expires_at > $2`,
				p.Owner, now, p.MaxOpen, lease.CheckSessionCap); err != nil {
				return err
			}
		}
		id := lease.NewSessionID()
		hash := lease.HashID(id)
		out = lease.Session{ID: id, Ref: lease.SessionRef(hash), Holder: p.Holder, TTL: p.TTL, Metadata: p.Metadata,
			CreatedAt: ms(now), RenewedAt: ms(now), ExpiresAt: ms(now + p.TTL.Milliseconds())}
		if _, err := t.tx.Exec(ctx, `INSERT INTO lease_sessions (ref, hash, holder, ttl_ms, metadata, owner, created_at,
			renewed_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, out.Ref, hash, p.Holder, p.TTL.Milliseconds(),
			nullText(p.Metadata), p.Owner, now, now, out.ExpiresAt.UnixMilli()); err != nil {
			return fmt.Errorf("insert session: %w", err)
		}
		return nil
	})
	if err != nil {
		return lease.Session{}, fmt.Errorf("open session: %w", err)
	}
	return out, nil
}

// RenewSession extends a session and its leases together, under the session's lock. See
// store.Store.
func (s *Store) RenewSession(ctx context.Context, id, by string, ttl time.Duration) (lease.Session, error) {
	var out lease.Session
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		cur, err := sessionByID(ctx, t, id, by, "FOR UPDATE")
		if err != nil {
			return err
		}
		now, err := t.now(ctx)
		if err != nil {
			return err
		}
		if out, err = lease.DecideSessionRenew(cur, ttl, ms(now)); err != nil {
			return err
		}
		ttlMs, exp := out.TTL.Milliseconds(), out.ExpiresAt.UnixMilli()
		if _, err := t.tx.Exec(ctx, `UPDATE lease_sessions SET ttl_ms = $1, renewed_at = $2, expires_at = $3 WHERE ref = $4`,
			ttlMs, now, exp, out.Ref); err != nil {
			return fmt.Errorf("renew session %s: %w", out.Ref, err)
		}
		// The session is open, so its leases have not expired: they share its expiry.
		tag, err := t.tx.Exec(ctx, `UPDATE grants SET ttl_ms = $1, renewed_at = $2, expires_at = $3
			WHERE session = $4 AND session <> '' AND ended_at IS NULL`, ttlMs, now, exp, out.Ref)
		if err != nil {
			return fmt.Errorf("renew the leases of session %s: %w", out.Ref, err)
		}
		out.Leases = int(tag.RowsAffected())
		return nil
	})
	if err != nil {
		return lease.Session{}, fmt.Errorf("renew session: %w", err)
	}
	return out, nil
}

// CloseSession closes a session and releases its leases, under the session's lock. See
// store.Store.
func (s *Store) CloseSession(ctx context.Context, id, by string) (lease.Session, error) {
	var out lease.Session
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		var err error
		if out, err = sessionByID(ctx, t, id, by, "FOR UPDATE"); err != nil {
			return err
		}
		now, err := t.now(ctx)
		if err != nil {
			return err
		}
		if ended, err := lease.DecideSessionClose(out, ms(now)); !ended {
			return err
		}
		if _, err := t.tx.Exec(ctx, `UPDATE lease_sessions SET closed_at = $1 WHERE ref = $2`, now, out.Ref); err != nil {
			return fmt.Errorf("close session %s: %w", out.Ref, err)
		}
		out.ClosedAt = ms(now)
		rows, err := t.tx.Query(ctx, `SELECT `+grantCols+` FROM grants g WHERE g.session = $1 AND g.session <> '' AND g.ended_at IS NULL
			ORDER BY g.token FOR UPDATE`, out.Ref)
		if err != nil {
			return fmt.Errorf("find the leases of session %s: %w", out.Ref, err)
		}
		open, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (grant, error) { return scanGrant(r) })
		if err != nil {
			return fmt.Errorf("find the leases of session %s: %w", out.Ref, err)
		}
		// All in this one transaction (invariant S1).
		for _, g := range open {
			if err := end(ctx, t, g, lease.EndReleased, now, now, ""); err != nil {
				return err
			}
		}
		out.Leases = len(open)
		return nil
	})
	if err != nil {
		return lease.Session{}, fmt.Errorf("close session: %w", err)
	}
	return out, nil
}
