package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// PutResource writes a fenced resource. See store.Store.
func (s *Store) PutResource(ctx context.Context, wr store.ResourceWrite) (lease.Resource, error) {
	var out lease.Resource
	err := s.write(ctx, s.putOp(wr, &out))
	if err != nil {
		return lease.Resource{}, fmt.Errorf("put resource %q: %w", wr.Name, err)
	}
	return out, nil
}

// putOp is PutResource's operation; it sets *out to the resource written.
func (s *Store) putOp(wr store.ResourceWrite, out *lease.Resource) func(context.Context, *txn) error {
	return func(ctx context.Context, t *txn) error {
		f := t.s.mem.fences[wr.Name]
		fence, version, last := f.fence, f.version, t.s.mem.token
		owner, known, err := tokenOwner(ctx, t, wr.Token, wr.LeaseName)
		if err != nil {
			return err
		}
		if len(wr.Scope) > 0 {
			if last, err = scopedLast(ctx, t, wr.Scope, wr.Token); err != nil {
				return err
			}
		}
		reject := func(e *lease.Error) error {
			r := lease.Rejection{Resource: wr.Name, Lease: wr.LeaseName, PresentedToken: wr.Token, CurrentFence: e.CurrentFence,
				ClientAddr: wr.ClientAddr, UserAgent: wr.UserAgent, Reason: e.Message, Source: lease.RejectionSourceServer, KeyID: wr.Owner}
			if _, err := recordRejection(ctx, t, r, owner, known, wr.Scope); err != nil {
				return err
			}
			return e
		}
		fw := lease.FencedWrite{Resource: wr.Name, Token: wr.Token, Fence: fence, LastToken: last, LeaseName: wr.LeaseName,
			Scoped: len(wr.Scope) > 0, Shared: known && owner.shared}
		if wr.LeaseName != "" {
			g, ok, err := currentSettled(ctx, t, wr.LeaseName)
			if err != nil {
				return err
			}
			fw.Lease, fw.LeaseExists = g.rule(), ok
		}
		if e := lease.DecideFencedWrite(fw, ms(t.now)); e != nil {
			return reject(e)
		}
		if e := lease.DecideWriteCondition(wr.IfVersion, wr.IfAbsent, version); e != nil {
			return e
		}
		if err := checkQuota(ctx, t, wr); err != nil {
			return err
		}
		leaseName, holder := lease.Attribute(wr.Scope, wr.LeaseName, owner.name, owner.holder, known)
		*out = lease.Resource{Name: wr.Name, Fence: wr.Token, Version: version + 1, UpdatedAt: ms(t.now),
			Size: int64(len(wr.Value)), ContentType: wr.ContentType, Lease: leaseName, Holder: holder}
		if _, err := t.exec(ctx, stPutResource, out.Name, out.Fence, out.Version, nonNil(wr.Value), out.ContentType, t.now, out.Lease, out.Holder, wr.Owner,
			store.GrantName(owner.name, known)); err != nil {
			return fmt.Errorf("write resource: %w", w(err))
		}
		t.setFence(wr.Name, fenceRow{fence: out.Fence, version: out.Version}, true)
		t.dirty = true
		return nil
	}
}

// DeleteResource deletes a fenced resource and its fence. See store.Store.
func (s *Store) DeleteResource(ctx context.Context, name, actor string) error {
	err := s.free(ctx, func(ctx context.Context, t *txn) error {
		res, err := t.exec(ctx, stDeleteResource, name)
		if err != nil {
			return fmt.Errorf("delete resource: %w", w(err))
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("delete resource: %w", w(err))
		}
		if n == 0 {
			return lease.Errorf(lease.CodeNotFound, "no resource named %q exists", name)
		}
		t.setFence(name, fenceRow{}, false)
		return t.record(ctx, lease.Event{Type: lease.EventResourceDeleted, Resource: name, At: ms(t.now), Actor: actor})
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

// tokenOwner finds the grant that was given token, if it is still in the history: from memory
// when it is the current grant of the lease named with the write.
func tokenOwner(ctx context.Context, t *txn, token int64, leaseName string) (grant, bool, error) {
	if leaseName != "" {
		c, ok, err := t.lookup(ctx, leaseName)
		if err != nil {
			return grant{}, false, err
		}
		if ok && c.token == token {
			return t.current(ctx, leaseName)
		}
	}
	g, err := scanGrant(t.queryRow(ctx, stGrantByToken, token))
	if errors.Is(err, sql.ErrNoRows) {
		return grant{}, false, nil
	}
	if err != nil {
		return grant{}, false, fmt.Errorf("find the grant of token %d: %w", token, w(err))
	}
	return g, true, nil
}

// checkQuota refuses a write that would take its key's resources past wr.Quota
// (lease.CheckQuota), counting the key's other resources through resources_owner.
func checkQuota(ctx context.Context, t *txn, wr store.ResourceWrite) error {
	if wr.Owner == "" || wr.Quota == (lease.Quota{}) {
		return nil
	}
	var n int
	var bytes int64
	if err := t.tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(length(value)), 0) FROM resources
		INDEXED BY resources_owner WHERE owner = ? AND owner <> '' AND name <> ?`, wr.Owner, wr.Name).Scan(&n, &bytes); err != nil {
		return fmt.Errorf("count the key's resources: %w", w(err))
	}
	if e := lease.CheckQuota(wr.Quota, n, bytes, int64(len(wr.Value))); e != nil {
		return e
	}
	return nil
}

// scopedLast is the last token as a writer limited to scope may know it
// (lease.ScopedLastToken), found for a write with token: whether a grant in scope has a token at
// least as high matters only for a token above the clock, and grants above it are few.
func scopedLast(ctx context.Context, t *txn, scope lease.Scope, token int64) (int64, error) {
	now := ms(t.now)
	if token <= now.UnixMicro() {
		return lease.ScopedLastToken(0, now), nil
	}
	rows, err := t.tx.QueryContext(ctx, `SELECT name FROM grants WHERE token >= ?`, token)
	if err != nil {
		return 0, fmt.Errorf("find grants from token %d: %w", token, w(err))
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return 0, fmt.Errorf("find grants from token %d: %w", token, w(err))
		}
		if scope.Has(name) {
			return lease.ScopedLastToken(token, now), nil
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("find grants from token %d: %w", token, w(err))
	}
	return lease.ScopedLastToken(0, now), nil
}

// recordRejection inserts a rejection, filling lease and holder from the token's grant as a
// caller limited to scope may see them (lease.Attribute), and a rejected event on the lease
// when one is known.
func recordRejection(ctx context.Context, t *txn, r lease.Rejection, owner grant, known bool, scope lease.Scope) (lease.Rejection, error) {
	r.Lease, r.Holder = lease.Attribute(scope, r.Lease, owner.name, owner.holder, known)
	r.At = ms(t.now)
	err := t.queryRow(ctx, stRejection, r.Resource, r.Lease, r.PresentedToken, r.CurrentFence, r.Holder, r.ClientAddr, r.UserAgent, r.Reason, r.Source, t.now, r.KeyID).Scan(&r.ID)
	if err != nil {
		return r, fmt.Errorf("record rejection: %w", w(err))
	}
	// A rejection whose lease is unknown still goes into the event stream, with an empty name,
	// so watchers (the dashboard's rejections page) see every refusal.
	if err := t.record(ctx, lease.Event{Type: lease.EventRejected, Name: r.Lease, Token: r.PresentedToken,
		Holder: r.Holder, At: r.At, Resource: r.Resource}); err != nil {
		return r, err
	}
	t.dirty = true
	return r, nil
}

// RecordRejection records a rejection made outside leasekeeper. See store.Store.
func (s *Store) RecordRejection(ctx context.Context, r lease.Rejection, scope lease.Scope) (lease.Rejection, error) {
	var out lease.Rejection
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		owner, known, err := tokenOwner(ctx, t, r.PresentedToken, r.Lease)
		if err != nil {
			return err
		}
		out, err = recordRejection(ctx, t, r, owner, known, scope)
		return err
	})
	if err != nil {
		return lease.Rejection{}, fmt.Errorf("record rejection on %q: %w", r.Resource, err)
	}
	return out, nil
}

const resourceCols = `name, fence, version, updated_at, length(value), content_type, lease, holder`

func scanResource(r scanner) (lease.Resource, error) {
	var res lease.Resource
	var at int64
	err := r.Scan(&res.Name, &res.Fence, &res.Version, &at, &res.Size, &res.ContentType, &res.Lease, &res.Holder)
	res.UpdatedAt = ms(at)
	return res, err
}

// GetResource returns a resource with its value. See store.Store.
func (s *Store) GetResource(ctx context.Context, name string) (lease.Resource, error) {
	var value []byte
	row := s.r.QueryRowContext(ctx, `SELECT `+resourceCols+`, value FROM resources WHERE name = ?`, name)
	var res lease.Resource
	var at int64
	err := row.Scan(&res.Name, &res.Fence, &res.Version, &at, &res.Size, &res.ContentType, &res.Lease, &res.Holder, &value)
	if errors.Is(err, sql.ErrNoRows) {
		return lease.Resource{}, lease.Errorf(lease.CodeNotFound, "no resource named %q was ever written", name)
	}
	if err != nil {
		return lease.Resource{}, fmt.Errorf("get resource %q: %w", name, w(err))
	}
	res.UpdatedAt, res.Value = ms(at), value
	return res, nil
}

// writersKept is store.WritersKept in SQL.
var writersKept = strconv.Itoa(store.WritersKept)

// ResourceWriters returns the newest accepted writes of a resource. See store.Store.
func (s *Store) ResourceWriters(ctx context.Context, name string) ([]lease.Write, error) {
	var writers []byte
	err := s.r.QueryRowContext(ctx, `SELECT json(writers) FROM resources WHERE name = ?`, name).Scan(&writers)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, lease.Errorf(lease.CodeNotFound, "no resource named %q exists", name)
	}
	if err != nil {
		return nil, fmt.Errorf("writers of resource %q: %w", name, w(err))
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
	rows, err := s.r.QueryContext(ctx, `SELECT `+resourceCols+` FROM resources WHERE name > ? AND name >= ? AND name < ?
		ORDER BY name LIMIT ?`, after, lo, hi, limit+1)
	if err != nil {
		return store.Page[lease.Resource]{}, fmt.Errorf("list resources: %w", w(err))
	}
	page, err := collect(rows, limit, scanResource, func(r lease.Resource) string { return r.Name })
	if err != nil {
		return page, fmt.Errorf("list resources: %w", err)
	}
	return page, nil
}

// LeaseResources returns the resources last written under a lease. See store.Store.
func (s *Store) LeaseResources(ctx context.Context, name string, limit int) ([]lease.Resource, error) {
	// A semaphore's slots are "name#i": the range from "name#" to "name$" holds them all.
	rows, err := s.r.QueryContext(ctx, `SELECT `+resourceCols+` FROM resources INDEXED BY resources_grant
		WHERE grant_name <> '' AND (grant_name = ?1 OR grant_name >= ?1 || '#' AND grant_name < ?1 || '$') ORDER BY name LIMIT ?2`, name, store.ClampLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("resources of lease %q: %w", name, w(err))
	}
	page, err := collect(rows, store.MaxLimit, scanResource, func(r lease.Resource) string { return r.Name })
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
	list, err := json.Marshal(tokens)
	if err != nil {
		return nil, fmt.Errorf("grants of tokens: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT token, name, holder, shared, acquired_at FROM grants WHERE token IN (SELECT value FROM json_each(?))`, string(list))
	if err != nil {
		return nil, fmt.Errorf("grants of tokens: %w", w(err))
	}
	defer rows.Close()
	for rows.Next() {
		var tok int64
		var g store.TokenGrant
		var at int64
		if err := rows.Scan(&tok, &g.Name, &g.Holder, &g.Shared, &at); err != nil {
			return nil, fmt.Errorf("grants of tokens: %w", w(err))
		}
		g.AcquiredAt = ms(at)
		out[tok] = g
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("grants of tokens: %w", w(err))
	}
	return out, nil
}

// Rejections returns rejections newest first. See store.Store.
func (s *Store) Rejections(ctx context.Context, f store.RejectionFilter) (store.Page[lease.Rejection], error) {
	rq, err := store.CheckRejectionFilter(f)
	if err != nil {
		return store.Page[lease.Rejection]{}, err
	}
	before, limit := rq.Before, rq.Limit
	q := `SELECT id, resource, lease, presented_token, current_fence, holder, client_addr, user_agent, reason, source, at, key_id
		FROM rejections WHERE id < ?`
	args := []any{before}
	if f.Resource != "" {
		q += ` AND resource = ?`
		args = append(args, f.Resource)
	}
	if f.Lease != "" {
		q += ` AND lease = ?`
		args = append(args, f.Lease)
	}
	q += ` AND at >= ?`
	args = append(args, rq.Since)
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY id DESC LIMIT ?`, append(args, limit+1)...)
	if err != nil {
		return store.Page[lease.Rejection]{}, fmt.Errorf("list rejections: %w", w(err))
	}
	page, err := collect(rows, limit, scanRejection, func(r lease.Rejection) string { return store.SeqKey(r.ID) })
	if err != nil {
		return page, fmt.Errorf("list rejections: %w", err)
	}
	return page, nil
}

func scanRejection(r scanner) (lease.Rejection, error) {
	var x lease.Rejection
	var at int64
	err := r.Scan(&x.ID, &x.Resource, &x.Lease, &x.PresentedToken, &x.CurrentFence, &x.Holder,
		&x.ClientAddr, &x.UserAgent, &x.Reason, &x.Source, &at, &x.KeyID)
	x.At = ms(at)
	return x, err
}
