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
// commit is flushed, and the others' when the NOTIFY that each flush sends (queueFlush) wakes
// its listener, which reads them from the events table by seq up to the one the notification
// names: those have committed and are durable. Seqs become visible in order (see
// insertEvents), so reading up to a committed seq never leaves a hole behind.

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

// publishPage is how many events publishThrough reads at a time.
const publishPage = 10_000

// publishThrough publishes the committed events after the last published up to last, oldest
// first, reading them on q a page at a time: a replica cut off from the database for minutes
// has that many to read when it is back, and holds one page of them, not all. s.pubMu is
// held; q must not be the pool (its holder never waits for the pool).
func (s *Store) publishThrough(ctx context.Context, q queryer, last int64) error {
	page := publishPage
	if s.publishPage > 0 {
		page = s.publishPage
	}
	for {
		from := s.published.Load()
		if from >= last {
			return nil
		}
		rows, err := q.Query(ctx, `SELECT `+eventCols+` FROM events WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3`, from, last, page)
		if err != nil {
			return translate(err)
		}
		evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lease.Event, error) { return scanEvent(r) })
		if err != nil {
			return translate(err)
		}
		if len(evs) == 0 {
			return nil
		}
		s.publish(evs)
	}
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
		if err := s.publishThrough(ctx, conn, last); err != nil {
			// The listener publishes them at the next notification.
			s.log.Warn("read the events before this write's", "err", err)
		}
	}
}

// catchUp publishes every committed event not published yet, reading them on conn after a
// flush, so that only durable events are published: what a listener does when it (re)connects,
// having heard no notification since.
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
	return s.catchUpTo(ctx, conn, *latest)
}

// catchUpTo publishes the events up to last, committed and durable, reading on conn those not
// published yet.
func (s *Store) catchUpTo(ctx context.Context, conn *pgx.Conn, last int64) error {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	return s.publishThrough(ctx, conn, last)
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
	if err := s.catchUp(ctx, conn); err != nil {
		return fmt.Errorf("catch up: %w", err)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait: %w", err)
		}
		if n.Channel == LineChannel {
			if s.onLine != nil {
				s.onLine(n.Payload)
			}
			continue
		}
		// A flush's notification names its commit's last seq. The events up to a seq this
		// replica's writer committed are published by the writer (its own, and the ones
		// before them, which it publishes with them).
		last, err := strconv.ParseInt(n.Payload, 10, 64)
		switch {
		case err != nil:
			err = s.catchUp(ctx, conn)
		case last > max(s.published.Load(), s.committed.Load()):
			err = s.catchUpTo(ctx, conn, last)
		}
		if err != nil {
			return fmt.Errorf("catch up: %w", err)
		}
	}
}
