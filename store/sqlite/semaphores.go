package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// loadSemaphores reads the limit of every semaphore, and which of them have shared slots.
func (s *Store) loadSemaphores(ctx context.Context) (map[string]int, map[string]bool, error) {
	rows, err := s.w.QueryContext(ctx, `SELECT name, lim, shared FROM semaphores`)
	if err != nil {
		return nil, nil, fmt.Errorf("load semaphores: %w", err)
	}
	defer rows.Close()
	out, shared := map[string]int{}, map[string]bool{}
	for rows.Next() {
		var name string
		var lim int
		var sh bool
		if err := rows.Scan(&name, &lim, &sh); err != nil {
			return nil, nil, fmt.Errorf("load semaphores: %w", err)
		}
		out[name] = lim
		if sh {
			shared[name] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("load semaphores: %w", err)
	}
	return out, shared, nil
}

// slotsOf reads whether name has slots, and how many: a semaphore's limit, or the shared slots
// used so far (shared).
func (s *Store) slotsOf(ctx context.Context, name string) (lim int, shared, ok bool, err error) {
	err = s.r.QueryRowContext(ctx, `SELECT lim, shared FROM semaphores WHERE name = ?`, name).Scan(&lim, &shared)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, false, nil
	}
	if err != nil {
		return 0, false, false, fmt.Errorf("read semaphore %q: %w", name, w(err))
	}
	return lim, shared, true, nil
}

// slotGrants reads the current grants of the first lim slots of name, those ever used.
func (s *Store) slotGrants(ctx context.Context, name string, lim int) ([]grant, error) {
	var out []grant
	for i := range lim {
		g, found, err := current(ctx, s.r, lease.SlotName(name, i))
		if err != nil {
			return nil, err
		}
		if found {
			out = append(out, g)
		}
	}
	return out, nil
}

// revokeSlots revokes slots of the semaphore name of limit lim: the one holding token, or
// every open one without a token.
func revokeSlots(ctx context.Context, t *txn, name string, lim int, token int64, actor string) error {
	slots, rules, exists := make([]grant, lim), make([]lease.Grant, lim), make([]bool, lim)
	for i := range lim {
		var err error
		if slots[i], exists[i], err = currentSettled(ctx, t, lease.SlotName(name, i)); err != nil {
			return err
		}
		rules[i] = slots[i].rule()
	}
	end, err := lease.DecideRevokeSlots(name, rules, exists, token)
	for _, i := range end {
		if err := endBy(ctx, t, slots[i], lease.EndRevoked, t.now, actor); err != nil {
			return err
		}
	}
	return err
}

// SharedNames returns which of names take shared leases. See store.Store.
func (s *Store) SharedNames(ctx context.Context, names []string) (map[string]bool, error) {
	if err := store.CheckNames(names); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	if len(names) == 0 {
		return out, nil
	}
	list, err := json.Marshal(names)
	if err != nil {
		return nil, fmt.Errorf("names taking shared leases: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT name FROM semaphores WHERE shared AND name IN (SELECT value FROM json_each(?))`, string(list))
	if err != nil {
		return nil, fmt.Errorf("names taking shared leases: %w", w(err))
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("names taking shared leases: %w", w(err))
		}
		out[name] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("names taking shared leases: %w", w(err))
	}
	return out, nil
}
