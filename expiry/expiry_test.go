package expiry_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasekeeper/leasekeeper/expiry"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// bubbleClock is the server clock inside a synctest bubble, where time.Now is fake and moves
// only when every goroutine is blocked, so the sweeper's timers and its clock agree.
type bubbleClock struct{}

func (bubbleClock) Now() time.Time { return time.Now() }

// fakeStore expires leases at their expiry and remembers when each expiry was noticed and
// when Prune ran.
type fakeStore struct {
	mu       sync.Mutex
	open     []time.Time // expiries of open leases
	noticed  map[time.Time]time.Time
	prunes   []time.Time
	retained []time.Duration
	sweeps   int
	fail     bool
	failWith error // the error of a failing sweep; nil for "database is locked"
	limit    int   // expiries a sweep records at most, as store.SweepLimit; 0 for all
}

func newFakeStore(expiries ...time.Time) *fakeStore {
	return &fakeStore{open: expiries, noticed: map[time.Time]time.Time{}}
}

func (s *fakeStore) add(exp time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = append(s.open, exp)
}

func (s *fakeStore) ExpireDue(context.Context) (int, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweeps++
	if s.fail {
		if s.failWith != nil {
			return 0, time.Time{}, s.failWith
		}
		return 0, time.Time{}, errors.New("database is locked")
	}
	now := time.Now()
	var next time.Time
	var still []time.Time
	n := 0
	slices.SortFunc(s.open, time.Time.Compare)
	for _, exp := range s.open {
		if !exp.After(now) && (s.limit == 0 || n < s.limit) {
			s.noticed[exp] = now
			n++
			continue
		}
		still = append(still, exp)
		if next.IsZero() || exp.Before(next) {
			next = exp
		}
	}
	s.open = still
	if s.limit > 0 && n == s.limit {
		next = now
	}
	return n, next, nil
}

func (s *fakeStore) Prune(_ context.Context, r store.Retention) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prunes = append(s.prunes, time.Now())
	s.retained = append(s.retained, r.Age)
	return nil
}

func (s *fakeStore) noticedAt(exp time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.noticed[exp]
	return at, ok
}

// start runs the sweeper until the test's bubble ends.
func start(t *testing.T, st expiry.Store, retention time.Duration) *expiry.Sweeper {
	t.Helper()
	sw := expiry.New(st, bubbleClock{}, store.Retention{Age: retention}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sw.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return sw
}

func TestSweeperRecordsExpiryOnTime(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   time.Duration
	}{
		{"OK/WithinMaxSleep", 300 * time.Millisecond},
		{"OK/BetweenTicks", 2500 * time.Millisecond},
		{"OK/Later", 17*time.Second + 123*time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				exp := time.Now().Add(tt.in)
				st := newFakeStore(exp)
				start(t, st, 0)
				time.Sleep(tt.in - time.Millisecond)
				synctest.Wait()
				if at, ok := st.noticedAt(exp); ok {
					t.Fatalf("expiry at +%v recorded early, at %v", tt.in, at)
				}
				time.Sleep(5 * time.Millisecond)
				synctest.Wait()
				at, ok := st.noticedAt(exp)
				if !ok || at.Sub(exp) > 2*time.Millisecond {
					t.Errorf("expiry at +%v recorded %v (ok %v), want within 2 ms of it", tt.in, at.Sub(exp), ok)
				}
			})
		})
	}
}

// TestSweeperSweepsAgainWhileDue: a store that records a bounded number of expiries a sweep
// (store.SweepLimit) answers that more are due, and the sweeper sweeps again at once, not after
// its longest sleep: 2,500 leases that expire together are all recorded within milliseconds.
func TestSweeperSweepsAgainWhileDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		exp := time.Now().Add(time.Second)
		st := newFakeStore()
		st.limit = 1000
		for range 2500 {
			st.add(exp)
		}
		start(t, st, 0)
		time.Sleep(time.Second + 10*time.Millisecond)
		synctest.Wait()
		st.mu.Lock()
		defer st.mu.Unlock()
		if len(st.open) != 0 {
			t.Errorf("%d of 2,500 leases due for 10 ms not recorded yet, after %d sweeps; want all of them", len(st.open), st.sweeps)
		}
	})
}

func TestSweeperPokeWakesEarlier(t *testing.T) {
	for _, tt := range []struct {
		name string
		poke func(sw *expiry.Sweeper, exp time.Time)
	}{
		{"Poke", func(sw *expiry.Sweeper, exp time.Time) { sw.Poke(exp) }},
		{"ObserveEvents", func(sw *expiry.Sweeper, exp time.Time) {
			sw.ObserveEvents([]lease.Event{{Type: lease.EventReleased}, {Type: lease.EventAcquired, ExpiresAt: exp}})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newFakeStore()
				sw := start(t, st, 0)
				synctest.Wait() // the first sweep found nothing: it sleeps the longest (1 s)
				time.Sleep(100 * time.Millisecond)
				exp := time.Now().Add(200 * time.Millisecond)
				st.add(exp)
				tt.poke(sw, exp)
				time.Sleep(205 * time.Millisecond)
				synctest.Wait()
				at, ok := st.noticedAt(exp)
				if !ok || at.Sub(exp) > 2*time.Millisecond {
					t.Errorf("poked expiry recorded %v after it (ok %v), want at once; without the poke it waits for the next tick", at.Sub(exp), ok)
				}
			})
		})
	}
}

func TestSweeperPokeNeverBlocks(t *testing.T) {
	sw := expiry.New(newFakeStore(), bubbleClock{}, store.Retention{}, slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	go func() {
		for range 1000 { // far more than the buffer, with nobody running the sweeper
			sw.Poke(time.Now())
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Poke blocked with the sweeper not running")
	}
}

func TestSweeperPrunes(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := newFakeStore()
			begin := time.Now()
			start(t, st, 24*time.Hour)
			time.Sleep(25 * time.Minute)
			synctest.Wait()
			st.mu.Lock()
			defer st.mu.Unlock()
			// Once at start, then every 10 minutes.
			if len(st.prunes) != 3 {
				t.Fatalf("Prune ran %d times in 25 min, want 3 (at 0, 10, 20 min): %v", len(st.prunes), st.prunes)
			}
			for i, at := range st.prunes {
				if d := at.Sub(begin) - time.Duration(i)*10*time.Minute; d < 0 || d > 2*time.Second {
					t.Errorf("prune %d at +%v, want about +%v", i, at.Sub(begin), time.Duration(i)*10*time.Minute)
				}
				if st.retained[i] != 24*time.Hour {
					t.Errorf("Prune(%v), want the retention 24h", st.retained[i])
				}
			}
		})
	})
	t.Run("OffWithoutRetention", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := newFakeStore()
			start(t, st, 0)
			time.Sleep(time.Hour)
			synctest.Wait()
			st.mu.Lock()
			defer st.mu.Unlock()
			if len(st.prunes) != 0 {
				t.Errorf("Prune ran %d times with retention 0, want never", len(st.prunes))
			}
		})
	})
}

func TestSweeperSurvivesErrorsAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFakeStore()
		st.fail = true
		sw := expiry.New(st, bubbleClock{}, store.Retention{}, slog.New(slog.DiscardHandler))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { sw.Run(ctx); close(done) }()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		st.mu.Lock()
		sweeps := st.sweeps
		st.fail = false
		st.mu.Unlock()
		if sweeps < 5 {
			t.Errorf("%d sweeps in 10 s while the store failed, want it to keep trying about every second", sweeps)
		}
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Run did not return after its context ended")
		}
	})
}

// TestSweeperLeavesUnavailableToTheStore: a store that cannot write says so itself, at most
// every few seconds; the sweeper, which tries every second, must not repeat it at WARN. Other
// failures it still warns about.
func TestSweeperLeavesUnavailableToTheStore(t *testing.T) {
	for _, tt := range []struct {
		name  string
		err   error
		warns bool
	}{
		{"Unavailable", lease.Errorf(lease.CodeUnavailable, "the database cannot grow: the disk is full"), false},
		{"Other", errors.New("no such table: grants"), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newFakeStore()
				st.fail, st.failWith = true, tt.err
				var buf strings.Builder
				var mu sync.Mutex
				log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
					mu.Lock()
					defer mu.Unlock()
					return buf.Write(p)
				}), &slog.HandlerOptions{Level: slog.LevelInfo}))
				sw := expiry.New(st, bubbleClock{}, store.Retention{}, log)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { sw.Run(ctx); close(done) }()
				time.Sleep(5 * time.Second)
				cancel()
				<-done
				mu.Lock()
				defer mu.Unlock()
				if got := strings.Contains(buf.String(), "level=WARN"); got != tt.warns {
					t.Errorf("5 s of failing sweeps (%v) logged a warning: %v, want %v; log:\n%s", tt.err, got, tt.warns, buf.String())
				}
			})
		})
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestSweeperWithSQLite: the sweeper over the real store records the expiry in the history,
// stamped at the moment of expiry, without any request touching the lease.
func TestSweeperWithSQLite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "leasekeeper.db"), sqlite.Options{Clock: bubbleClock{}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		l, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w1", TTL: 1500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		sw := expiry.New(s, s.Clock(), store.Retention{}, slog.New(slog.DiscardHandler))
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { sw.Run(runCtx); close(done) }()
		defer func() { cancel(); <-done }()
		sw.Poke(l.ExpiresAt)
		time.Sleep(1600 * time.Millisecond)
		synctest.Wait()
		p, err := s.Events(ctx, store.EventFilter{Name: "job"})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) != 2 || p.Items[1].Type != lease.EventExpired || !p.Items[1].At.Equal(l.ExpiresAt) {
			t.Errorf("events = %+v, want acquired then expired at %v", p.Items, l.ExpiresAt)
		}
		if n, _ := s.HeldCount(ctx, ""); n != 0 {
			t.Errorf("HeldCount() = %d, want 0", n)
		}
	})
}
