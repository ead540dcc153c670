// Package expiry runs the background sweeper: it records expiries when they happen (so the
// history, the held-leases gauge and waiters see them on time, not at the next request), keeps
// a timer for the next expiry rather than polling, and prunes history past its retention.
package expiry

import (
	"context"
	"log/slog"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// Store is what the sweeper needs of the store.
type Store interface {
	ExpireDue(ctx context.Context) (int, time.Time, error)
	Prune(ctx context.Context, r store.Retention) error
}

// Sweeper records expiries on time and prunes old history.
type Sweeper struct {
	store     Store
	clock     lease.Clock
	log       *slog.Logger
	retention store.Retention
	// MaxSleep bounds the time between sweeps even with no expiry due, so the persisted clock
	// high-water mark stays fresh.
	maxSleep   time.Duration
	pruneEvery time.Duration
	poke       chan time.Time
}

// New returns a sweeper. A zero retention keeps history forever.
func New(st Store, clock lease.Clock, retention store.Retention, log *slog.Logger) *Sweeper {
	return &Sweeper{store: st, clock: clock, log: log, retention: retention,
		maxSleep: time.Second, pruneEvery: 10 * time.Minute, poke: make(chan time.Time, 64)}
}

// Poke tells the sweeper that a lease now expires at at, so it can wake earlier than planned.
// It never blocks.
func (s *Sweeper) Poke(at time.Time) {
	select {
	case s.poke <- at:
	default:
	}
}

// ObserveEvents pokes the sweeper with the expiry of every grant or renewal; wire it to the
// store's commit hook.
func (s *Sweeper) ObserveEvents(evs []lease.Event) {
	for _, e := range evs {
		if !e.ExpiresAt.IsZero() {
			s.Poke(e.ExpiresAt)
		}
	}
}

// logFailure logs a failed sweep. A store that cannot write (unavailable: a full disk, an I/O
// error, a database locked) reports that itself, without repeating it every second as the
// sweeps would.
func (s *Sweeper) logFailure(what string, err error) {
	level := slog.LevelWarn
	if lease.IsCode(err, lease.CodeUnavailable) {
		level = slog.LevelDebug
	}
	s.log.Log(context.Background(), level, what, "err", err)
}

// Run sweeps until ctx ends.
func (s *Sweeper) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var wake time.Time // server time of the planned wake-up
	lastPrune := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case at := <-s.poke:
			if at.Before(wake) {
				wake = at
				timer.Reset(max(0, at.Sub(s.clock.Now())))
			}
			continue
		case <-timer.C:
		}
		n, next, err := s.store.ExpireDue(ctx)
		if err != nil && ctx.Err() == nil {
			s.logFailure("sweep expiries", err)
		} else if n > 0 {
			s.log.Debug("recorded expiries", "count", n)
		}
		now := s.clock.Now()
		if s.retention != (store.Retention{}) && now.Sub(lastPrune) >= s.pruneEvery {
			if err := s.store.Prune(ctx, s.retention); err != nil && ctx.Err() == nil {
				s.logFailure("prune history", err)
			}
			lastPrune = now
		}
		sleep := s.maxSleep
		if !next.IsZero() {
			// Wake a millisecond after the expiry: expires_at itself is the first instant
			// the lease is gone.
			sleep = min(sleep, max(0, next.Sub(now)+time.Millisecond))
		}
		wake = now.Add(sleep)
		timer.Reset(sleep)
	}
}
