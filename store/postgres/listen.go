package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/lease"
)

// Every replica's OnCommit sees every replica's events, in seq order: its own right after their
// commit is flushed, and the others' when a NOTIFY (sent by each commit that recorded events)
// wakes its listener, which flushes, then reads them from the events table by seq. Seqs become
// visible in order (see insertEvents), so reading up to the newest committed seq never leaves
// a hole behind.

// publish hands events, the next ones after the last published, to OnCommit. s.pubMu is held.
func (s *Store) publish(evs []lease.Event) {
	if len(evs) == 0 {
		return
	}
	if s.onCommit != nil {
		s.onCommit(evs)
	}
	s.published.Store(evs[len(evs)-1].Seq)
}

// unpublished reads, on q, the committed events after the last published up to last, oldest
// first. s.pubMu is held; q must not be the pool (its holder never waits for the pool).
func (s *Store) unpublished(ctx context.Context, q queryer, last int64) ([]lease.Event, error) {
	from := s.published.Load()
	if from >= last {
		return nil, nil
	}
	rows, err := q.Query(ctx, `SELECT `+eventCols+` FROM events WHERE seq > $1 AND seq <= $2 ORDER BY seq`, from, last)
	if err != nil {
		return nil, translate(err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lease.Event, error) { return scanEvent(r) })
	if err != nil {
		return nil, translate(err)
	}
	return evs, nil
}

// publishUpTo publishes every event up to the last of own, a write's events, committed and
// flushed on conn: from memory when they are the next ones, otherwise read on conn (events of
// other writers, which committed before own and are flushed with it).
func (s *Store) publishUpTo(ctx context.Context, conn *pgx.Conn, own []lease.Event) {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	last := own[len(own)-1].Seq
	switch from := s.published.Load(); {
	case from >= last:
	case from+1 == own[0].Seq:
		s.publish(own)
	default:
		evs, err := s.unpublished(ctx, conn, last)
		if err != nil {
			// The listener publishes them at the next notification.
			s.log.Warn("read the events before this write's", "err", err)
		}
		s.publish(evs)
	}
}

// catchUp publishes every committed event not published yet, reading them on conn after a
// flush, so that only durable events are published.
func (s *Store) catchUp(ctx context.Context, conn *pgx.Conn) error {
	var latest *int64
	if err := conn.QueryRow(ctx, `SELECT max(seq) FROM events`).Scan(&latest); err != nil {
		return err
	}
	if latest == nil || *latest <= s.published.Load() {
		return nil
	}
	if _, err := conn.Exec(ctx, flushSQL); err != nil {
		return err
	}
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	evs, err := s.unpublished(ctx, conn, *latest)
	s.publish(evs)
	return err
}

// connectListener opens the listener's connection: it holds this replica's presence lock and
// listens for other replicas' commits and changes to waiting lines.
func (s *Store) connectListener(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := s.takePresence(ctx, conn); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	if _, err := conn.Exec(ctx, `LISTEN `+Channel+`; LISTEN `+LineChannel); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("listen: %w", err)
	}
	return conn, nil
}

// listen serves the listener's connection conn until ctx ends, reconnecting after a failure;
// after each (re)connection it catches up, so a notification missed while disconnected loses
// nothing.
func (s *Store) listen(ctx context.Context, conn *pgx.Conn) {
	defer close(s.listening)
	for {
		var err error
		if conn == nil {
			conn, err = s.connectListener(ctx)
		}
		if conn != nil {
			err = s.listenOn(ctx, conn)
			conn = nil
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("listening for other replicas' events; reconnecting", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// listenOn catches up and waits for notifications on conn until it fails or ctx ends, and
// closes it.
func (s *Store) listenOn(ctx context.Context, conn *pgx.Conn) error {
	defer conn.Close(context.Background())
	for {
		if err := s.catchUp(ctx, conn); err != nil {
			return fmt.Errorf("catch up: %w", err)
		}
		n, err := conn.WaitForNotification(ctx)
		// A line's change, and a commit whose events are published already, or will be by
		// this replica's writer (its own, and the ones before them, which it publishes
		// with them), need no catching up.
		for err == nil && (n.Channel == LineChannel || published(n.Payload, max(s.published.Load(), s.committed.Load()))) {
			if n.Channel == LineChannel && s.onLine != nil {
				s.onLine(n.Payload)
			}
			n, err = conn.WaitForNotification(ctx)
		}
		if err != nil {
			return fmt.Errorf("wait: %w", err)
		}
	}
}

// published reports whether payload, a commit's notification (its last seq), names a seq at or
// below last: nothing to catch up.
func published(payload string, last int64) bool {
	seq, err := strconv.ParseInt(payload, 10, 64)
	return err == nil && seq <= last
}
