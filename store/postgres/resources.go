package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// PutResource writes a fenced resource. Locks, in this order: the resource's row (made if new),
// the lease's name row and grant when the write names one; then the clock is read and
// lease.DecideFencedWrite decides (invariant 7). See store.Store.
func (s *Store) PutResource(ctx context.Context, wr store.ResourceWrite) (lease.Resource, error) {
	var out lease.Resource
	f := &fastOp{kind: fastPut, put: wr, resource: &out}
	err := s.writeFast(ctx, f, func(ctx context.Context, t *txn) error {
		fence, version, err := lockResource(ctx, t, wr.Name)
		if err != nil {
			return err
		}
		fw := lease.FencedWrite{Resource: wr.Name, Token: wr.Token, Fence: fence, LeaseName: wr.LeaseName, Scoped: len(wr.Scope) > 0}
		var leaseGrant grant
		if wr.LeaseName != "" {
			var ok bool
			if leaseGrant, ok, err = lockName(ctx, t, wr.LeaseName, false); err != nil {
				return err
			}
			fw.LeaseExists = ok
		}
		// Tokens are issued with the tokens row locked to commit: a token a client presents
		// was committed before, so the committed last token bounds it without a lock.
		if err := t.tx.QueryRow(ctx, `SELECT last FROM tokens`).Scan(&fw.LastToken); err != nil {
			return fmt.Errorf("read the last token: %w", err)
		}
		now, err := t.now(ctx)
		if err != nil {
			return err
		}
		if fw.LeaseExists {
			if leaseGrant, err = settle(ctx, t, leaseGrant, now); err != nil {
				return err
			}
			fw.Lease = leaseGrant.rule()
		}
		owner, known, err := tokenOwner(ctx, t, wr.Token)
		if err != nil {
			return err
		}
		fw.Shared = known && owner.shared
		if fw.Scoped {
			if fw.LastToken, err = scopedLast(ctx, t, wr.Scope, wr.Token, now); err != nil {
				return err
			}
		}
		if e := lease.DecideFencedWrite(fw, ms(now)); e != nil {
			if err := dropUnwritten(ctx, t, wr.Name, version); err != nil {
				return err
			}
			r := lease.Rejection{Resource: wr.Name, Lease: wr.LeaseName, PresentedToken: wr.Token, CurrentFence: e.CurrentFence,
				ClientAddr: wr.ClientAddr, UserAgent: wr.UserAgent, Reason: e.Message, Source: lease.RejectionSourceServer, KeyID: wr.Owner}
			if _, err := recordRejection(ctx, t, r, owner, known, wr.Scope, now); err != nil {
				return err
			}
			return e
		}
		if e := lease.DecideWriteCondition(wr.IfVersion, wr.IfAbsent, version); e != nil {
			if err := dropUnwritten(ctx, t, wr.Name, version); err != nil {
				return err
			}
			return e
		}
		if err := checkQuota(ctx, t, wr); err != nil {
			if err := dropUnwritten(ctx, t, wr.Name, version); err != nil {
				return err
			}
			return err
		}
		leaseName, holder := lease.Attribute(wr.Scope, wr.LeaseName, owner.name, owner.holder, known)
		out = lease.Resource{Name: wr.Name, Fence: wr.Token, Version: version + 1, UpdatedAt: ms(now),
			Size: int64(len(wr.Value)), ContentType: wr.ContentType, Lease: leaseName, Holder: holder}
		// The write joins the row's history of writers, which drops its oldest entry past
		// store.WritersKept, in the same UPDATE.
		if _, err := t.tx.Exec(ctx, `UPDATE resources SET fence = $2, version = $3, value = $4, content_type = $5,
			updated_at = $6, lease = $7, holder = $8, owner = $10, grant_name = $11,
			writers = CASE WHEN jsonb_array_length(writers) >= `+writersKept+` THEN writers - 0 ELSE writers END
				|| jsonb_build_array(jsonb_build_object('v', $3::bigint, 't', $2::bigint, 'l', $7::text, 'h', $8::text,
				'at', $6::bigint, 'n', $9::bigint, 'ct', $5::text))
			WHERE name = $1`,
			out.Name, out.Fence, out.Version, nonNil(wr.Value), out.ContentType, now, out.Lease, out.Holder, out.Size, wr.Owner,
			store.GrantName(owner.name, known)); err != nil {
			return fmt.Errorf("write resource: %w", err)
		}
		return nil
	})
	if err != nil {
		return lease.Resource{}, fmt.Errorf("put resource %q: %w", wr.Name, err)
	}
	return out, nil
}

// checkQuota refuses a write that would take its key's resources past wr.Quota
// (lease.CheckQuota). It takes the key's advisory lock, last of the write's locks (so no two
// writes of a key both pass on counts that leave the other out), and counts the key's other
// resources through resources_owner.
func checkQuota(ctx context.Context, t *txn, wr store.ResourceWrite) error {
	if wr.Owner == "" || wr.Quota == (lease.Quota{}) {
		return nil
	}
	if err := advisory(ctx, t, "owner resources", []byte(wr.Owner)); err != nil {
		return err
	}
	var n int
	var bytes int64
	if err := t.tx.QueryRow(ctx, `SELECT count(*), coalesce(sum(octet_length(value)), 0) FROM resources
		WHERE owner = $1 AND owner <> '' AND name <> $2 AND version > 0`, wr.Owner, wr.Name).Scan(&n, &bytes); err != nil {
		return fmt.Errorf("count the key's resources: %w", err)
	}
	if e := lease.CheckQuota(wr.Quota, n, bytes, int64(len(wr.Value))); e != nil {
		return e
	}
	return nil
}

// dropUnwritten deletes the row lockResource made for a new name (version 0) when the write
// is refused: a domain error commits the transaction, and nothing was written.
func dropUnwritten(ctx context.Context, t *txn, name string, version int64) error {
	if version != 0 {
		return nil
	}
	if _, err := t.tx.Exec(ctx, `DELETE FROM resources WHERE name = $1`, name); err != nil {
		return fmt.Errorf("drop resource: %w", err)
	}
	return nil
}

// lockResource locks the resource's row, making it (version 0, nothing written) for a name
// never written: the first writers of a name meet at its primary key. A row made that way and
// dropped again by a rejected first write, while this one waited for it, is made again.
func lockResource(ctx context.Context, t *txn, name string) (fence, version int64, err error) {
	for range 3 {
		if _, err := t.tx.Exec(ctx, `INSERT INTO resources (name, fence, version, value, content_type, updated_at)
			VALUES ($1, 0, 0, '', '', 0) ON CONFLICT (name) DO NOTHING`, name); err != nil {
			return 0, 0, fmt.Errorf("make resource: %w", err)
		}
		err = t.tx.QueryRow(ctx, `SELECT fence, version FROM resources WHERE name = $1 FOR UPDATE`, name).Scan(&fence, &version)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("lock resource: %w", err)
	}
	return fence, version, nil
}

// DeleteResource deletes a fenced resource and its fence. See store.Store.
func (s *Store) DeleteResource(ctx context.Context, name, actor string) error {
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		tag, err := t.tx.Exec(ctx, `DELETE FROM resources WHERE name = $1 AND version > 0`, name)
		if err != nil {
			return fmt.Errorf("delete resource: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return lease.Errorf(lease.CodeNotFound, "no resource named %q exists", name)
		}
		now, err := t.now(ctx)
		if err != nil {
			return err
		}
		t.record(lease.Event{Type: lease.EventResourceDeleted, Resource: name, At: ms(now), Actor: actor})
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete resource %q: %w", name, err)
	}
	return nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// tokenOwner finds the grant that was given token, if it is still in the history.
func tokenOwner(ctx context.Context, t *txn, token int64) (grant, bool, error) {
	g, err := scanGrant(t.tx.QueryRow(ctx, `SELECT `+grantCols+` FROM grants g WHERE g.token = $1`, token))
	if errors.Is(err, pgx.ErrNoRows) {
		return grant{}, false, nil
	}
	if err != nil {
		return grant{}, false, fmt.Errorf("find the grant of token %d: %w", token, err)
	}
	return g, true, nil
}

// scopedLast is the last token as a writer limited to scope may know it
// (lease.ScopedLastToken), found for a write with token: whether a grant in scope has a token at
// least as high matters only for a token above the clock, and grants above it are few.
func scopedLast(ctx context.Context, t *txn, scope lease.Scope, token, now int64) (int64, error) {
	at := ms(now)
	if token <= at.UnixMicro() {
		return lease.ScopedLastToken(0, at), nil
	}
	var found bool
	if err := t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM grants g, unnest($2::text[]) p
		WHERE g.token >= $1 AND starts_with(g.name, p))`, token, []string(scope)).Scan(&found); err != nil {
		return 0, fmt.Errorf("find grants in scope from token %d: %w", token, err)
	}
	if found {
		return lease.ScopedLastToken(token, at), nil
	}
	return lease.ScopedLastToken(0, at), nil
}

// recordRejection inserts a rejection, filling lease and holder from the token's grant as a
// caller limited to scope may see them (lease.Attribute), and a rejected event (with an empty
// name when the lease is unknown, so watchers see every refusal).
func recordRejection(ctx context.Context, t *txn, r lease.Rejection, owner grant, known bool, scope lease.Scope, now int64) (lease.Rejection, error) {
	r.Lease, r.Holder = lease.Attribute(scope, r.Lease, owner.name, owner.holder, known)
	r.At = ms(now)
	err := t.tx.QueryRow(ctx, `INSERT INTO rejections (resource, lease, presented_token, current_fence, holder,
		client_addr, user_agent, reason, source, at, key_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`,
		r.Resource, r.Lease, r.PresentedToken, r.CurrentFence, r.Holder, r.ClientAddr, r.UserAgent, r.Reason, r.Source, now, r.KeyID).Scan(&r.ID)
	if err != nil {
		return r, fmt.Errorf("record rejection: %w", err)
	}
	t.record(lease.Event{Type: lease.EventRejected, Name: r.Lease, Token: r.PresentedToken,
		Holder: r.Holder, At: r.At, Resource: r.Resource})
	return r, nil
}

// RecordRejection records a rejection made outside leasekeeper. See store.Store.
func (s *Store) RecordRejection(ctx context.Context, r lease.Rejection, scope lease.Scope) (lease.Rejection, error) {
	var out lease.Rejection
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		owner, known, err := tokenOwner(ctx, t, r.PresentedToken)
		if err != nil {
			return err
		}
		now, err := t.now(ctx)
		if err != nil {
			return err
		}
		out, err = recordRejection(ctx, t, r, owner, known, scope, now)
		return err
	})
	if err != nil {
		return lease.Rejection{}, fmt.Errorf("record rejection on %q: %w", r.Resource, err)
	}
	return out, nil
}

const resourceCols = `name, fence, version, updated_at, length(value), content_type, lease, holder`

func scanResource(r pgx.Row, extra ...any) (lease.Resource, error) {
	var res lease.Resource
	var at int64
	err := r.Scan(append([]any{&res.Name, &res.Fence, &res.Version, &at, &res.Size, &res.ContentType, &res.Lease, &res.Holder}, extra...)...)
	res.UpdatedAt = ms(at)
	return res, err
}

// GetResource returns a resource with its value. See store.Store.
func (s *Store) GetResource(ctx context.Context, name string) (lease.Resource, error) {
	var value []byte
	res, err := scanResource(s.pool.QueryRow(ctx, `SELECT `+resourceCols+`, value FROM resources WHERE name = $1 AND version > 0`, name), &value)
	if errors.Is(err, pgx.ErrNoRows) {
		return lease.Resource{}, lease.Errorf(lease.CodeNotFound, "no resource named %q was ever written", name)
	}
	if err != nil {
		return lease.Resource{}, fmt.Errorf("get resource %q: %w", name, translate(err))
	}
	res.Value = value
	return res, nil
}

// writersKept is store.WritersKept in SQL.
var writersKept = strconv.Itoa(store.WritersKept)

// ResourceWriters returns the newest accepted writes of a resource. See store.Store.
func (s *Store) ResourceWriters(ctx context.Context, name string) ([]lease.Write, error) {
	var writers []byte
	err := s.pool.QueryRow(ctx, `SELECT writers FROM resources WHERE name = $1 AND version > 0`, name).Scan(&writers)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, lease.Errorf(lease.CodeNotFound, "no resource named %q exists", name)
	}
	if err != nil {
		return nil, fmt.Errorf("writers of resource %q: %w", name, translate(err))
	}
	out, err := store.DecodeWriters(writers)
	if err != nil {
		return nil, fmt.Errorf("writers of resource %q: %w", name, err)
	}
	return out, nil
}

// ListResources returns resources ordered by name. See store.Store.
func (s *Store) ListResources(ctx context.Context, f store.ResourceFilter) (store.Page[lease.Resource], error) {
	nq, err := store.CheckNamePage(f.Cursor, f.Limit, f.Prefix)
	if err != nil {
		return store.Page[lease.Resource]{}, err
	}
	after, limit, lo, hi := nq.After, nq.Limit, nq.Lo, nq.Hi
	rows, err := s.pool.Query(ctx, `SELECT `+resourceCols+` FROM resources WHERE version > 0 AND name > $1 AND name >= $2 AND name < $3
		ORDER BY name LIMIT $4`, after, lo, hi, limit+1)
	if err != nil {
		return store.Page[lease.Resource]{}, fmt.Errorf("list resources: %w", translate(err))
	}
	page, err := collect(rows, limit, func(r pgx.Row) (lease.Resource, error) { return scanResource(r) },
		func(r lease.Resource) string { return r.Name })
	if err != nil {
		return page, fmt.Errorf("list resources: %w", err)
	}
	return page, nil
}

// LeaseResources returns the resources last written under a lease. See store.Store.
func (s *Store) LeaseResources(ctx context.Context, name string, limit int) ([]lease.Resource, error) {
	// A semaphore's slots are "name#i": the range from "name#" to "name$" holds them all.
	rows, err := s.pool.Query(ctx, `SELECT `+resourceCols+` FROM resources
		WHERE grant_name <> '' AND (grant_name = $1 OR grant_name >= $1 || '#' AND grant_name < $1 || '$') ORDER BY name LIMIT $2`, name, store.ClampLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("resources of lease %q: %w", name, translate(err))
	}
	page, err := collect(rows, store.MaxLimit, func(r pgx.Row) (lease.Resource, error) { return scanResource(r) },
		func(r lease.Resource) string { return r.Name })
	if err != nil {
		return nil, fmt.Errorf("resources of lease %q: %w", name, err)
	}
	return page.Items, nil
}

// TokenGrants finds the grants tokens were issued to. See store.Store.
func (s *Store) TokenGrants(ctx context.Context, tokens []int64) (map[int64]store.TokenGrant, error) {
	out := map[int64]store.TokenGrant{}
	if len(tokens) > store.MaxLimit {
		return nil, lease.Errorf(lease.CodeInvalid, "at most %d tokens at once, not %d", store.MaxLimit, len(tokens))
	}
	rows, err := s.pool.Query(ctx, `SELECT token, name, holder, shared, acquired_at FROM grants WHERE token = ANY($1)`, tokens)
	if err != nil {
		return nil, fmt.Errorf("grants of tokens: %w", translate(err))
	}
	var tok, at int64
	var g store.TokenGrant
	if _, err := pgx.ForEachRow(rows, []any{&tok, &g.Name, &g.Holder, &g.Shared, &at}, func() error {
		g.AcquiredAt = ms(at)
		out[tok] = g
		return nil
	}); err != nil {
		return nil, fmt.Errorf("grants of tokens: %w", translate(err))
	}
	return out, nil
}

// Rejections returns rejections newest first. See store.Store.
func (s *Store) Rejections(ctx context.Context, f store.RejectionFilter) (store.Page[lease.Rejection], error) {
	rq, err := store.CheckRejectionFilter(f)
	if err != nil {
		return store.Page[lease.Rejection]{}, err
	}
	before, limit, since := rq.Before, rq.Limit, rq.Since
	rows, err := s.pool.Query(ctx, `SELECT id, resource, lease, presented_token, current_fence, holder, client_addr,
		user_agent, reason, source, at, key_id FROM rejections WHERE id < $1 AND ($2 = '' OR resource = $2) AND ($3 = '' OR lease = $3)
		AND at >= $4 ORDER BY id DESC LIMIT $5`, before, f.Resource, f.Lease, since, limit+1)
	if err != nil {
		return store.Page[lease.Rejection]{}, fmt.Errorf("list rejections: %w", translate(err))
	}
	page, err := collect(rows, limit, scanRejection, func(r lease.Rejection) string { return store.SeqKey(r.ID) })
	if err != nil {
		return page, fmt.Errorf("list rejections: %w", err)
	}
	return page, nil
}

func scanRejection(r pgx.Row) (lease.Rejection, error) {
	var x lease.Rejection
	var at int64
	err := r.Scan(&x.ID, &x.Resource, &x.Lease, &x.PresentedToken, &x.CurrentFence, &x.Holder,
		&x.ClientAddr, &x.UserAgent, &x.Reason, &x.Source, &at, &x.KeyID)
	x.At = ms(at)
	return x, err
}
