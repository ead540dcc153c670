package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// The waiting line of acquire lives in the database, so that it is one line across replicas,
// first come first served: a row of the waiters table per waiting request, ordered by id, and
// inserted under the name's row lock (ids grow in the order waiters joined). While a name has
// live waiters, only the first of them is granted it; an acquire from anyone else is refused
// with lease_held, as if the name were held. A handover request naming a holder puts that
// holder's first live waiter first once the grant it was about ends (until the name's next
// grant): each waiter's holder is in its row, so this holds whatever replica it waits on.
//
// A waiter is live while its replica lives: each replica holds a session advisory lock
// (presenceClass, its replica id) on its listener's connection, which PostgreSQL drops with the
// connection when the replica dies. Whoever next reads the line of a name deletes the waiters
// of replicas whose lock is gone. Every change to a line that no event announces (a waiter
// leaving, dead waiters removed) is sent on LineChannel with the name as payload, so that the
// next waiter, on whatever replica, tries at once.

// LineChannel is the LISTEN/NOTIFY channel of changes to a name's waiting line.
const LineChannel = "leasekeeper_line"

// presenceClass is the first key of the replicas' presence locks ("LKWP").
const presenceClass int32 = 0x4c4b5750

// liveReplicas is a CTE of the replicas that hold their presence lock in this database; its
// query passes presenceClass as $2.
const liveReplicas = `WITH live AS MATERIALIZED (
	SELECT l.objid::bigint AS replica FROM pg_locks l
	WHERE l.locktype = 'advisory' AND l.classid::bigint = $2 AND l.objsubid = 2 AND l.granted
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))`

// place is a live waiter in a name's line: its id, the holder it waits as, and whether it is
// one place of an acquire of several names.
type place struct {
	id     int64
	holder string
	multi  bool
}

// lineOf returns the live waiters of name, oldest first, and deletes the dead ones (telling
// every replica). The caller holds name's row lock.
func lineOf(ctx context.Context, t *txn, name string) ([]place, error) {
	rows, err := t.tx.Query(ctx, liveReplicas+`
		SELECT w.id, w.holder, w.multi, EXISTS (SELECT 1 FROM live WHERE live.replica = w.replica) FROM waiters w
		WHERE w.name = $1 ORDER BY w.id`, name, presenceClass)
	if err != nil {
		return nil, fmt.Errorf("read the line of %q: %w", name, err)
	}
	var line []place
	var dead []int64
	var w place
	var alive bool
	_, err = pgx.ForEachRow(rows, []any{&w.id, &w.holder, &w.multi, &alive}, func() error {
		if alive {
			line = append(line, w)
		} else {
			dead = append(dead, w.id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the line of %q: %w", name, err)
	}
	if len(dead) > 0 {
		if _, err := t.tx.Exec(ctx, `DELETE FROM waiters WHERE id = ANY($1)`, dead); err != nil {
			return nil, fmt.Errorf("remove the waiters of dead replicas from %q: %w", name, err)
		}
		if err := notifyLine(ctx, t, name); err != nil {
			return nil, err
		}
	}
	return line, nil
}

// handedTo returns the holder that the handover request of g, the name's last grant, named,
// once g has ended: the holder whose first live waiter goes first in line, until the next
// grant of the name. "" for none (no grant, g still open, no request, or one naming nobody).
func handedTo(ctx context.Context, t *txn, g grant, ok bool) (string, error) {
	if !ok || g.ended == nil {
		return "", nil
	}
	var to string
	err := t.tx.QueryRow(ctx, `SELECT to_holder FROM handovers WHERE token = $1`, g.token).Scan(&to)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the handover of token %d: %w", g.token, err)
	}
	return to, nil
}

// order returns the ids of line in the order they are served: first come first served, except
// that the first single-name waiter of holder to, if any, goes first.
func order(line []place, to string) []int64 {
	ids := make([]int64, 0, len(line))
	waiters := make([]lease.Waiter, len(line))
	for i, w := range line {
		waiters[i] = lease.Waiter{Holder: w.holder, Multi: w.multi}
	}
	first := lease.HandedFirst(waiters, to)
	if first > 0 {
		ids = append(ids, line[first].id)
	}
	for i, w := range line {
		if i != first || first == 0 {
			ids = append(ids, w.id)
		}
	}
	return ids
}

func notifyLine(ctx context.Context, t *txn, name string) error {
	if _, err := t.tx.Exec(ctx, `SELECT pg_notify($1, $2)`, LineChannel, name); err != nil {
		return fmt.Errorf("notify the line of %q: %w", name, err)
	}
	return nil
}

// checkLine decides whether waiter (0: a request not in line) may be granted the free name:
// only the first live waiter may, or anyone while nobody waits. First is the first live waiter
// of the holder that the handover request of the name's last grant named, if that grant has
// ended and such a waiter is in line; otherwise the oldest live waiter. It returns how many
// live waiters are ahead of waiter. g and ok are the name's last grant; now is the decision's
// time.
func checkLine(ctx context.Context, t *txn, name string, waiter int64, g grant, ok bool, now int64) (int, error) {
	line, err := lineOf(ctx, t, name)
	if err != nil {
		return 0, err
	}
	var to string
	if len(line) > 1 { // with one waiter or none, nobody can go before anyone
		if to, err = handedTo(ctx, t, g, ok); err != nil {
			return 0, err
		}
	}
	ids := order(line, to)
	pos := slices.Index(ids, waiter)
	if waiter != 0 && pos < 0 {
		return 0, fmt.Errorf("%w: %w", lease.Errorf(lease.CodeUnavailable,
			"this request's place in line for %q was lost (its server's database session ended); ask again", name), store.ErrPlaceLost)
	}
	if len(ids) == 0 || pos == 0 {
		return 0, nil
	}
	ahead := pos
	if pos < 0 {
		ahead = len(ids)
	}
	e := lease.Errorf(lease.CodeHeld, "lease %q has %d requests waiting for it", name, ahead)
	if ok {
		e.Holder, e.ExpiresAt = g.holder, ms(g.expires)
	}
	e.AvailableAt = ms(now)
	return ahead, e
}

// JoinLine puts a request of holder at the end of name's waiting line and returns its place,
// until AcquireInLine grants it the name or LeaveLine takes it out. See queue.SharedStore.
func (s *Store) JoinLine(ctx context.Context, name, holder string) (int64, error) {
	var id int64
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		if _, _, err := lockName(ctx, t, name, true); err != nil {
			return err
		}
		now, err := t.now(ctx)
		if err != nil {
			return err
		}
		id, err = s.joinLocked(ctx, t, name, holder, now, false)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("wait for %q: %w", name, err)
	}
	return id, nil
}

// joinLocked puts a request of holder (one place of an acquire of several names, with multi) at
// the end of name's line at now; the caller holds
// name's row lock, so that places are taken in the order of the line.
func (s *Store) joinLocked(ctx context.Context, t *txn, name, holder string, now int64, multi bool) (int64, error) {
	var id int64
	if err := t.tx.QueryRow(ctx, `INSERT INTO waiters (name, replica, joined_at, holder, multi) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
		name, s.replica.Load(), now, holder, multi).Scan(&id); err != nil {
		return 0, fmt.Errorf("join the line: %w", err)
	}
	return id, nil
}

// LeaveLine takes waiter id out of name's line, telling every replica; a waiter already gone
// changes nothing. See queue.SharedStore.
func (s *Store) LeaveLine(ctx context.Context, name string, id int64) error {
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		tag, err := t.tx.Exec(ctx, `DELETE FROM waiters WHERE id = $1`, id)
		if err != nil {
			return fmt.Errorf("leave the line: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		return notifyLine(ctx, t, name)
	})
	if err != nil {
		return fmt.Errorf("leave the line of %q: %w", name, err)
	}
	return nil
}

// AcquireInLine grants the name to waiter id when it is the first live waiter in line and the
// name is free, taking it out of the line in the same transaction. Refused, it answers
// lease_held and how many live waiters are ahead of it (0 when it is first or the name is
// held). Codes: those of Acquire; unavailable when its place was lost (its replica's session
// ended and another replica removed it). See queue.SharedStore.
func (s *Store) AcquireInLine(ctx context.Context, p store.AcquireParams, id int64) (lease.Lease, int, error) {
	if id <= 0 {
		return lease.Lease{}, 0, errors.New("AcquireInLine: no place in line")
	}
	return s.acquire(ctx, p, id)
}

// LineLength returns how many live requests wait for name, on every replica.
func (s *Store) LineLength(ctx context.Context, name string) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, liveReplicas+`
		SELECT count(*) FROM waiters w WHERE w.name = $1 AND EXISTS (SELECT 1 FROM live WHERE live.replica = w.replica)`,
		name, presenceClass).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the waiters of %q: %w", name, translate(err))
	}
	return n, nil
}

// takePresence takes this replica's presence lock on conn: its id so far if it can (a
// reconnection), otherwise a new one.
func (s *Store) takePresence(ctx context.Context, conn *pgx.Conn) error {
	id := s.replica.Load()
	for range 8 {
		if id != 0 {
			var ok bool
			if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, presenceClass, id).Scan(&ok); err != nil {
				return fmt.Errorf("take the presence lock: %w", err)
			}
			if ok {
				s.replica.Store(id)
				return nil
			}
		}
		if err := conn.QueryRow(ctx, `SELECT nextval('replicas')::int`).Scan(&id); err != nil {
			return fmt.Errorf("take a replica id: %w", err)
		}
	}
	return errors.New("take the presence lock: every replica id tried is held")
}
